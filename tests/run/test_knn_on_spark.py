"""kNN subscriptions through the real Spark pipeline: DkM-SKS's protocol over several epochs, so
the merger's state and the feedback (worker pruning, replicas dropped) cross Spark tasks; a space
partitioner (replicated subscriptions, replay merge), a text router and the DkM-SKS methods (one
owner each) all give the oracle's entries, and the run row carries DkM-SKS's figures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from datasets import prepare_dataset
from harness.engine.simulate import simulate
from harness.report.results import PROJECT_ROOT
from harness.run.config import register_configs
from harness.run.runner import run_experiment
from harness.run.workload_cache import load_or_build_workload
from strategies.base import FitContext

register_configs()


@pytest.mark.spark
def test_knn_runs_exact_on_spark_with_dkm_figures(spark, tmp_path):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        cfg = compose(config_name="config", overrides=[
            "workload=knn_q", "dataset.size=4000", "workload.queries=300", "workload.init_objects=600",
            "workload.timestamps=12", "progress=false", "mlflow.enabled=false", f"results_dir={tmp_path}",
            "strategy=all", "strategy.include=[grid,dkmsks,kop,sop,text_frequency]", "workers=4", "epochs.by=time",
            "epochs.size=4", "index.knn.layout=paper"])
    rows = run_experiment(cfg)
    assert sorted(r["strategy"] for r in rows) == ["dkmsks", "grid", "kop", "sop", "text_frequency"]
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
    # layout=paper gave KOP its inverted file (a one-cell grid) and SOP its 20 subsets on Spark
    # (they once ran the shared grid there: harness/engine/assembly.py), the others the shared grid
    knn_index = {r["strategy"]: json.loads(r["indexes"])["knn"] for r in rows}
    assert "cells_per_side=1," in knn_index["kop"] and "subsets=0" in knn_index["kop"]
    assert "subsets=20" in knn_index["sop"]
    assert "cells_per_side=auto" in knn_index["dkmsks"] and "subsets=0" in knn_index["dkmsks"]
    assert knn_index["grid"] == knn_index["dkmsks"] == knn_index["text_frequency"]
    # the in-process executor, handed the same stream and context, assembles the same indexes and
    # fits the same routers: one assembly for both paths
    ds = prepare_dataset(cfg.dataset, spark, tmp_path / "cache" / "datasets")
    events, warmup, _, _ = load_or_build_workload(ds, cfg, tmp_path / "cache")
    context = FitContext(ds.extent, ds.vocab.column("df").to_numpy().astype(np.float64), cfg.seed)
    for r in rows:
        res = simulate(events, warmup, r["strategy"], cfg.workers, epoch_events=cfg.epochs.size, epochs_by="time",
                       context=context, index_params=OmegaConf.to_container(cfg.index))
        assert res.indexes == r["indexes"], r["strategy"]
        assert res.digest == r["result_digest"], r["strategy"]
        router = json.loads((Path(r["run_dir"]) / "router.json").read_text())
        assert json.loads(json.dumps(res.router.describe(), default=str)) == router, r["strategy"]
