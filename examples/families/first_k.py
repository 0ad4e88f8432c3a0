"""A toy query family, written as a user would write one outside the harness: a `first_k`
subscription receives the first k objects (in stream order) that fall in its rectangle and hold
its keywords. Its predicate is range's, so it routes like range; its result needs what range's
does not: the merger's state across epochs (how many objects each subscription has received),
the epoch's query events (each subscription's k) and feedback (the subscriptions that are full).
Its index is a plain brute force, its oracle another one. It reads its own rows of an event file
(`file_types`: a `family` cell naming first_k, a rectangle, keywords and k) and exports its results
as (query, object) pairs, with no edit to a shared module (tests/families/test_plugin_family.py)."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from datasets.workloads.file_types import RECTANGLE, QueryType, ordered_rectangle, positive_k
from harness.core.events import AND, DELETE, INSERT, OBJECT, Events, pair_keys
from harness.families.base import (Family, Merger, MergeOutput, StateBundle, WorkerIndex, WorkerOutput,
                                   qid_buckets)
from harness.families.range.family import RangeFamily

CODE = 9
CANDIDATES = pa.schema([("qid", pa.int64()), ("oid", pa.int64()), ("seq", pa.int64())])


def matches(ev: Events, o: int, qs: Events) -> np.ndarray:
    """Which of the subscriptions `qs` object row `o` of `ev` matches (rectangle and keywords)."""
    inside = (qs.xmin <= ev.x[o]) & (ev.x[o] <= qs.xmax) & (qs.ymin <= ev.y[o]) & (ev.y[o] <= qs.ymax)
    terms = set(ev.values[ev.offsets[o]:ev.offsets[o + 1]].tolist())
    out = np.zeros(len(qs), bool)
    for p in np.flatnonzero(inside):
        mine = [t in terms for t in qs.values[qs.offsets[p]:qs.offsets[p + 1]].tolist()]
        out[p] = all(mine) if qs.op[p] == AND else any(mine)
    return out


class FirstKIndex(WorkerIndex):
    family = "first_k"

    def __init__(self, context, **_):
        super().__init__(context)
        self.queries = Events.empty()

    def restore(self, state: StateBundle) -> float:
        self.queries = state.queries
        return 0.0

    def process(self, ev: Events) -> WorkerOutput:
        t0 = time.process_time()
        rows = []
        for i in range(len(ev)):
            if ev.kind[i] == INSERT:
                self.queries = Events.concat([self.queries, ev.take(np.array([i]))])
            elif ev.kind[i] == DELETE:
                self.queries = self.queries.take(np.flatnonzero(self.queries.id != ev.id[i]))
            elif ev.kind[i] == OBJECT and len(self.queries):
                for q in self.queries.id[matches(ev, i, self.queries)].tolist():
                    rows.append((q, int(ev.id[i]), int(ev.seq[i])))
        table = pa.Table.from_pylist([dict(zip(CANDIDATES.names, r)) for r in rows], schema=CANDIDATES)
        counters = {"objects": int((ev.kind == OBJECT).sum()), "results": len(rows)}
        return WorkerOutput(table, np.ones(len(ev), np.int64), counters, time.process_time() - t0)

    def export_state(self) -> StateBundle:
        return StateBundle(queries=self.queries)

    def size_bytes(self) -> int:
        return int(sum(c.nbytes for c in self.queries.cols.values()))


class FirstKMerger(Merger):
    stateful = True
    needs_queries = True

    @staticmethod
    def blocks(results: pa.Table, n_buckets: int):
        bucket = qid_buckets(results.column("qid").to_numpy(), n_buckets)
        for b in np.unique(bucket).tolist():
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, CANDIDATES) as w:
                w.write(results.filter(pa.array(bucket == b)))
            yield b, sink.getvalue().to_pybytes()

    def restore(self, state):
        self.k, self.got = {}, {}
        if state is not None:
            for q, k, g in zip(*(state.column(c).to_pylist() for c in ("qid", "k", "got"))):
                self.k[q], self.got[q] = k, g

    def merge(self, blobs, queries: Events) -> MergeOutput:
        for i in np.flatnonzero(queries.kind == INSERT).tolist():
            self.k[int(queries.id[i])], self.got[int(queries.id[i])] = int(queries.k[i]), 0
        tables = [pa.ipc.open_stream(pa.py_buffer(b)).read_all() for b in blobs]
        cand = pa.concat_tables(tables) if tables else CANDIDATES.empty_table()
        cand = cand.group_by(["qid", "oid", "seq"]).aggregate([]).sort_by([("seq", "ascending"), ("qid", "ascending")])
        qids, oids = [], []
        full = []
        for q, o in zip(cand.column("qid").to_pylist(), cand.column("oid").to_pylist()):
            if self.got[q] < self.k[q]:
                self.got[q] += 1
                qids.append(q)
                oids.append(o)
                if self.got[q] == self.k[q]:
                    full.append(q)
        feedback = pa.table({"qid": pa.array(full, pa.int64()), "value": pa.array([self.k[q] for q in full], pa.float64())})
        return MergeOutput(pair_keys(np.array(qids, np.int64), np.array(oids, np.int64)), feedback)

    def export_state(self):
        qs = sorted(self.k)
        return pa.table({"qid": pa.array(qs, pa.int64()), "k": pa.array([self.k[q] for q in qs], pa.int64()),
                         "got": pa.array([self.got[q] for q in qs], pa.int64())})


def first_k_oracle(stream: Events) -> np.ndarray:
    """Per subscription, its live objects in seq order, the first k that match."""
    ins = np.flatnonzero((stream.kind == INSERT) & (stream.family == CODE))
    objs = np.flatnonzero(stream.kind == OBJECT)
    keys = []
    for i in ins.tolist():
        qid = stream.id[i]
        dels = stream.seq[(stream.kind == DELETE) & (stream.id == qid)]
        end = dels.min() if len(dels) else np.iinfo(np.int64).max
        live = objs[(stream.seq[objs] > stream.seq[i]) & (stream.seq[objs] < end)]
        q = stream.take(np.array([i]))
        hits = [o for o in live.tolist() if matches(stream, o, q)[0]][: int(stream.k[i])]
        keys += [(int(qid) << 32) | int(stream.id[o]) for o in hits]
    return np.unique(np.array(keys, np.int64))


def build_first_k(objects, term_df, extent, cfg, seed):
    """Range's workload with the subscriptions relabelled first_k, k = 1 + qid % 3."""
    wl = RangeFamily.build_workload(objects, term_df, extent, cfg, seed)
    ev = wl.events
    q = ev.family >= 0
    ev.cols["family"][q] = CODE
    ev.cols["k"][q] = 1 + ev.id[q] % 3
    return wl


class FirstKFamily(Family):
    name = "first_k"
    code = CODE
    index = FirstKIndex
    merger = FirstKMerger
    routes_like = "range"
    oracle = staticmethod(first_k_oracle)
    # its generated workloads: range's, relabelled; an event file's rows are read by the shared reader
    generator = staticmethod(build_first_k)
    check_generator = staticmethod(RangeFamily.validate_workload)
    # its rows in an event file: a subscription (no snapshot form) with a rectangle, keywords and k;
    # its results are (query, object) pairs, exported as such (Family.results' default)
    file_types = {INSERT: QueryType("first_k insert", needs=RECTANGLE, checks=(ordered_rectangle, positive_k))}
