"""What keeps large runs checkable, on a real SparkSession: the scale oracle when the brute force
is over its budget, pairs of sole objects counted on the workers instead of shuffled, and the
peak memory of the driver and the executors in the runs table."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from hydra import compose, initialize_config_dir

from harness.core.events import Events, digest_of
from harness.families.range.oracle import oracle_keys
from harness.report.results import PROJECT_ROOT, read_runs_table
from harness.run.config import register_configs
from harness.run.runner import run_experiment

register_configs()
TINY = ["workload=tiny", "dataset.size=4000", "progress=false", "mlflow.enabled=false", "seed=9", "workers=3",
        "epochs.size=1500", "strategy=all", "strategy.include=[grid,text_hash]"]


def config(results_dir: Path, *overrides):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        return compose(config_name="config", overrides=[*TINY, f"results_dir={results_dir}", *overrides])


def test_tiled_oracle_local_pairs_and_peak_memory_in_the_runs_table(spark, tmp_path):
    rows = run_experiment(config(tmp_path, "oracle.max_checks=1"))  # over budget: the tiled oracle
    events = Events.from_arrow(pq.read_table(next((tmp_path / "cache" / "workloads").glob("*/events.parquet"))))
    brute = digest_of(oracle_keys(events))  # the driver's brute force, computed here
    by = {r["strategy"]: r for r in rows}
    for r in rows:
        assert r["oracle_method"] == "tiled" and r["oracle_ok"] is True
        assert r["result_digest"] == brute
        assert r["driver_peak_rss_bytes"] > 50e6  # a Python process with numpy and pyarrow, and a JVM
        assert r["executor_peak_rss_bytes"] > 20e6  # a Python worker with numpy and pyarrow
    assert read_runs_table(tmp_path)["oracle_method"].tolist() == ["tiled", "tiled"]
    # one copy per object: no pair shuffled; text routing replicates objects: some pairs shuffled
    assert by["grid"]["results_local"] == by["grid"]["result_count"] > 0
    assert 0 < by["text_hash"]["results_local"] < by["text_hash"]["result_count"]
    # (kept pairs go through the merge: the fast cluster test keeps them and counts them)
