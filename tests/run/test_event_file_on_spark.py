"""A user's own event stream with anomalies, through the real Spark pipeline: every stream is
normalised once when it is loaded, so the strategies (dkmsks included, whose subscription table
once treated an early delete its own way) all agree with the oracle, and the run row counts what
was normalised."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hydra import compose, initialize_config_dir

from harness.report.results import PROJECT_ROOT
from harness.run.config import register_configs
from harness.run.runner import run_experiment

register_configs()


def anomalous_stream(path, seed=4):
    """Objects and range subscriptions around one US city, in lon/lat, with every anomaly the
    normalisation names; returns the counts it must report."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(400):
        if i % 5 == 0 and i // 5 < 70:
            q = i // 5
            lon0, lat0 = -100 + rng.uniform(0, 0.8), 40 + rng.uniform(0, 0.8)
            rows.append(dict(kind="insert", id=q, lon_min=lon0, lat_min=lat0, lon_max=lon0 + 0.3, lat_max=lat0 + 0.3,
                             terms=sorted(set(rng.integers(0, 6, 2).tolist())), op="OR"))
        else:
            rows.append(dict(kind="object", id=i, lon=-100 + rng.uniform(0, 1.1), lat=40 + rng.uniform(0, 1.1),
                             terms=sorted(set(rng.integers(0, 6, 3).tolist()))))
    # the anomalies: an early delete of a query inserted later (falls in the warm-up), a duplicate
    # insert of a live id, a delete of an id never inserted, a re-insert after a real delete
    rows.insert(2, dict(kind="delete", id=60))
    rows.insert(150, dict(rows[0]))
    rows.insert(200, dict(kind="delete", id=999))
    at = next(i for i, r in enumerate(rows) if r["kind"] == "insert" and r["id"] == 30)
    rows.insert(at + 40, dict(kind="delete", id=30))
    rows.insert(at + 80, dict(rows[at]))
    cols = {k: [r.get(k) for r in rows] for k in ("kind", "id", "lon", "lat", "lon_min", "lat_min", "lon_max",
                                                   "lat_max", "op")}
    table = pa.table({**cols, "terms": pa.array([r.get("terms", []) for r in rows], pa.list_(pa.int32()))})
    pq.write_table(table, path)
    return {"orphan_deletes": 2, "duplicate_inserts": 1, "reused_ids": 1}


@pytest.mark.spark
def test_an_anomalous_event_file_is_exact_under_every_strategy_on_spark(spark, tmp_path):
    expected = anomalous_stream(tmp_path / "events.parquet")
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        cfg = compose(config_name="config", overrides=[
            "workload=tiny", "dataset.size=4000", "progress=false", "mlflow.enabled=false", f"results_dir={tmp_path}",
            "workload.source=file", f"workload.path={tmp_path / 'events.parquet'}", "workload.warmup_events=100",
            "strategy=all", "strategy.include=[grid,dkmsks,agrid,text_frequency]", "workers=3", "epochs.size=100"])
    rows = run_experiment(cfg)
    assert [r["strategy"] for r in rows] == ["agrid", "dkmsks", "grid", "text_frequency"]
    for r in rows:
        assert r["status"] == "ok", r.get("traceback")
        assert r["oracle_ok"] is True, (r["strategy"], r["result_digest"])
        assert r["result_count"] > 0
        for k, v in expected.items():
            assert r[k] == v, (k, r[k])
    assert len({r["result_digest"] for r in rows}) == 1
