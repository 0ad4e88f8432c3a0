"""The object store's snapshot answers (issue 15's targets, spec 4.9), one core, synthetic data: a
worker's store of the scale's objects (full: 625k, SSTD's 5M over 8 workers; small: 200k), 200
queries sampled from objects, a look-back over the whole store. Each answer against a vectorised
numpy scan of every stored object (the same predicate, no index; sharing no code with the store),
both on the same queries in the same rounds, their answers equal in every round:
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
from conftest import cpu_timer, paired_rounds, timed
from datasets.workloads.snapshot import build_snapshot_workload
from harness.core.events import AND, OBJECT, SNAPSHOT, pair_keys
from harness.families.knn.snapshot import answer_knn
from harness.families.object_store import ObjectStore
from harness.families.range.snapshot import answer_range
from harness.families.terms.snapshot import answer_terms, count_tables
from harness.families.terms.index import copy_masks
from harness.families.workload import WorkloadConfig

STORE = {"full": 625_000, "small": 200_000}
SLICE = 16384  # index.frequent_terms.slice_size's default
N_Q = 200
ROUNDS = 3  # paired rounds: the store and the scan on the same queries, back to back


def _workload(scale, protocol, **kw):
    n = STORE[scale["name"]]
    table, df, extent = synthetic_objects(n + 5_000, seed=11)
    cfg = WorkloadConfig(name=protocol, family={"srq": "range", "skq": "knn", "stq": "frequent_terms"}[protocol],
                         protocol=protocol, op="and", preload_objects=n, sample_queries=0, queries=N_Q, batch=N_Q,
                         batch_every_s=1.0, objects_per_s=1e3, tau_hours=1e9, hour_s=1.0, keywords_max=1,
                         k_min=10, k_max=10, **kw)
    ev = build_snapshot_workload(table, df, extent, cfg, 3).events
    store = ObjectStore(tuple(extent), 64, math.inf, len(df))
    store.add(ev.take(np.flatnonzero(ev.kind == OBJECT)))
    rows = np.flatnonzero(ev.kind == SNAPSHOT)
    return store, ev, rows


class Scan:
    """The vectorised numpy scan: per query, boolean masks over every stored object (the same
    predicates as the store: seq before the query's, inside its look-back, its keywords, its
    rectangle), no index. Each answer is returned in the store's form, so the two are compared."""

    def __init__(self, store):
        o = self.o = store.objects
        self.vocab = store.vocab
        self.owner = np.repeat(np.arange(len(o)), np.diff(o.offsets))  # set-up, like the store's index

    def _visible(self, ev, q):
        return (self.o.seq < ev.seq[q]) & (self.o.ts > ev.ts[q] - ev.tau[q])

    def _has_all(self, ev, q):
        need = ev.values[ev.offsets[q]:ev.offsets[q + 1]]
        hits = np.bincount(self.owner[np.isin(self.o.values, need)], minlength=len(self.o))
        return hits == len(need) if ev.op[q] == AND else hits > 0

    def _inside(self, ev, q):
        o = self.o
        return (o.x >= ev.xmin[q]) & (o.x <= ev.xmax[q]) & (o.y >= ev.ymin[q]) & (o.y <= ev.ymax[q])

    def range(self, ev, rows):
        """Sorted (qid, oid) pair keys, as answer_range's."""
        keys = [pair_keys(np.full(len(ok), ev.id[q]), self.o.id[ok]) for q in rows
                for ok in [np.flatnonzero(self._inside(ev, q) & self._visible(ev, q) & self._has_all(ev, q))]]
        return np.sort(np.concatenate(keys)) if keys else np.zeros(0, np.int64)

    def knn(self, ev, rows):
        """Sorted (qid, oid, seq) rows of each query's k nearest (ties: the older object first)."""
        o, out = self.o, []
        for q in rows:
            ok = np.flatnonzero(self._visible(ev, q) & self._has_all(ev, q))
            d2 = (o.x[ok] - ev.x[q]) ** 2 + (o.y[ok] - ev.y[q]) ** 2
            top = ok[np.lexsort((o.seq[ok], d2))][:ev.k[q]]
            out.append(np.stack([np.full(len(top), ev.id[q]), o.id[top], o.seq[top]], axis=1))
        return _sorted_rows(np.concatenate(out) if out else np.zeros((0, 3), np.int64))

    def terms(self, ev, rows):
        """Sorted (query index, term, count) rows: each query's top k terms by (count desc, term asc)."""
        out = []
        for i, q in enumerate(rows):
            pick = (self._inside(ev, q) & self._visible(ev, q))[self.owner]
            counts = np.bincount(self.o.values[pick], minlength=self.vocab)
            t = np.flatnonzero(counts)
            t = t[np.lexsort((t, -counts[t]))][:ev.k[q]]
            out.append(np.stack([np.full(len(t), i), t, counts[t]], axis=1))
        return _sorted_rows(np.concatenate(out) if out else np.zeros((0, 3), np.int64))


def _sorted_rows(rows) -> np.ndarray:
    rows = np.asarray(rows, np.int64).reshape(-1, 3)
    return rows[np.lexsort(rows.T[::-1])]


@pytest.mark.gate
@pytest.mark.parametrize("kind,area,target", [("srq", 1e-4, 50), ("skq", None, 20), ("stq", 1e-2, 10)])
def test_snapshot_answers_against_a_scan(scale, record, kind, area, target):
    """The store and the scan answer the same N_Q queries back to back in each of ROUNDS rounds
    (paired); their answers must be equal in every round."""
    store, ev, rows = _workload(scale, kind, **({"area_fraction": area} if area else {}))
    scan = Scan(store)
    if kind == "srq":
        def answer():
            return answer_range(store, ev, rows)[0]

        def form(out):
            return np.sort(out)
        base = scan.range
    elif kind == "skq":
        def answer():
            return answer_knn(store, ev, rows)[0]

        form = _sorted_rows
        base = scan.knn
    else:
        o = store.objects
        one = np.ones((len(rows), 1), np.uint64)
        masks = copy_masks((np.arange(len(o)), np.zeros(len(o), np.int64)), len(o), 1)
        build_s, tables = cpu_timer(lambda: count_tables(store, np.ones(len(o), np.bool_), SLICE), rounds=1)

        def answer():
            work = np.ones(len(rows), np.int64)
            return answer_terms(store, ev, rows, one, masks, 0, work, SLICE, tables)

        def form(out):
            return _sorted_rows(np.stack(out, axis=1))

        area = f"{area:.2%} of the space; count tables built in {build_s:.2f} s, once per epoch"
        base = scan.terms

    def same(out, b):  # the store's answer put in the scan's form here, outside the timing
        a = form(out)
        assert len(a) > 0 and np.array_equal(a, b), f"{kind}: the store and the scan disagree ({len(a)} vs {len(b)})"

    answer()  # numba warm-up
    fs, bs, ratio, got, _ = paired_rounds(timed(answer), timed(lambda: base(ev, rows)), ROUNDS, same)
    n = len(store.objects)
    ref = f"{kind}@{n // 1000}k/scan"
    record(ref, len(rows) / bs.min(), "queries/s/core", note=f"numpy over every stored object, the same {len(rows)} queries")
    where = (f"region {area}" if isinstance(area, str) else f"region {area:.2%} of the space" if area else "k = 10")
    record(f"{kind}@{n // 1000}k/store", len(rows) / fs.min(), "queries/s/core", baseline=ref, target=target,
           target_on=ref, paired={ref: ratio},
           note=f"{len(rows)} queries, {where}; {len(form(got))} answer rows equal to the scan's in each of {ROUNDS} "
                f"paired rounds")
