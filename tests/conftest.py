"""Shared fixtures: a real local SparkSession and a throw-away results folder."""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import settings

# no per-example deadline: a deadline is a wall-clock assert, and the first example of a test pays
# numba's compile or cache load of every kernel it reaches (Events.take's CSR gather is one), which
# failed a correctness test at 294 ms on a cold cache. Speed is measured in benchmarks/.
settings.register_profile("stps", deadline=None)
settings.load_profile("stps")

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["STPS_REPEAT"] = "1"  # each measured epoch timed once (the default run repeats: conf/config.yaml)
os.environ["STPS_AA_PAIR"] = "false"  # a preset sweep does not measure its first job again (conf/config.yaml)


@pytest.fixture(scope="session")
def spark():
    from harness.run.spark import get_session

    return get_session("local[2]")


@pytest.fixture()
def results_dir(tmp_path, monkeypatch):
    root = tmp_path / "results"
    monkeypatch.setenv("STPS_RESULTS", str(root))
    return root
