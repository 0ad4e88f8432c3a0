"""Vectorised synthetic data for the benchmarks (no Python loop per object).

Clustered points in a 4000 x 2500 km extent and Zipf-distributed terms over a 20k vocabulary,
5-10 distinct sorted terms per object; term ids are frequency ranks (0 = most frequent), as the
harness expects. Plus small helpers that turn objects and workload queries into Events.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from harness.core.events import INSERT, NUMERIC_FIELDS, NUMPY_DTYPES, OBJECT, OBJECT_SCHEMA, Events, list_to_csr
from datasets.workloads.range import build_workload
from harness.families.workload import WorkloadConfig

EXTENT = (0.0, 0.0, 4000.0, 2500.0)
VOCAB = 20_000


def synthetic_objects(n: int, seed: int = 0, vocab: int = VOCAB, extent=EXTENT, clusters: int = 300):
    """(objects table, term_df, extent)."""
    rng = np.random.default_rng([seed, 0xBE7C])
    x0, y0, x1, y1 = extent
    centres = rng.uniform([x0, y0], [x1, y1], size=(clusters, 2))
    sigma = rng.uniform(15.0, 150.0, size=clusters)  # city- to region-sized
    weight = rng.pareto(1.2, size=clusters) + 0.1
    which = rng.choice(clusters, size=n, p=weight / weight.sum())
    xy = centres[which] + rng.normal(size=(n, 2)) * sigma[which, None]
    background = rng.random(n) < 0.1
    xy[background] = rng.uniform([x0, y0], [x1, y1], size=(int(background.sum()), 2))
    np.clip(xy[:, 0], x0, x1, out=xy[:, 0])
    np.clip(xy[:, 1], y0, y1, out=xy[:, 1])

    # Zipf terms: draw 16 candidates per object, keep k in [5, 10] distinct ones at random.
    cdf = np.cumsum(1.0 / np.arange(1, vocab + 1))
    cdf /= cdf[-1]
    m = 16
    cand = np.searchsorted(cdf, rng.random((n, m)), side="right").astype(np.int32)
    np.minimum(cand, vocab - 1, out=cand)
    cand.sort(axis=1)
    dup = np.zeros((n, m), bool)
    dup[:, 1:] = cand[:, 1:] == cand[:, :-1]
    keyr = rng.random((n, m))
    keyr[dup] = np.inf
    pick = np.argsort(keyr, axis=1)[:, :10]
    chosen = np.take_along_axis(cand, pick, axis=1)
    valid = ~np.take_along_axis(dup, pick, axis=1)
    k = rng.integers(5, 11, size=n)
    valid &= np.arange(10)[None, :] < k[:, None]
    chosen = np.where(valid, chosen, np.iinfo(np.int32).max)
    chosen.sort(axis=1)
    lengths = valid.sum(axis=1)
    values = chosen[np.arange(10)[None, :] < lengths[:, None]]  # row-major: per object, ascending
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    terms = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(values, pa.int32()))
    table = pa.Table.from_arrays(
        [
            pa.array(np.arange(n, dtype=np.int64)),
            pa.array(np.arange(n, dtype=np.float64)),
            pa.array(xy[:, 0] / 100.0),
            pa.array(xy[:, 1] / 100.0),
            pa.array(xy[:, 0]),
            pa.array(xy[:, 1]),
            terms,
        ],
        schema=OBJECT_SCHEMA,
    )
    df = np.bincount(values, minlength=vocab).astype(np.int64)
    return table, df, extent


def object_events(table: pa.Table, seq0: int = 0, rows: np.ndarray | None = None) -> Events:
    """Objects of a prepared table as OBJECT events with seqs seq0, seq0+1, ..."""
    if rows is not None:
        table = table.take(pa.array(rows))
    n = table.num_rows
    cols = {name: np.zeros(n, NUMPY_DTYPES[name]) for name in NUMERIC_FIELDS}
    cols["seq"] = np.arange(seq0, seq0 + n, dtype=np.int64)
    cols["ts"] = table.column("ts").to_numpy().astype(np.float64)
    cols["kind"][:] = OBJECT
    cols["family"][:] = -1
    cols["id"] = table.column("oid").to_numpy().astype(np.int64)
    cols["x"] = table.column("x").to_numpy().astype(np.float64)
    cols["y"] = table.column("y").to_numpy().astype(np.float64)
    for name in ("xmin", "ymin", "xmax", "ymax"):
        cols[name][:] = np.nan
    offsets, values = list_to_csr(table.column("terms"))
    return Events(cols, offsets, values)


def sts_q1_queries(table, df, extent, n: int, seed: int = 0) -> Events:
    """n STS-Q1 range subscriptions as INSERT events (seq 0..n-1, ids 0..n-1), via build_workload."""
    cfg = WorkloadConfig(name="sts_q1", profile="q1", queries=n, updates=0, warmup_objects_per_query=0.0)
    wl = build_workload(table, df, extent, cfg, seed)
    ev = wl.events
    rows = np.flatnonzero(ev.kind == INSERT)
    q = ev.take(rows)
    q.cols["seq"] = np.arange(len(q), dtype=np.int64)
    return q


def with_seq(ev: Events, seq: np.ndarray) -> Events:
    cols = dict(ev.cols)
    cols["seq"] = np.asarray(seq, np.int64)
    return Events(cols, ev.offsets, ev.values)
