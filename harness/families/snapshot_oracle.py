"""The rules every snapshot query's brute force shares (SSTD's SRQ and SKQ: each family's own in its
folder's oracle.py): which objects a snapshot query sees, and its keyword predicate.

Shares no code with the object store (harness/families/object_store.py): no grid, no postings;
objects are scanned in seq order and keywords checked by linear membership. An object is visible
to a snapshot query q when it arrived before q (seq < q.seq) and within q's look-back
(ts > q.ts - q.tau). Each query's scan starts at the first object whose running maximum of ts
passes q.ts - q.tau (every earlier object is older than the look-back, whatever the stream's ts
order) and ends at q's own seq (`scan_bounds`); queries are answered in one chunk per core, numba
releasing the GIL (`answer_snapshots`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.events import AND, OBJECT, SNAPSHOT, Events
from harness.families.chunks import in_chunks


@njit(cache=True)
def term_member(vals, lo, hi, t):
    """Whether term t is among vals[lo:hi] (a linear scan)."""
    for i in range(lo, hi):
        if vals[i] == t:
            return True
    return False


@njit(cache=True)
def keywords_pass(o, q, op, offsets, values):
    """Whether object row o holds query row q's keywords (AND: all, OR: one; none: any object)."""
    need = offsets[q + 1] - offsets[q]
    hits = 0
    for j in range(offsets[q], offsets[q + 1]):
        if term_member(values, offsets[o], offsets[o + 1], values[j]):
            hits += 1
    if need == 0:
        return True
    return hits == need if op[q] == AND else hits > 0


@njit(cache=True)
def visible(o, q, seq, ts, tau):
    """Whether object row o arrived before snapshot query row q and within its look-back."""
    return seq[o] < seq[q] and ts[o] > ts[q] - tau[q]


def in_seq_order(stream: Events) -> Events:
    """The stream in seq order (itself when it already is)."""
    order = np.argsort(stream.seq, kind="stable")
    return stream if np.array_equal(order, np.arange(len(stream))) else stream.take(order)


def scan_bounds(s: Events, queries: np.ndarray, objs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per query, the slice of `objs` (in seq order) that may be visible to it: from the first
    object whose running maximum of ts exceeds q.ts - q.tau, to the last one before q's seq."""
    running_max = np.maximum.accumulate(s.ts[objs]) if len(objs) else s.ts[objs]
    first = np.searchsorted(running_max, s.ts[queries] - s.tau[queries], side="right")
    last = np.searchsorted(s.seq[objs], s.seq[queries], side="left")
    return first.astype(np.int64), np.maximum(first, last).astype(np.int64)


def answer_snapshots(kernel, stream: Events, family: int, columns) -> np.ndarray:
    """qid<<32 | oid of every answer of the family's snapshot queries: `kernel(queries, first,
    last, objs, seq, ts, tau, ids, x, y, *columns(s))` over chunks of the queries, `s` the stream
    in seq order."""
    s = in_seq_order(stream)
    queries = np.flatnonzero((s.kind == SNAPSHOT) & (s.family == family))
    if len(queries) == 0:
        return np.zeros(0, np.int64)
    objs = np.flatnonzero(s.kind == OBJECT)
    first, last = scan_bounds(s, queries, objs)
    extra = columns(s)

    def answer(part: np.ndarray) -> np.ndarray:
        q, o = kernel(queries[part], first[part], last[part], objs, s.seq, s.ts, s.tau, s.id, s.x, s.y, *extra)
        return (q << np.int64(32)) | o

    return np.unique(np.concatenate(in_chunks(answer, len(queries), work=int((last - first).sum()))))
