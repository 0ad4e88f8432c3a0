"""kNN subscriptions through the real Spark pipeline: DkM-SKS's protocol over several epochs, so
the merger's state and the feedback (worker pruning, replicas dropped) cross Spark tasks; a space
partitioner (replicated subscriptions, replay merge), a text router and the DkM-SKS methods (one
owner each) all give the oracle's entries, and the run row carries DkM-SKS's figures."""

from __future__ import annotations

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from harness.report.results import PROJECT_ROOT
from harness.run.config import register_configs
from harness.run.runner import run_experiment

register_configs()


@pytest.mark.spark
def test_knn_runs_exact_on_spark_with_dkm_figures(spark, tmp_path):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        cfg = compose(config_name="config", overrides=[
            "workload=knn_q", "dataset.size=4000", "workload.queries=300", "workload.init_objects=600",
            "workload.timestamps=12", "progress=false", "mlflow.enabled=false", f"results_dir={tmp_path}",
            "strategy=all", "strategy.include=[grid,dkmsks,sop,text_frequency]", "workers=4", "epochs.by=time",
            "epochs.size=4", "index.knn.layout=paper"])
    rows = run_experiment(cfg)
    assert sorted(r["strategy"] for r in rows) == ["dkmsks", "grid", "sop", "text_frequency"]
    for r in rows:
        assert r["status"] == "ok", r.get("traceback")
        assert r["oracle_ok"] is True, (r["strategy"], r["result_digest"])
        assert r["result_count"] > 0 and r["epochs"] == 3
        assert r["timestamps"] == 12 and r["update_time_ms_per_ts"] > 0
        assert r["update_time_ms_per_ts"] >= r["knn_update_ms_per_ts"]
        assert r["feedback_rows"] > 0
    assert len({r["result_digest"] for r in rows}) == 1
    grid = next(r for r in rows if r["strategy"] == "grid")
    assert grid["replicas_dropped"] > 0  # the balls left most partitions after the warm-up
    timeline = pd.read_parquet(f"{grid['run_dir']}/timestamps.parquet")
    assert len(timeline) == 12 and (timeline["update_time_ms"] > 0).all()
