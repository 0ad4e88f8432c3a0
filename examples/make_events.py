"""Writes the example event files of this folder (deterministic; run from the repository root:
`python examples/make_events.py`). Coordinates are x, y in km about the dataset's origin, term ids
are the dataset's (rank by document frequency: small ids are frequent terms), times in seconds.
docs/workloads.md documents every column per query type."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent / "events"
COLUMNS = ("seq", "ts", "kind", "family", "id", "x", "y", "xmin", "ymin", "xmax", "ymax", "terms", "op", "k",
           "alpha", "tau", "win", "step")


def objects(n=80, seed=42):
    rng = np.random.default_rng(seed)
    return [dict(ts=float(i), kind="object", id=i, x=round(float(rng.uniform(0, 100)), 3),
                 y=round(float(rng.uniform(0, 100)), 3),
                 terms=" ".join(str(t) for t in sorted({int(v) for v in rng.integers(0, 8, 3)})))
            for i in range(n)]


# one row per query type; ids distinct across families (results are keyed by query id)
QUERIES = {
    "crq": dict(ts=10.5, kind="insert", family="range", id=1, xmin=20, ymin=20, xmax=80, ymax=80, terms="1 2", op="or",
                tau=40.0),
    "ckq": dict(ts=10.5, kind="insert", family="knn", id=2, x=50, y=50, k=3, terms="1", op="or"),
    "ctq": dict(ts=10.5, kind="insert", family="frequent_terms", id=3, xmin=0, ymin=0, xmax=100, ymax=100, k=3, win=10.0,
                step=5.0, tau=30.0),
    "topk": dict(ts=10.5, kind="insert", family="topk", id=4, x=50, y=50, k=3, alpha=0.5, terms="1 3"),
    "srq": dict(ts=30.5, kind="snapshot", family="range", id=10, xmin=10, ymin=10, xmax=90, ymax=90, terms="2",
                op="and", tau=20.0),
    "skq": dict(ts=30.5, kind="snapshot", family="knn", id=11, x=30, y=70, k=2, terms="1", op="and", tau=20.0),
    "stq": dict(ts=30.5, kind="snapshot", family="frequent_terms", id=12, xmin=0, ymin=0, xmax=60, ymax=60, k=3, tau=20.0),
    "ckq_delete": dict(ts=60.5, kind="delete", family="knn", id=2),
}
FILES = {"range": ("crq", "srq"), "knn": ("ckq", "skq", "ckq_delete"), "frequent_terms": ("ctq", "stq"), "topk": ("topk",),
         "all_types": tuple(QUERIES)}


def table(types) -> pa.Table:
    rows = sorted(objects() + [QUERIES[t] for t in types], key=lambda r: (r["ts"], r["kind"] == "object"))
    cols = {}
    for c in COLUMNS[1:]:
        vals = [r.get(c) for r in rows]
        if any(v is not None for v in vals):
            cols[c] = vals
    return pa.table(cols)


if __name__ == "__main__":
    HERE.mkdir(exist_ok=True)
    for name, types in FILES.items():
        t = table(types)
        pcsv.write_csv(t, HERE / f"{name}.csv")
        if name == "all_types":
            pq.write_table(t, HERE / f"{name}.parquet")
        print(HERE / f"{name}.csv", t.num_rows, "rows")
