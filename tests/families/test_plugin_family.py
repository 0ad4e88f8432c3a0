"""The family plugin path is real, not range-shaped: a toy family (examples/families/first_k.py,
copied to a temporary module outside the project) registers itself by being imported, and runs
through the real Spark pipeline with two strategies (and in process with every one), exact against
its own oracle, with merger state across epochs, the epoch's query events at the merge and
feedback to the router; no engine file names it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from harness.families import registry as families
from harness.report.results import PROJECT_ROOT
from harness.run.config import ConfigError, register_configs, validate
from strategies import registry

register_configs()
SOURCE = PROJECT_ROOT / "examples" / "families" / "first_k.py"


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plugin")
    shutil.copy(SOURCE, folder / "toy_first_k.py")
    sys.path.insert(0, str(folder))
    yield "toy_first_k"
    sys.path.remove(str(folder))


def config(results_dir, *overrides):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        return compose(config_name="config", overrides=[
            "workload=tiny", "dataset.size=4000", "progress=false", "seed=5", "mlflow.enabled=false",
            f"results_dir={results_dir}", *overrides])


def test_an_unloaded_family_is_an_error_naming_the_known_ones(tmp_path):
    with pytest.raises(ConfigError, match="workload.family='first_k'.*range"):
        validate(config(tmp_path, "workload.family=first_k"))


def test_the_plugin_registers_and_routes_like_range(plugin, tmp_path):
    cfg = config(tmp_path, f"families=[{plugin}]", "workload.family=first_k", "strategy=all")
    runs = validate(cfg)
    assert "first_k" in families.names()
    assert [r.name for r in runs] == registry.supporting("range") == registry.supporting("first_k")


def test_every_strategy_in_process(plugin):
    from harness.engine.simulate import simulate
    from tests.streams import random_stream

    families.load_plugins([plugin])
    fam = families.get("first_k")
    ev = random_stream(seed=3, n_objects=900, n_queries=60)
    q = ev.family >= 0
    ev.cols["family"][q] = fam.code
    ev.cols["k"][q] = 1 + ev.id[q] % 3
    expected = None
    for name in registry.supporting("first_k"):
        res = simulate(ev, 200, name, 4, epoch_events=250)
        assert res.exact, name
        expected = expected or res.digest
        assert res.digest == expected
        assert res.feedback_rows > 0  # some subscriptions filled up, and the router heard it
    # repeated: the plugin's own result type (an Arrow table) is compared between repetitions
    assert simulate(ev, 200, name, 4, epoch_events=250, repeat=2).digest == expected
    capped = int(np.unique(fam.oracle(ev) >> 32, return_counts=True)[1].max())
    assert capped <= 3  # k is at most 3: the cap is real, the results are not range's


@pytest.mark.spark
@pytest.mark.slow  # CI time: make test-cluster runs it
def test_two_strategies_on_spark_match_the_oracle_across_epochs(spark, plugin, tmp_path):
    from harness.run.runner import run_experiment

    rows = run_experiment(config(tmp_path, f"families=[{plugin}]", "workload.family=first_k", "strategy=all",
                                 "strategy.include=[grid,kdtree]", "workers=3", "epochs.size=400"))
    assert [r["strategy"] for r in rows] == ["grid", "kdtree"]
    for r in rows:
        assert r["status"] == "ok", r.get("traceback")
        assert r["family"] == "first_k"
        assert r["epochs"] > 1  # merger state had to carry over
        assert r["oracle_ok"] is True, r["result_digest"]
        assert r["result_count"] > 0
        assert r["feedback_rows"] > 0
    assert rows[0]["result_digest"] == rows[1]["result_digest"]
