"""The kNN family's brute-force oracle: every subscription against every object of its lifetime.

Shares no code with the worker index or the merger (no grid, no postings, no replay): per kNN
subscription, the objects that arrive strictly after its insertion and before its deletion, in
seq order, pass its keyword predicate (OR: a common term; AND: all its terms) or not; a passing
object enters A(s) iff fewer than k earlier passing objects have d2 <= its own. That is the
strict entry rule restated: A before o holds the k smallest earlier objects by (d2, seq), and
d2(o) < d2 of its k-th member exactly when fewer than k earlier objects are within d2(o).
It keeps the k smallest distances so far in a sorted array. A subscription reads only the objects
that share one of its keywords, from per-term lists of object positions built once per stream
(the objects a keyword predicate can pass are exactly those; AND reads its rarest keyword's and
checks the rest), so it costs O(its keywords' objects x k) rather than O(objects x k), which
is what lets a run of a million subscriptions be checked; compiled with numba, the
subscriptions in one chunk per core (`in_chunks`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.events import AND, DELETE, INSERT, KNN, OBJECT, Events, csr_take
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


def term_postings(kind: np.ndarray, offsets: np.ndarray, values: np.ndarray, n_terms: int):
    """The objects' positions (in `np.flatnonzero(kind == OBJECT)`, so in seq order) per term, as
    CSR (term offsets, positions ascending within a term)."""
    objs = np.flatnonzero(kind == OBJECT)
    o_off, o_val = csr_take(offsets, values, objs)
    pos = np.repeat(np.arange(len(objs), dtype=np.int64), np.diff(o_off))
    terms = o_val.astype(np.int64)
    order = np.argsort(terms, kind="stable")  # positions stay ascending within a term
    t_off = np.zeros(n_terms + 2, np.int64)
    np.cumsum(np.bincount(terms, minlength=n_terms + 1), out=t_off[1:])
    return objs, t_off, pos[order]


@njit(cache=True, nogil=True)
def _entries(q_rows, q_end, seq, ids, x, y, op, k, offsets, values, n_terms_max, objs, t_off, t_pos):
    """(query id, object id) of every entry, query by query. A query reads only the objects
    sharing one of its keywords (AND: those of its rarest keyword, then checked for the others),
    from the terms' position lists, in seq order."""
    obj_seq = seq[objs]
    out_q = np.empty(1024, np.int64)
    out_o = np.empty(1024, np.int64)
    n = 0
    mark = np.zeros(n_terms_max + 1, np.bool_)
    cand = np.empty(1024, np.int64)
    for qi in range(len(q_rows)):
        i = q_rows[qi]
        kk = max(k[i], 1)
        best = np.full(kk, np.inf)  # the kk smallest distances so far, ascending
        who = np.zeros(kk, np.int64)
        have = 0
        need = offsets[i + 1] - offsets[i]
        first = np.searchsorted(obj_seq, seq[i], side="right")
        last = np.searchsorted(obj_seq, q_end[qi], side="left")
        rarest, n_c = -1, 0
        for j in range(offsets[i], offsets[i + 1]):
            t = values[j]
            mark[t] = True
            if t <= n_terms_max and (rarest < 0 or t_off[t + 1] - t_off[t] < t_off[rarest + 1] - t_off[rarest]):
                rarest = t
        for j in range(offsets[i], offsets[i + 1]):  # the candidates' positions within [first, last)
            t = values[j]
            if op[i] == AND and t != rarest:
                continue
            lo = t_off[t] + np.searchsorted(t_pos[t_off[t]:t_off[t + 1]], first)
            hi = t_off[t] + np.searchsorted(t_pos[t_off[t]:t_off[t + 1]], last)
            if n_c + hi - lo > len(cand):
                cand = np.concatenate((cand, np.empty(max(len(cand), n_c + hi - lo), np.int64)))
            cand[n_c:n_c + hi - lo] = t_pos[lo:hi]
            n_c += hi - lo
            if op[i] == AND:
                break
        order = np.sort(cand[:n_c])
        prev = -1
        for p in order:
            if p == prev:  # an object with two of the query's keywords
                continue
            prev = p
            o = objs[p]
            if op[i] == AND:
                common = 0
                for j in range(offsets[o], offsets[o + 1]):
                    if values[j] <= n_terms_max and mark[values[j]]:
                        common += 1
                if common < need:
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

    objs, t_off, t_pos = term_postings(stream.kind, stream.offsets, stream.values, top)

    def entries(part: np.ndarray) -> np.ndarray:
        q, o = _entries(ins[part], end[part], stream.seq, stream.id, stream.x, stream.y, stream.op, k,
                        stream.offsets, stream.values, top, objs, t_off, t_pos)
        return (q << np.int64(32)) | o

    per_term = len(t_pos) // max(top, 1) + 1  # a query reads about this many objects per keyword
    return np.unique(np.concatenate([*in_chunks(entries, len(ins), work=len(ins) * per_term), snapshots]))


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
