"""SSTD's six query types in one stream through the real Spark pipeline over several epochs, with
units moving between them: the stored objects cross Spark tasks in the state files and stay put
in a migration, A-Grid keeps the objects its summaries would drop, kdt one keeper per object in
its cell, the terms counted once however a router copies objects, and every strategy gives the
oracle's answers for all three families; the run row carries the snapshot figures; a strategy that
cannot keep objects is left out of strategy=all and refused by name before Spark starts."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hydra import compose, initialize_config_dir

from harness.report.results import PROJECT_ROOT
from harness.run.config import ConfigError, register_configs, resolve_job
from harness.run.runner import run_experiment

register_configs()

OVERRIDES = ["workload=sstd_mix", "dataset.size=4000", "workload.preload_objects=1500", "workload.queries=100",
             "workload.sample_queries=20", "workload.batch=50", "workload.objects_per_s=200",
             "workload.area_fraction=0.01", "workload.ctq_step_hours=40", "workload.ctq_window_hours=60",
             "workload.ctq_span_s=6", "progress=false", "mlflow.enabled=false", "workers=4", "epochs.size=500"]


def _cfg(tmp_path, *extra):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        return compose(config_name="config", overrides=[*OVERRIDES, f"results_dir={tmp_path}", *extra])


@pytest.mark.spark
def test_the_six_sstd_query_types_run_exact_on_spark_while_units_move(spark, tmp_path):
    """PS2Stream's greedy adjuster moves units between epochs (kdt's cells, A-Grid's and the
    QT-tree's leaves): the kept objects stay, snapshot queries follow them (harness/engine/
    versions.py), and the kNN merger's state carries over the migration."""
    rows = run_experiment(_cfg(tmp_path, "strategy=all", "strategy.include=[kdt,qttree]", "adjust=gr",
                               "index.knn.skq_protocol=two_phase", "keep_pairs=true",
                               "latency.arrivals=event_time"))
    assert sorted(r["strategy"] for r in rows) == ["kdt", "qttree"]
    for r in rows:
        assert r["status"] == "ok", r.get("traceback")
        assert r["oracle_ok"] is True, (r["strategy"], r["result_digest"])
        assert r["family"] == "frequent_terms+knn+range" and r["epochs"] >= 5
        assert r["snapshot_queries"] > 300  # SRQ, SKQ and STQ batches, and the CTQs' reports
        assert r["snapshot_latency_p50_ms"] > 0 and r["stored_objects_max"] > 0
        assert r["stored_bytes_sum"] >= r["stored_bytes_max"] > r["stored_objects_max"] * 64  # 64: 8 int64 columns
        assert min(r["srq_latency_mean_ms"], r["skq_latency_mean_ms"], r["stq_latency_mean_ms"]) > 0
    assert len({r["result_digest"] for r in rows}) == 1
    for r in rows:  # the kept pairs hold the second rounds' answers too (merged on the driver)
        files = list(tmp_path.glob(f"**/{r['run_id']}/pairs/epoch=*/part-*.parquet"))
        keys = pa.concat_tables([pq.read_table(f) for f in files]).column("key").to_numpy()
        assert len(np.unique(keys)) == len(keys) == r["result_count"]
        assert any(f.name == "part-second-round.parquet" for f in files)
    assert max(r["adjustments"] for r in rows) > 0


def strategy_names(cfg) -> list[str]:
    """The strategies the resolved job runs."""
    return [r.name for r in resolve_job(cfg).runs]


def test_strategies_that_cannot_answer_are_left_out_or_refused(tmp_path, monkeypatch):
    from strategies import registry

    assert "kdt" in strategy_names(_cfg(tmp_path, "strategy=all"))
    assert "text_frequency" in strategy_names(_cfg(tmp_path, "strategy=all"))  # routes knn like range
    monkeypatch.setattr(registry.get("kdt"), "stores_objects", False)
    assert "kdt" not in strategy_names(_cfg(tmp_path, "strategy=all"))
    with pytest.raises(ConfigError, match="strategy 'kdt' cannot answer snapshot queries exactly"):
        strategy_names(_cfg(tmp_path, "strategy=kdt"))


@pytest.mark.spark
def test_the_one_copy_qt_tree_on_spark_stores_objects_once_while_the_tree_changes(spark, tmp_path):
    """SSTD's QT-tree (sstd.txt l.221): each object to one textual child, decided per dispatcher
    on the driver (three dispatchers here), exact on Spark while FG rebuilds the tree; its
    obj_replication is 1.00, the term-map ablation's may be more."""
    rows = run_experiment(_cfg(tmp_path, "strategy=all", "strategy.include=[qttree,qttree_termmap]", "adjust=fg",
                               "adjust.params.lam=1.2", "dispatchers=3"))
    assert sorted(r["strategy"] for r in rows) == ["qttree", "qttree_termmap"]
    for r in rows:
        assert r["status"] == "ok", r.get("traceback")
        assert r["oracle_ok"] is True, (r["strategy"], r["result_digest"])
    by = {r["strategy"]: r for r in rows}
    assert by["qttree"]["obj_replication"] == 1.0
    assert by["qttree_termmap"]["obj_replication"] >= 1.0
    assert len({r["result_digest"] for r in rows}) == 1
