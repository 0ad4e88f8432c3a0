"""An example query family with snapshot answers and a figure of its own, written as a user would
write one outside the harness, in one file: a `latest_k` snapshot query asks, once at its arrival,
for the k most recent objects (by stream order) that arrived within its look-back, fall in its
rectangle and hold its keywords (AND: all, OR: one, none: any object).

Its predicate is a snapshot range query's narrowed to the latest k, so it routes like range: every
router sends it where an SRQ with its rectangle would go, to every worker that may store one of
its objects. Each worker keeps the objects it receives in the harness's ObjectStore
(harness/families/object_store.py, `with_snapshots`) and answers with its own latest k; the merger
keeps the latest k of those (an object's copies carry one seq). Its workload is SSTD's SRQ
generator's with the queries relabelled and given k = 1 + id % 4. Its own figure,
`latest_k_checks_mean`, is the stored objects a query examined, from counters its index reports.

Load it with `families=[examples.families.latest_k]` (or `harness.families.registry.load_plugins`)
and check it with `harness.engine.contract.check_family(LatestKFamily)`, as
tests/families/test_example_families.py does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from harness.core.events import AND, OBJECT, SNAPSHOT, Events, pair_keys
from harness.core.metric import Metric
from harness.families.base import (Family, Merger, MergeOutput, StateBundle, WorkerIndex, WorkerOutput,
                                   qid_buckets)
from harness.families.object_store import ObjectStore, with_snapshots
from harness.families.range.family import RangeFamily

CODE = 10
CANDIDATES = pa.schema([("qid", pa.int64()), ("oid", pa.int64()), ("seq", pa.int64()), ("k", pa.int64())])


def holds_keywords(q_terms: np.ndarray, op: int, o_terms: np.ndarray) -> bool:
    if len(q_terms) == 0:
        return True
    hits = np.isin(q_terms, o_terms)
    return bool(hits.all()) if op == AND else bool(hits.any())


class LatestKIndex(WorkerIndex):
    family = "latest_k"

    def __init__(self, context, cells_per_side: int = 16):
        super().__init__(context)
        self.store = ObjectStore(context.extent, cells_per_side, context.look_back, context.vocab_size)
        self.queries = self.checked = 0

    def restore(self, state: StateBundle) -> float:
        self.store.restore(state.objects)
        return 0.0

    def process(self, ev: Events) -> WorkerOutput:
        self.queries = self.checked = 0
        out = with_snapshots(self.store, ev, self._nothing_continuous, self._answer, _joined)
        out.counters.update(latest_queries=self.queries, latest_checked=self.checked)
        return out

    @staticmethod
    def _nothing_continuous(ev: Events) -> WorkerOutput:
        """No subscriptions: the events besides the snapshot queries are objects the store kept."""
        return WorkerOutput(CANDIDATES.empty_table(), np.ones(len(ev), np.int64),
                            {"objects": int((ev.kind == OBJECT).sum()), "results": 0})

    def _answer(self, store: ObjectStore, ev: Events, rows: np.ndarray) -> tuple[pa.Table, np.ndarray]:
        """Each snapshot query's latest k stored objects in its rectangle with its keywords."""
        o = store.objects
        lo, hi = store.bounds(ev, rows)
        out, work = [], np.ones(len(rows), np.int64)
        for i, q in enumerate(rows.tolist()):
            q_terms, k, found = ev.values[ev.offsets[q]:ev.offsets[q + 1]], int(ev.k[q]), 0
            for p in range(int(hi[i]) - 1, int(lo[i]) - 1, -1):  # newest first
                work[i] += 1
                inside = ev.xmin[q] <= o.x[p] <= ev.xmax[q] and ev.ymin[q] <= o.y[p] <= ev.ymax[q]
                if inside and holds_keywords(q_terms, int(ev.op[q]), o.values[o.offsets[p]:o.offsets[p + 1]]):
                    out.append((int(ev.id[q]), int(o.id[p]), int(o.seq[p]), k))
                    found += 1
                    if found == k:
                        break
        self.queries += len(rows)
        self.checked += int(work.sum() - len(rows))
        table = pa.Table.from_pylist([dict(zip(CANDIDATES.names, r)) for r in out], schema=CANDIDATES)
        return table, work

    def export_state(self) -> StateBundle:
        return StateBundle(objects=self.store.objects)

    def size_bytes(self) -> int:
        return self.store.size_bytes()


def _joined(continuous: pa.Table, snapshot: pa.Table) -> pa.Table:
    return pa.concat_tables([continuous, snapshot])


class LatestKMerger(Merger):
    @staticmethod
    def blocks(results: pa.Table, n_buckets: int):
        bucket = qid_buckets(results.column("qid").to_numpy(), n_buckets)
        for b in np.unique(bucket).tolist():
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, CANDIDATES) as w:
                w.write(results.filter(pa.array(bucket == b)))
            yield b, sink.getvalue().to_pybytes()

    def merge(self, blobs, queries: Events) -> MergeOutput:
        tables = [pa.ipc.open_stream(pa.py_buffer(b)).read_all() for b in blobs]
        cand = pa.concat_tables(tables) if tables else CANDIDATES.empty_table()
        cand = cand.group_by(["qid", "oid", "seq", "k"]).aggregate([])  # an object's copies are one candidate
        qid, oid, seq, k = (cand.column(c).to_numpy() for c in ("qid", "oid", "seq", "k"))
        order = np.lexsort((-seq, qid))  # by query, newest first
        qid, oid, k = qid[order], oid[order], k[order]
        first = np.r_[0, np.flatnonzero(np.diff(qid)) + 1] if len(qid) else np.zeros(0, np.int64)
        rank = np.arange(len(qid)) - np.repeat(first, np.diff(np.r_[first, len(qid)]))
        keep = rank < k
        return MergeOutput(np.unique(pair_keys(qid[keep], oid[keep])))


def latest_k_oracle(stream: Events) -> np.ndarray:
    """Per snapshot query, by brute force over the whole stream in seq order: the latest k objects
    before it within its look-back, in its rectangle, with its keywords."""
    order = np.argsort(stream.seq, kind="stable")
    objs = [int(i) for i in order if stream.kind[i] == OBJECT]
    keys = []
    for q in np.flatnonzero((stream.kind == SNAPSHOT) & (stream.family == CODE)).tolist():
        seen = []
        for o in reversed(objs):
            if stream.seq[o] >= stream.seq[q] or not stream.ts[o] > stream.ts[q] - stream.tau[q]:
                continue
            if not (stream.xmin[q] <= stream.x[o] <= stream.xmax[q] and stream.ymin[q] <= stream.y[o] <= stream.ymax[q]):
                continue
            if holds_keywords(stream.values[stream.offsets[q]:stream.offsets[q + 1]], int(stream.op[q]),
                              stream.values[stream.offsets[o]:stream.offsets[o + 1]]):
                seen.append(o)
                if len(seen) == int(stream.k[q]):
                    break
        keys += [(int(stream.id[q]) << 32) | int(stream.id[o]) for o in seen]
    return np.unique(np.array(keys, np.int64))


def summarise(workers, final_stats) -> dict[str, float]:
    """The family's figure: stored objects examined per latest-k query (NaN without any)."""
    queries = float(workers["latest_queries"].sum()) if "latest_queries" in workers else 0.0
    return {"latest_k_checks_mean": float(workers["latest_checked"].sum()) / queries if queries else float("nan")}


class LatestKFamily(Family):
    name = "latest_k"
    code = CODE
    needs_k = True
    index = LatestKIndex
    merger = LatestKMerger
    routes_like = "range"
    oracle = staticmethod(latest_k_oracle)
    snapshot_type = "slq"  # its snapshot queries' mean latency: slq_latency_mean_ms
    counters = ("latest_queries", "latest_checked")
    metrics = (Metric("latest_k_checks_mean", "latest-k checks per query", "checks", "stored objects a latest-k "
                      "snapshot query examined, mean over the queries (the example family's own figure)", "lower",
                      "{:,.1f}"),)
    summarise = staticmethod(summarise)
    # SSTD's SRQ generator's settings for a tiny stream (check_family, the contract tests)
    tiny_workload = dict(protocol="srq", queries=60, batch=20, preload_objects=600, objects_per_s=100, op="or",
                         keywords_max=2, area_fraction=0.05, tau_hours=200)

    @dataclass
    class Params:
        cells_per_side: int = 16  # the object store's grid

    @classmethod
    def build_workload(cls, objects, term_df, extent, cfg, seed: int):
        """Range's workload (SSTD's SRQs with protocol srq) with its queries relabelled latest_k."""
        wl = RangeFamily.build_workload(objects, term_df, extent, cfg, seed)
        ev = wl.events
        q = ev.family >= 0
        ev.cols["family"][q] = CODE
        ev.cols["k"][q] = 1 + ev.id[q] % 4
        return wl

    validate_workload = staticmethod(RangeFamily.validate_workload)
