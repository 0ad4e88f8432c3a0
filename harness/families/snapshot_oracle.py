"""Brute-force answers of snapshot queries (SSTD's SRQ and SKQ): every query against every object.

Shares no code with the object store (harness/families/object_store.py): no grid, no postings;
objects are scanned in seq order and keywords checked by linear membership. An object is visible
to a snapshot query q when it arrived before q (seq < q.seq) and within q's look-back
(ts > q.ts - q.tau). Each query's scan starts at the first object whose running maximum of ts
passes q.ts - q.tau (every earlier object is older than the look-back, whatever the stream's ts
order) and ends at q's own seq; queries are answered in one chunk per core, numba releasing the
GIL (`in_chunks`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.events import AND, OBJECT, SNAPSHOT, Events
from harness.families.chunks import in_chunks


@njit(cache=True)
def _member(vals, lo, hi, t):
    for i in range(lo, hi):
        if vals[i] == t:
            return True
    return False


@njit(cache=True)
def _passes(o, q, op, offsets, values):
    need = offsets[q + 1] - offsets[q]
    hits = 0
    for j in range(offsets[q], offsets[q + 1]):
        if _member(values, offsets[o], offsets[o + 1], values[j]):
            hits += 1
    if need == 0:
        return True
    return hits == need if op[q] == AND else hits > 0


@njit(cache=True)
def _visible(o, q, seq, ts, tau):
    return seq[o] < seq[q] and ts[o] > ts[q] - tau[q]


@njit(cache=True, nogil=True)
def _range(queries, first, last, objs, seq, ts, tau, ids, x, y, xmin, ymin, xmax, ymax, op, offsets, values):
    out_q = np.empty(64, np.int64)
    out_o = np.empty(64, np.int64)
    n = 0
    for i in range(len(queries)):
        q = queries[i]
        for p in range(first[i], last[i]):
            o = objs[p]
            if not _visible(o, q, seq, ts, tau):
                continue
            if x[o] < xmin[q] or x[o] > xmax[q] or y[o] < ymin[q] or y[o] > ymax[q]:
                continue
            if not _passes(o, q, op, offsets, values):
                continue
            if n == len(out_q):
                out_q = np.concatenate((out_q, np.empty(n, np.int64)))
                out_o = np.concatenate((out_o, np.empty(n, np.int64)))
            out_q[n] = ids[q]
            out_o[n] = ids[o]
            n += 1
    return out_q[:n], out_o[:n]


@njit(cache=True, nogil=True)
def _nearest(queries, first, last, objs, seq, ts, tau, ids, x, y, k, op, offsets, values):
    out_q = np.empty(64, np.int64)
    out_o = np.empty(64, np.int64)
    n = 0
    for i in range(len(queries)):
        q = queries[i]
        kk = max(k[q], 1)
        best = np.full(kk, np.inf)
        who = np.zeros(kk, np.int64)
        have = 0
        for p in range(first[i], last[i]):  # seq order: a later object never passes an equally near one
            o = objs[p]
            if not _visible(o, q, seq, ts, tau) or not _passes(o, q, op, offsets, values):
                continue
            dx = x[o] - x[q]
            dy = y[o] - y[q]
            d2 = dx * dx + dy * dy
            if have == kk and not d2 < best[kk - 1]:
                continue
            pos = have if have < kk else kk - 1
            while pos > 0 and best[pos - 1] > d2:
                best[pos] = best[pos - 1]
                who[pos] = who[pos - 1]
                pos -= 1
            best[pos] = d2
            who[pos] = o
            if have < kk:
                have += 1
        for j in range(have):
            if n == len(out_q):
                out_q = np.concatenate((out_q, np.empty(n, np.int64)))
                out_o = np.concatenate((out_o, np.empty(n, np.int64)))
            out_q[n] = ids[q]
            out_o[n] = ids[who[j]]
            n += 1
    return out_q[:n], out_o[:n]


def _in_seq_order(stream: Events) -> Events:
    order = np.argsort(stream.seq, kind="stable")
    return stream if np.array_equal(order, np.arange(len(stream))) else stream.take(order)


def _scan_bounds(s: Events, queries: np.ndarray, objs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per query, the slice of `objs` (in seq order) that may be visible to it: from the first
    object whose running maximum of ts exceeds q.ts - q.tau, to the last one before q's seq."""
    running_max = np.maximum.accumulate(s.ts[objs]) if len(objs) else s.ts[objs]
    first = np.searchsorted(running_max, s.ts[queries] - s.tau[queries], side="right")
    last = np.searchsorted(s.seq[objs], s.seq[queries], side="left")
    return first.astype(np.int64), np.maximum(first, last).astype(np.int64)


def _answers(kernel, s: Events, family: int, *columns) -> np.ndarray:
    queries = np.flatnonzero((s.kind == SNAPSHOT) & (s.family == family))
    if len(queries) == 0:
        return np.zeros(0, np.int64)
    objs = np.flatnonzero(s.kind == OBJECT)
    first, last = _scan_bounds(s, queries, objs)

    def answer(part: np.ndarray) -> np.ndarray:
        q, o = kernel(queries[part], first[part], last[part], objs, s.seq, s.ts, s.tau, s.id, s.x, s.y, *columns)
        return (q << np.int64(32)) | o

    return np.unique(np.concatenate(in_chunks(answer, len(queries), work=int((last - first).sum()))))


def snapshot_range_keys(stream: Events, family: int) -> np.ndarray:
    """qid<<32 | oid of every object in each snapshot range query's answer."""
    s = _in_seq_order(stream)
    return _answers(_range, s, family, s.xmin, s.ymin, s.xmax, s.ymax, s.op, s.offsets, s.values)


def snapshot_knn_keys(stream: Events, family: int) -> np.ndarray:
    """qid<<32 | oid of each snapshot kNN query's k nearest qualifying objects by (d2, seq)."""
    s = _in_seq_order(stream)
    return _answers(_nearest, s, family, s.k.astype(np.int64), s.op, s.offsets, s.values)
