"""The brute-force oracle: every object against every subscription, no index at all.

It is written independently of GI2 (plain loops, linear keyword membership) so that the two
cannot share a bug. `oracle_keys` answers for a whole stream in one place (the centralised
answer every run is checked against); `BruteForceRangeIndex` is the same check behind the
WorkerIndex interface, so tests can run it per worker like any index.
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit

from harness.core.events import AND, DELETE, INSERT, OBJECT, RANGE, Events, sorted_unique
from harness.families.chunks import in_chunks
from harness.families.snapshot_oracle import answer_snapshots, keywords_pass, visible
from harness.families.base import NEVER, IndexContext, StateBundle, WorkerIndex, WorkerOutput, deletion_seqs


@njit(cache=True)
def _has(vals, lo, hi, t):
    for i in range(lo, hi):
        if vals[i] == t:
            return True
    return False


@njit(cache=True, nogil=True)
def _brute_force_match(o_seq, o_id, o_x, o_y, o_off, o_val, q_id, q_xmin, q_ymin, q_xmax, q_ymax, q_op, q_off,
                       q_val, q_ins, q_del, o_work):
    out = np.empty(1024, np.int64)
    n = 0
    for i in range(len(o_seq)):
        s = o_seq[i]
        checks = 0
        for p in range(len(q_id)):
            if q_ins[p] >= s or q_del[p] <= s:
                continue
            checks += 1
            if o_x[i] < q_xmin[p] or o_x[i] > q_xmax[p] or o_y[i] < q_ymin[p] or o_y[i] > q_ymax[p]:
                continue
            hits = 0
            for j in range(q_off[p], q_off[p + 1]):
                if _has(o_val, o_off[i], o_off[i + 1], q_val[j]):
                    hits += 1
            need = q_off[p + 1] - q_off[p] if q_op[p] == AND else 1
            if hits >= need and hits > 0:
                if n == len(out):
                    bigger = np.empty(2 * n, np.int64)
                    bigger[:n] = out
                    out = bigger
                out[n] = (q_id[p] << 32) | o_id[i]
                n += 1
        o_work[i] = 1 + checks
    return out[:n]


def _match(objects: Events, queries: Events, ins: np.ndarray, dele: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    work = np.ones(len(objects), np.int64)
    keys = _brute_force_match(
        objects.seq, objects.id, objects.x, objects.y, objects.offsets, objects.values, queries.id, queries.xmin,
        queries.ymin, queries.xmax, queries.ymax, queries.op, queries.offsets, queries.values, ins, dele, work,
    )
    return keys, work


def oracle_keys(stream: Events) -> np.ndarray:
    """Distinct result keys of a whole range stream: subscriptions and snapshot queries."""
    objects = stream.take(np.flatnonzero(stream.kind == OBJECT))
    q_rows = np.flatnonzero((stream.kind == INSERT) & (stream.family == RANGE))
    queries = stream.take(q_rows)
    ins, dele = queries.seq.copy(), deletion_seqs(queries.id, stream)[0]
    # the brute force is embarrassingly parallel over objects: one chunk per core (numba drops the GIL)
    parts = in_chunks(lambda part: _match(objects.take(part), queries, ins, dele)[0], len(objects),
                      work=len(objects) * len(queries))
    parts.append(snapshot_range_keys(stream, RANGE))  # SRQ
    return sorted_unique(np.concatenate(parts))


class BruteForceRangeIndex(WorkerIndex):
    family = "range"
    chunkable = True

    def __init__(self, context: IndexContext, **_):
        super().__init__(context)
        self.queries = Events.empty()
        self.ins = np.zeros(0, np.int64)
        self.dele = np.zeros(0, np.int64)

    def restore(self, state: StateBundle) -> float:
        state = state.queries
        self.queries = state
        self.ins = np.full(len(state), -1, np.int64)
        self.dele = np.full(len(state), NEVER, np.int64)
        return 0.0

    def process(self, ev: Events) -> WorkerOutput:
        t0 = time.process_time()
        ins_rows = np.flatnonzero(ev.kind == INSERT)
        self.queries = Events.concat([self.queries, ev.take(ins_rows)])
        self.ins = np.concatenate([self.ins, ev.seq[ins_rows]])
        self.dele = np.concatenate([self.dele, np.full(len(ins_rows), NEVER, np.int64)])
        self.dele = np.minimum(self.dele, deletion_seqs(self.queries.id, ev)[0])
        obj_rows = np.flatnonzero(ev.kind == OBJECT)
        keys, obj_work = _match(ev.take(obj_rows), self.queries, self.ins, self.dele)
        work = np.ones(len(ev), np.int64)
        work[obj_rows] = obj_work
        counters = {"objects": len(obj_rows), "inserts": len(ins_rows), "deletes": int((ev.kind == DELETE).sum()),
                    "candidates": int(obj_work.sum() - len(obj_rows)), "results": len(keys)}
        return WorkerOutput(results=keys, work=work, counters=counters, busy_s=time.process_time() - t0)

    def export_state(self) -> StateBundle:
        return StateBundle(queries=self.queries.take(np.flatnonzero(self.dele == NEVER)))

    def size_bytes(self) -> int:
        return int(sum(a.nbytes for a in self.queries.cols.values()) + self.queries.values.nbytes)


# -- snapshot range queries (SSTD's SRQ): every visible object in the rectangle with the keywords --------


@njit(cache=True, nogil=True)
def _range(queries, first, last, objs, seq, ts, tau, ids, x, y, xmin, ymin, xmax, ymax, op, offsets, values):
    out_q = np.empty(64, np.int64)
    out_o = np.empty(64, np.int64)
    n = 0
    for i in range(len(queries)):
        q = queries[i]
        for p in range(first[i], last[i]):
            o = objs[p]
            if not visible(o, q, seq, ts, tau):
                continue
            if x[o] < xmin[q] or x[o] > xmax[q] or y[o] < ymin[q] or y[o] > ymax[q]:
                continue
            if not keywords_pass(o, q, op, offsets, values):
                continue
            if n == len(out_q):
                out_q = np.concatenate((out_q, np.empty(n, np.int64)))
                out_o = np.concatenate((out_o, np.empty(n, np.int64)))
            out_q[n] = ids[q]
            out_o[n] = ids[o]
            n += 1
    return out_q[:n], out_o[:n]


def snapshot_range_keys(stream: Events, family: int) -> np.ndarray:
    """qid<<32 | oid of every object in each snapshot range query's answer."""
    return answer_snapshots(_range, stream, family,
                            lambda s: (s.xmin, s.ymin, s.xmax, s.ymax, s.op, s.offsets, s.values))
