"""The kNN family's brute-force oracle: every subscription against every object of its lifetime.

Shares no code with the worker index or the merger (no grid, no postings, no replay): per kNN
subscription, the objects that arrive strictly after its insertion and before its deletion, in
seq order, pass its keyword predicate (OR: a common term; AND: all its terms) or not; a passing
object enters A(s) iff fewer than k earlier passing objects have d2 <= its own. That is the
strict entry rule restated: A before o holds the k smallest earlier objects by (d2, seq), and
d2(o) < d2 of its k-th member exactly when fewer than k earlier objects are within d2(o).
It keeps the k smallest distances so far in a sorted array, so a subscription costs
O(objects x k); compiled with numba, the subscriptions in one chunk per core (`in_chunks`), so
that runs of tens of thousands of subscriptions finish.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.events import AND, DELETE, INSERT, KNN, OBJECT, Events
from harness.families.chunks import in_chunks
from harness.families.snapshot_oracle import answer_snapshots, keywords_pass, visible


@njit(cache=True)
def _keep(best, who, have, kk, d2, o):
    """Insert object o at distance d2 into the kk smallest so far (`best` ascending, `who` beside
    it; ties: the earlier stays ahead); the new count. Callers skip o when the list is full and
    d2 is not below its last."""
    pos = have if have < kk else kk - 1
    while pos > 0 and best[pos - 1] > d2:
        best[pos] = best[pos - 1]
        who[pos] = who[pos - 1]
        pos -= 1
    best[pos] = d2
    who[pos] = o
    return have + 1 if have < kk else have


@njit(cache=True, nogil=True)
def _entries(q_rows, q_end, kind, seq, ids, x, y, op, k, offsets, values, n_terms_max):
    """(query id, object id) of every entry, query by query."""
    objs = np.flatnonzero(kind == OBJECT)
    out_q = np.empty(1024, np.int64)
    out_o = np.empty(1024, np.int64)
    n = 0
    mark = np.zeros(n_terms_max + 1, np.bool_)
    for qi in range(len(q_rows)):
        i = q_rows[qi]
        kk = max(k[i], 1)
        best = np.full(kk, np.inf)  # the kk smallest distances so far, ascending
        who = np.zeros(kk, np.int64)
        have = 0
        need = offsets[i + 1] - offsets[i]
        for j in range(offsets[i], offsets[i + 1]):
            mark[values[j]] = True
        start = np.searchsorted(seq[objs], seq[i], side="right")
        for p in range(start, len(objs)):
            o = objs[p]
            if seq[o] >= q_end[qi]:
                break
            common = 0
            for j in range(offsets[o], offsets[o + 1]):
                if values[j] <= n_terms_max and mark[values[j]]:
                    common += 1
            if common == 0 or (op[i] == AND and common < need):
                continue
            dx = x[o] - x[i]
            dy = y[o] - y[i]
            d2 = dx * dx + dy * dy
            if have == kk and not d2 < best[kk - 1]:
                continue
            have = _keep(best, who, have, kk, d2, o)  # enters
            if n == len(out_q):
                out_q = np.concatenate((out_q, np.empty(n, np.int64)))
                out_o = np.concatenate((out_o, np.empty(n, np.int64)))
            out_q[n] = ids[i]
            out_o[n] = ids[o]
            n += 1
        for j in range(offsets[i], offsets[i + 1]):
            mark[values[j]] = False
    return out_q[:n], out_o[:n]


def knn_oracle(stream: Events) -> np.ndarray:
    """Sorted distinct keys qid<<32 | oid of every entry of every kNN subscription in the stream,
    and of each snapshot kNN query's answer."""
    snapshots = snapshot_knn_keys(stream, KNN)
    ins = np.flatnonzero((stream.kind == INSERT) & (stream.family == KNN))
    if len(ins) == 0:
        return snapshots
    never = np.iinfo(np.int64).max
    end = np.full(len(ins), never, np.int64)
    dels = np.flatnonzero((stream.kind == DELETE) & (stream.family == KNN))
    for i, q in enumerate(stream.id[ins].tolist()):  # the first deletion after the insertion
        d = dels[(stream.id[dels] == q) & (stream.seq[dels] > stream.seq[ins[i]])]
        if len(d):
            end[i] = stream.seq[d].min()
    seq_order = np.argsort(stream.seq, kind="stable")
    if not np.array_equal(seq_order, np.arange(len(stream))):
        stream = stream.take(seq_order)
        return knn_oracle(stream)
    top = int(stream.values.max()) if len(stream.values) else 0
    k = stream.k.astype(np.int64)

    def entries(part: np.ndarray) -> np.ndarray:
        q, o = _entries(ins[part], end[part], stream.kind, stream.seq, stream.id, stream.x, stream.y, stream.op,
                        k, stream.offsets, stream.values, top)
        return (q << np.int64(32)) | o

    n_objects = int((stream.kind == OBJECT).sum())
    return np.unique(np.concatenate([*in_chunks(entries, len(ins), work=len(ins) * n_objects // 2), snapshots]))


# -- snapshot kNN queries (SSTD's SKQ): the k nearest visible objects with the keywords ------------------


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
            if not visible(o, q, seq, ts, tau) or not keywords_pass(o, q, op, offsets, values):
                continue
            dx = x[o] - x[q]
            dy = y[o] - y[q]
            d2 = dx * dx + dy * dy
            if have == kk and not d2 < best[kk - 1]:
                continue
            have = _keep(best, who, have, kk, d2, o)
        for j in range(have):
            if n == len(out_q):
                out_q = np.concatenate((out_q, np.empty(n, np.int64)))
                out_o = np.concatenate((out_o, np.empty(n, np.int64)))
            out_q[n] = ids[q]
            out_o[n] = ids[who[j]]
            n += 1
    return out_q[:n], out_o[:n]


def snapshot_knn_keys(stream: Events, family: int) -> np.ndarray:
    """qid<<32 | oid of each snapshot kNN query's k nearest qualifying objects by (d2, seq)."""
    return answer_snapshots(_nearest, stream, family, lambda s: (s.k.astype(np.int64), s.op, s.offsets, s.values))
