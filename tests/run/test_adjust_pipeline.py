"""Epochs and load adjustment on a real local SparkSession, MLflow sqlite store and Hydra
composition: a drifting stream adjusted between epochs gives exactly the oracle's results (and
the same digest as without adjustment), the migration is measured and logged per epoch, and bad
adjustment configs are rejected before Spark starts."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from harness.report import results
from harness.run.config import ConfigError, register_configs, validate
from harness.report.results import PROJECT_ROOT
from harness.run.runner import run_experiment
from strategies.adjust_base import adjuster_names

register_configs()
# a tiny hot-spot stream: the load drifts onto one area after the warm-up
DRIFTING = ["workload=hotspot_objects", "workload.queries=300", "workload.updates=1200", "workload.drift_start=0.1",
            "workload.hotspot_fraction=0.9", "dataset.size=4000", "progress=false", "seed=9", "epochs.size=1500",
            "workers=4", "strategy=grid"]


def config(root: Path, *overrides):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        return compose(config_name="config", overrides=[*DRIFTING, f"results_dir={root}", *overrides])


def test_every_issue_adjuster_is_registered():
    assert {"none", "dp", "gr", "si", "ra", "pm", "fm", "pmfm", "fg", "pmfmfg", "tornado"} <= set(adjuster_names())


@pytest.fixture(scope="module")
def adjusted(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("adjust")
    still = run_experiment(config(root, "adjust=none"))[0]
    moved = run_experiment(config(root, "adjust=gr", "adjust.params.sigma=1.05"))[0]
    return root, still, moved


def test_adjusted_results_equal_the_oracle_and_the_static_run(adjusted):
    root, still, moved = adjusted
    for row in (still, moved):
        assert row["status"] == "ok", row.get("traceback")
        assert row["oracle_ok"] is True
        assert row["epochs"] >= 4
    assert moved["result_digest"] == still["result_digest"]
    assert moved["adjustments"] >= 1 and moved["migrated_queries"] > 0 and moved["migrated_bytes"] > 0
    assert moved["migration_s"] > 0 and moved["select_s"] > 0
    assert still["adjustments"] == 0 and still["migrated_queries"] == 0


def test_per_epoch_series_in_the_run_folder_runs_table_and_mlflow(adjusted):
    root, still, moved = adjusted
    series = pd.read_parquet(Path(moved["run_dir"]) / "epochs.parquet")
    assert len(series) == moved["epochs"]
    assert series["migrated_queries"].sum() == moved["migrated_queries"]
    assert (series["throughput_eps"] > 0).all()
    stalled = series.index[series["migrated_queries"] > 0] + 1
    assert (series.loc[stalled[stalled < len(series)], "pause_max_s"] > 0).all()  # the next epoch pays
    assert (Path(moved["run_dir"]) / "plots" / "epochs.png").exists()
    table = results.read_runs_table(root)
    assert set(table["adjust"]) == {"none", "gr"}
    assert {"migrated_queries", "migrated_bytes", "select_s", "migration_s", "epochs"} <= set(table.columns)
    shares = table[["latency_share_lt_100ms", "latency_share_100ms_1s", "latency_share_gt_1s"]].sum(axis=1)
    assert ((shares - 1.0).abs() < 1e-9).all()

    import mlflow

    client = mlflow.tracking.MlflowClient(results.tracking_uri(root))
    exp = client.get_experiment_by_name("stps-harness")
    run = [r for r in client.search_runs([exp.experiment_id]) if r.data.params.get("adjust.name") == "gr"][0]
    history = client.get_metric_history(run.info.run_id, "epoch_throughput_eps")
    assert sorted(m.step for m in history) == series["epoch"].tolist()


@pytest.mark.parametrize("overrides, message", [
    (["adjust=gr", "epochs.size=0"], "epochs.size=0"),
    (["adjust=gr", "strategy=text_frequency"], "cannot adjust text_frequency"),
    (["adjust=fg"], "cannot adjust grid"),
    (["adjust=tornado"], "strategies it adjusts: agrid"),
    (["adjust=gr", "+adjust.params.sigmaa=2"], "valid parameters"),
    (["adjust=gr", "adjust.params.sigma=0.5"], "sigma must be >= 1"),
    (["adjust=tornado", "strategy=agrid", "adjust.params.beta=-1"], "beta must be >= 0"),
    (["epochs.by=day"], "count, time"),
])
def test_bad_adjustment_configs_are_rejected_before_spark(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        validate(config(tmp_path, *overrides))


def test_strategy_all_narrows_to_what_the_adjuster_can_adjust(tmp_path):
    runs = validate(config(tmp_path, "strategy=all", "adjust=tornado"))
    assert [r.name for r in runs] == ["agrid"]
