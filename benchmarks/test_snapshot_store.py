"""The object store's snapshot answers (issue 15's targets, spec 4.9), one core, synthetic data: a
worker's store of the scale's objects (full: 625k, SSTD's 5M over 8 workers; small: 200k), 200
queries sampled from objects, a look-back over the whole store. Each answer against a vectorised
numpy scan of every stored object (the same predicate, no index; sharing no code with the store):
- SRQ at 0.01% of the space, one keyword: target 50x the scan;
- SKQ (k = 10, one keyword): target 20x;
- STQ at 1% of the space (k = 10): target 10x; per-(slice, cell) term-count tables for the cells
  wholly inside, the cut cells scanned in cell-major order, and (the query reaching this worker
  alone) only the top k terms emitted.
The 5M-object store over 8 workers, its bytes and peak memory: benchmarks/test_store_memory.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench_data import synthetic_objects
from conftest import cpu_timer
from datasets.workloads.config import WorkloadConfig
from datasets.workloads.snapshot import build_snapshot_workload
from harness.core.events import AND, OBJECT, SNAPSHOT
from harness.families.object_store import ObjectStore, answer_knn, answer_range, count_tables, terms_answers
from harness.families.terms.index import copy_masks

STORE = {"full": 625_000, "small": 200_000}
SLICE = 16384  # index.terms.slice_size's default
N_Q = 200


def _workload(scale, protocol, **kw):
    n = STORE[scale["name"]]
    table, df, extent = synthetic_objects(n + 5_000, seed=11)
    cfg = WorkloadConfig(name=protocol, family={"srq": "range", "skq": "knn", "stq": "terms"}[protocol],
                         protocol=protocol, op="and", preload_objects=n, sample_queries=0, queries=N_Q, batch=N_Q,
                         batch_every_s=1.0, objects_per_s=1e3, tau_hours=1e9, hour_s=1.0, keywords_max=1,
                         k_min=10, k_max=10, **kw)
    ev = build_snapshot_workload(table, df, extent, cfg, 3).events
    store = ObjectStore(tuple(extent), 64, math.inf, len(df))
    store.add(ev.take(np.flatnonzero(ev.kind == OBJECT)))
    rows = np.flatnonzero(ev.kind == SNAPSHOT)
    return store, ev, rows


def _visible(store, ev, q):
    o = store.objects
    return (o.seq < ev.seq[q]) & (o.ts > ev.ts[q] - ev.tau[q])


def _has_all(store, ev, q):
    o = store.objects
    owner = np.repeat(np.arange(len(o)), np.diff(o.offsets))
    need = ev.values[ev.offsets[q]:ev.offsets[q + 1]]
    hits = np.bincount(owner[np.isin(o.values, need)], minlength=len(o))
    return hits == len(need) if ev.op[q] == AND else hits > 0


def scan_range(store, ev, rows):
    o, n = store.objects, 0
    for q in rows:
        inside = (o.x >= ev.xmin[q]) & (o.x <= ev.xmax[q]) & (o.y >= ev.ymin[q]) & (o.y <= ev.ymax[q])
        n += int((inside & _visible(store, ev, q) & _has_all(store, ev, q)).sum())
    return n


def scan_knn(store, ev, rows):
    o, n = store.objects, 0
    for q in rows:
        ok = np.flatnonzero(_visible(store, ev, q) & _has_all(store, ev, q))
        d2 = (o.x[ok] - ev.x[q]) ** 2 + (o.y[ok] - ev.y[q]) ** 2
        n += len(ok[np.lexsort((o.seq[ok], d2))][:ev.k[q]])
    return n


def scan_terms(store, ev, rows):
    o, n = store.objects, 0
    owner = np.repeat(np.arange(len(o)), np.diff(o.offsets))
    for q in rows:
        inside = (o.x >= ev.xmin[q]) & (o.x <= ev.xmax[q]) & (o.y >= ev.ymin[q]) & (o.y <= ev.ymax[q])
        pick = (inside & _visible(store, ev, q))[owner]
        counts = np.bincount(o.values[pick], minlength=store.vocab)
        n += min(int((counts > 0).sum()), int(ev.k[q]))
    return n


@pytest.mark.parametrize("kind,area,target", [("srq", 1e-4, 50), ("skq", None, 20), ("stq", 1e-2, 10)])
def test_snapshot_answers_against_a_scan(scale, record, kind, area, target):
    store, ev, rows = _workload(scale, kind, **({"area_fraction": area} if area else {}))
    if kind == "srq":
        index_s, _ = cpu_timer(lambda: answer_range(store, ev, rows), rounds=3)
        scan = scan_range
    elif kind == "skq":
        index_s, _ = cpu_timer(lambda: answer_knn(store, ev, rows), rounds=3)
        scan = scan_knn
    else:
        o = store.objects
        one = np.ones((len(rows), 1), np.uint64)
        masks = copy_masks((np.arange(len(o)), np.zeros(len(o), np.int64)), len(o), 1)
        lo, hi = store.bounds(ev, rows)
        cell_ptr, cell_pos, *major = store.cell_major()
        build_s, tables = cpu_timer(lambda: count_tables(store, np.ones(len(o), np.bool_), SLICE), rounds=1)

        def answer():
            work = np.ones(len(rows), np.int64)
            return terms_answers(rows, lo, hi, ev.xmin, ev.ymin, ev.xmax, ev.ymax, ev.k.astype(np.int64), one, o.x, o.y,
                                 o.offsets, o.values,
                                 masks, cell_ptr, cell_pos, *major, masks[cell_pos], *store.grid.args, store.vocab, 0,
                                 work, SLICE, *tables)

        index_s, _ = cpu_timer(answer, rounds=3)
        area = f"{area:.2%} of the space; count tables built in {build_s:.2f} s, once per epoch"
        scan = scan_terms
    n_base = 20
    scan_s, _ = cpu_timer(lambda: scan(store, ev, rows[:n_base]), rounds=1)
    n = len(store.objects)
    ref = f"{kind}@{n // 1000}k/scan"
    record(ref, n_base / scan_s, "queries/s/core", note=f"numpy over every stored object, {n_base} queries")
    where = (f"region {area}" if isinstance(area, str) else f"region {area:.2%} of the space" if area else "k = 10")
    record(f"{kind}@{n // 1000}k/store", len(rows) / index_s, "queries/s/core", baseline=ref, target=target,
           target_on=ref, note=f"{len(rows)} queries, {where}")

