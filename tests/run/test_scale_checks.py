"""What keeps large runs checkable, on a real SparkSession: the scale oracle when the brute force
is over its budget, pairs of sole objects counted on the workers instead of shuffled, and the
peak memory of the driver and the executors in the runs table."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir

from harness.report.results import PROJECT_ROOT, read_runs_table
from harness.run.config import register_configs
from harness.run.runner import run_experiment

register_configs()
TINY = ["workload=tiny", "dataset.size=4000", "progress=false", "mlflow.enabled=false", "seed=9", "workers=3"]


def config(results_dir: Path, *overrides):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        return compose(config_name="config", overrides=[*TINY, f"results_dir={results_dir}", *overrides])


def test_past_the_brute_force_budget_the_tiled_oracle_checks_the_run(spark, tmp_path):
    brute = run_experiment(config(tmp_path / "a", "strategy=grid"))[0]
    tiled = run_experiment(config(tmp_path / "b", "strategy=grid", "oracle.max_checks=1"))[0]
    assert brute["oracle_method"] == "brute" and tiled["oracle_method"] == "tiled"
    assert brute["oracle_ok"] is True and tiled["oracle_ok"] is True
    assert brute["result_digest"] == tiled["result_digest"]
    assert read_runs_table(tmp_path / "b").iloc[-1]["oracle_method"] == "tiled"


def test_sole_object_pairs_are_counted_on_the_workers_with_the_same_digest(spark, tmp_path):
    on = run_experiment(config(tmp_path / "on", "strategy=all", "strategy.include=[grid,text_hash]", "epochs.size=1500"))
    off = run_experiment(config(tmp_path / "off", "strategy=all", "strategy.include=[grid,text_hash]", "epochs.size=1500", "local_pairs=false"))
    by = {r["strategy"]: r for r in on}
    assert all(r["oracle_ok"] is True for r in on + off)
    assert [r["result_digest"] for r in on] == [r["result_digest"] for r in off]
    assert by["grid"]["results_local"] == by["grid"]["result_count"] > 0  # one copy per object: no pair shuffled
    assert 0 < by["text_hash"]["results_local"] < by["text_hash"]["result_count"]
    assert all(r["results_local"] == 0 for r in off)
    kept = run_experiment(config(tmp_path / "kept", "strategy=grid", "keep_pairs=true"))[0]
    assert kept["results_local"] == 0 and kept["oracle_ok"] is True  # kept pairs go through the merge


def test_peak_memory_of_driver_and_executors_is_recorded(spark, tmp_path):
    row = run_experiment(config(tmp_path, "strategy=grid"))[0]
    assert row["driver_peak_rss_bytes"] > 50e6  # a Python process with numpy, pyarrow and a JVM
    assert row["executor_peak_rss_bytes"] > 20e6  # a Python worker with numpy and pyarrow
