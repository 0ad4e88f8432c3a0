"""Snapshot range queries through the real Spark pipeline over several epochs: the stored objects
cross Spark tasks in the state files, A-Grid keeps the objects its summaries would drop, and every
strategy gives the oracle's answers (kdt keeps one copy of an object in its cell besides where its
subscriptions want it); the run row carries the snapshot figures; a strategy that cannot keep
objects is left out of strategy=all and refused by name before Spark starts."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from harness.report.results import PROJECT_ROOT
from harness.run.config import ConfigError, register_configs, strategy_names
from harness.run.runner import run_experiment

register_configs()

OVERRIDES = ["workload=srq_q", "dataset.size=4000", "workload.preload_objects=1500", "workload.queries=300",
             "workload.batch=50", "workload.objects_per_s=200", "workload.area_fraction=0.01", "progress=false",
             "mlflow.enabled=false", "workers=4", "epochs.size=500"]


def _cfg(tmp_path, *extra):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        return compose(config_name="config", overrides=[*OVERRIDES, f"results_dir={tmp_path}", *extra])


@pytest.mark.spark
def test_snapshot_range_queries_run_exact_on_spark(spark, tmp_path):
    rows = run_experiment(_cfg(tmp_path, "strategy=all", "strategy.include=[agrid,kdt,qttree,text_frequency,kop]"))
    assert sorted(r["strategy"] for r in rows) == ["agrid", "kdt", "kop", "qttree", "text_frequency"]
    for r in rows:
        assert r["status"] == "ok", r.get("traceback")
        assert r["oracle_ok"] is True, (r["strategy"], r["result_digest"])
        assert r["result_count"] > 0 and r["epochs"] >= 3
        assert r["snapshot_queries"] == 300
        assert r["snapshot_latency_p50_ms"] > 0 and r["stored_objects_max"] > 0
    by = {r["strategy"]: r for r in rows}
    assert by["kop"]["snapshot_workers_mean"] == 1.0  # one worker per query, every worker stores everything
    assert by["kop"]["stored_objects_sum"] == 4 * by["kop"]["stored_objects_max"]  # every worker keeps every object
    assert by["text_frequency"]["snapshot_workers_mean"] == 1.0  # the keyword's owner


def test_strategies_that_cannot_answer_are_left_out_or_refused(tmp_path, monkeypatch):
    from strategies import registry

    assert "kdt" in strategy_names(_cfg(tmp_path, "strategy=all"))
    monkeypatch.setattr(registry.get("kdt"), "stores_objects", False)
    assert "kdt" not in strategy_names(_cfg(tmp_path, "strategy=all"))
    with pytest.raises(ConfigError, match="strategy 'kdt' cannot answer snapshot queries exactly"):
        strategy_names(_cfg(tmp_path, "strategy=kdt"))
