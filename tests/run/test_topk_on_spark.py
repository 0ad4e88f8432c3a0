"""Top-k subscriptions through the real Spark pipeline over several epochs, so each replica's local
top-k and the merger's replay cross Spark tasks: DSkype's hashing, location and keyword
distributions and a term partitioner all give the oracle's entries, and the run rows carry
DSkype's Table 5 replication ratio and Fig. 21(b) communication in the direction the paper reports."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from harness.report.results import PROJECT_ROOT
from harness.run.config import register_configs
from harness.run.runner import run_experiment

register_configs()


@pytest.mark.spark
def test_topk_runs_exact_on_spark_with_dskype_figures(spark, tmp_path):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        cfg = compose(config_name="config", overrides=[
            "workload=topk_q", "dataset.size=3000", "workload.queries=200", "workload.window=600",
            "workload.measured_messages=600", "workers=4", "epochs.size=300", "progress=false",
            "mlflow.enabled=false", f"results_dir={tmp_path}", "strategy=all",
            "strategy.include=[dskype_hash,dskype_location,dskype_keyword,text_frequency]"])
    rows = {r["strategy"]: r for r in run_experiment(cfg)}
    assert sorted(rows) == ["dskype_hash", "dskype_keyword", "dskype_location", "text_frequency"]
    for name, r in rows.items():
        assert r["status"] == "ok", r.get("traceback")
        assert r["oracle_ok"] is True, (name, r["result_digest"])
        assert r["result_count"] > 0 and r["epochs"] >= 2, name
        # Skype's AMP and EMP from the index's phase clocks: every run has arrivals and expiries
        assert 0 < r["amp_us"] < 1e6 and 0 < r["emp_us"] < 1e6, (name, r["amp_us"], r["emp_us"])
        assert 0 < r["expiry_share"] < 1, (name, r["expiry_share"])  # a share of the busy time
    assert len({r["result_digest"] for r in rows.values()}) == 1
    # Table 5: hashing and location store each subscription once, keyword on every keyword's worker
    assert rows["dskype_hash"]["stored_replication"] == pytest.approx(1.0)
    assert rows["dskype_location"]["stored_replication"] == pytest.approx(1.0)
    assert rows["dskype_keyword"]["stored_replication"] > 1.0
    # Fig. 21(b): hashing broadcasts every message (4 workers), keyword sends it to its terms' workers
    assert rows["dskype_hash"]["obj_replication"] == pytest.approx(4.0)
    assert rows["dskype_keyword"]["obj_replication"] < rows["dskype_hash"]["obj_replication"]
