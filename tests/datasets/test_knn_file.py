"""A user's event file of kNN subscriptions: bad k and empty keyword lists are errors naming the
column, the value and the query; deletions twice or of queries never inserted are counted
anomalies; a clean file runs exact through a strategy."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.core.events import INSERT, KNN
from harness.engine.simulate import simulate
from harness.families import registry as families
from harness.families.workload import WorkloadConfig

EXTENT = (0.0, 0.0, 50.0, 50.0)


def _write(path, rows):
    """rows: (kind, id, x, y, terms, k, op)."""
    names = ("kind", "id", "x", "y", "terms", "k", "op")
    pq.write_table(pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)}), path)
    return path


def _rows(seed=0, n=200):
    rng = np.random.default_rng(seed)
    rows = [("insert", q, float(rng.integers(0, 50)), float(rng.integers(0, 50)), [int(q % 4)], 1 + q % 3, "or")
            for q in range(12)]
    for i in range(n):
        rows.append(("object", i, float(rng.integers(0, 50)), float(rng.integers(0, 50)),
                     sorted({int(t) for t in rng.integers(0, 6, 2)}), 0, "or"))
        if i % 40 == 39:
            rows.append(("delete", i // 40, 0.0, 0.0, [], 0, "or"))
    return rows


def _load(path, warmup=20):
    cfg = WorkloadConfig(family="knn", source="file", path=str(path), warmup_events=warmup)
    return families.get("knn").build_workload(None, np.ones(8), EXTENT, cfg, 0)


def test_a_knn_event_file_runs_exact_and_routes_by_the_extent(tmp_path):
    wl = _load(_write(tmp_path / "knn.parquet", _rows()))
    ins = wl.events.kind == INSERT
    assert (wl.events.family[ins] == KNN).all()
    assert (wl.events.xmin[ins] == 0).all() and (wl.events.xmax[ins] == 50).all()
    res = simulate(wl.events, wl.warmup, "grid", 4, epoch_events=60, strategy_params={"cells_per_side": 4})
    assert res.exact and res.digest != "0:0000000000000000"


@pytest.mark.parametrize("column,value,message", [("k", 0, "column 'k' has 0, row 4"),
                                                  ("terms", [], "column 'terms' has [], row 4")])
def test_bad_k_or_no_keywords_is_an_error_naming_them(tmp_path, column, value, message):
    rows = _rows()
    i = 3
    r = list(rows[i])
    r[{"k": 5, "terms": 4}[column]] = value
    rows[i] = tuple(r)
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")) as err:
        _load(_write(tmp_path / "bad.parquet", rows))
    assert "allowed" in str(err.value) and "bad.parquet" in str(err.value)


def test_deleted_twice_or_never_inserted_are_counted(tmp_path):
    rows = _rows()
    rows.append(("delete", 0, 0.0, 0.0, [], 0, "or"))  # query 0 was deleted already
    rows.append(("delete", 99, 0.0, 0.0, [], 0, "or"))  # never inserted
    wl = _load(_write(tmp_path / "twice.parquet", rows))
    assert wl.info["orphan_deletes"] == 2
    res = simulate(wl.events, wl.warmup, "hash", 3, epoch_events=80)
    assert res.exact
