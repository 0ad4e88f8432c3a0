"""The whole harness on a real local SparkSession, a real MLflow sqlite store and Hydra configs:
merged results equal the oracle's for every registered strategy and 2, 3, 8, 16 workers; the
same seed gives the same digest; every run lands in the runs table, its folder and MLflow."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from harness.report import results
from harness.run.config import register_configs
from harness.report.results import PROJECT_ROOT, RUNS_TABLE_COLUMNS
from harness.run.runner import run_experiment
from strategies import registry

register_configs()
TINY = ["workload=tiny", "dataset.size=4000", "progress=false", "seed=9"]


def config(results_dir: Path, *overrides):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        cfg = compose(config_name="config", overrides=[*TINY, f"results_dir={results_dir}", *overrides])
    return cfg


@pytest.fixture(scope="module")
def shared_results(tmp_path_factory):
    return tmp_path_factory.mktemp("results")


# The full 2/3/8/16 matrix runs in-process in test_strategies.py; on Spark, 5 workers over the
# 4 partitions of local[2] put one worker alone in some partitions and two together in another.
@pytest.mark.parametrize("workers", [5])
def test_every_strategy_matches_the_oracle_on_spark(spark, shared_results, workers):
    rows = run_experiment(config(shared_results, f"workers={workers}", "strategy=all"))
    assert [r["strategy"] for r in rows] == registry.supporting("range")
    for r in rows:
        assert r["status"] == "ok", r.get("traceback")
        assert r["oracle_ok"] is True, (r["strategy"], r["result_digest"])
        assert r["result_count"] > 0
        assert r["throughput_eps"] > 0 and r["latency_p50_ms"] >= 0
        assert r["latency_p50_ms"] <= r["latency_p95_ms"] <= r["latency_p99_ms"]
        assert r["load_max_mean"] >= 1.0
        if not registry.get(r["strategy"]).filters_objects:
            assert r["obj_replication"] >= 1.0 - 1e-9  # only a filtering router may drop an object
        assert r["obj_replication"] > 0
    digests = {r["result_digest"] for r in rows}
    assert len(digests) == 1  # every strategy found the same result set


def test_runs_table_folders_and_mlflow(spark, shared_results):
    table = results.read_runs_table(shared_results)
    assert set(RUNS_TABLE_COLUMNS) <= set(table.columns)
    assert len(table) >= len(registry.supporting("range"))
    assert (table["status"] == "ok").all()
    assert table["oracle_ok"].astype(bool).all()
    for run_dir in table["run_dir"]:
        folder = Path(run_dir)
        for name in ("config.yaml", "metrics.json", "workers.parquet", "plots/worker_load.png"):
            assert (folder / name).exists(), folder / name
        workers = pd.read_parquet(folder / "workers.parquet")
        assert len(workers) == json.loads((folder / "metrics.json").read_text())["workers"]

    import mlflow

    client = mlflow.tracking.MlflowClient(results.tracking_uri(shared_results))
    exp = client.get_experiment_by_name("stps-harness")
    runs = client.search_runs([exp.experiment_id], max_results=500)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    parents = {r.info.run_id for r in runs} - {r.info.run_id for r in children}
    assert len(children) == len(table)
    assert {r.data.tags["mlflow.parentRunId"] for r in children} <= parents
    child = children[0]
    assert "throughput_eps" in child.data.metrics and "workers" in child.data.params
    # logged in the background after the folder: its own time in the row, the folder's in MLflow too
    assert (table["mlflow_s"] > 0).all() and ("mlflow_error" not in table or table["mlflow_error"].isna().all())
    assert sorted(r.data.metrics["fixed_s"] for r in children) == pytest.approx(sorted(table["fixed_s"]))
    artifacts = {a.path for a in client.list_artifacts(child.info.run_id)}
    assert {"config.yaml", "metrics.json", "workers.parquet", "plots"} <= artifacts


def test_same_seed_same_digest_and_other_seed_differs(spark, tmp_path):
    a = run_experiment(config(tmp_path / "a", "strategy=kdtree", "workers=4", "mlflow.enabled=false"))
    b = run_experiment(config(tmp_path / "b", "strategy=kdtree", "workers=4", "mlflow.enabled=false"))
    c = run_experiment(config(tmp_path / "c", "strategy=kdtree", "workers=4", "mlflow.enabled=false", "seed=10"))
    assert a[0]["result_digest"] == b[0]["result_digest"]
    assert a[0]["result_digest"] != c[0]["result_digest"]


def test_failing_mlflow_loses_nothing(spark, tmp_path):
    root = tmp_path / "res"
    (root / "mlflow.db").mkdir(parents=True)  # a directory where the sqlite file should be
    rows = run_experiment(config(root, "strategy=grid", "workers=2"))
    assert rows[0]["status"] == "ok" and rows[0]["oracle_ok"] is True
    assert rows[0].get("mlflow_error")
    table = results.read_runs_table(root)
    assert len(table) == 1 and Path(table["run_dir"][0], "metrics.json").exists()
