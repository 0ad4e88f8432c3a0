"""kNN's snapshot queries (SSTD's SKQ) answered from a worker's object store: each query's k nearest
qualifying stored objects within its bounds (harness/families/object_store.py); SSTD's two-phase
SKQ bounds the second phase's answers by the first phase's distance (`r2`)."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from harness.core.events import AND, Events
from harness.core.kernels import axis_cell, lower_bound
from harness.families.object_store import ObjectStore, cell_candidates, qualifies

DIRECT_POSTINGS = 2048  # an SKQ whose rarest keyword fewer stored objects hold checks them directly

# the snapshot kNN queries to answer: their rows of the events, each one's range of store positions
# (lo, hi: before it and within its look-back), and the events' id, point, k, largest d2 (r2),
# operator and keywords
KnnQueries = namedtuple("KnnQueries", ["rows", "lo", "hi", "id", "x", "y", "k", "r2", "op", "off", "val"])


@njit(cache=True, inline="always")
def _offer(p, o_x, o_y, o_seq, qx, qy, kk, best_d, best_p, have, limit):
    """Object p into the k best by (d2, seq) so far, if d2 <= limit; returns the new count."""
    dx = o_x[p] - qx
    dy = o_y[p] - qy
    d2 = dx * dx + dy * dy
    if d2 > limit:
        return have
    if have == kk and not (d2 < best_d[kk - 1] or (d2 == best_d[kk - 1] and o_seq[p] < o_seq[best_p[kk - 1]])):
        return have
    pos = have if have < kk else kk - 1
    while pos > 0 and (best_d[pos - 1] > d2 or (best_d[pos - 1] == d2 and o_seq[best_p[pos - 1]] > o_seq[p])):
        best_d[pos] = best_d[pos - 1]
        best_p[pos] = best_p[pos - 1]
        pos -= 1
    best_d[pos] = d2
    best_p[pos] = p
    return have + 1 if have < kk else have


@njit(cache=True)
def knn_answers(queries, objects, index, by_term, grid, vocab, direct, work):
    """Each query's k nearest qualifying stored objects by (d2, seq). Under AND, when the query's
    rarest keyword is held by few stored objects of its bounds (at most `direct`), those are
    checked directly; otherwise the search goes ring by ring around the query's cell, within the
    cells the objects occupy (`box`): ring r lies outside the square of rings < r, so once that
    square's inner distance exceeds the k-th d2 no unscanned object can rank (strictly: an older
    object at the same distance would). `q_r2`: per query, the largest d2 an answer may have (inf:
    none; SSTD's second SKQ phase). Rows (qid, oid, seq) and d2, query by query. The queries are
    KnnQueries, the store's parts its StoredObjects, StoreIndex and TermIndex, `grid` its grid's
    kernel arguments."""
    q_rows, q_lo, q_hi, q_id, q_x, q_y, q_k, q_r2, q_op, q_off, q_val = queries
    o_id, o_seq, o_x, o_y, o_off, o_val = objects
    cell_ptr, cell_pos, ukeys, starts, post = index
    t_terms, t_starts, t_post, box = by_term
    x0, y0, icw, ich, nx, ny = grid
    total = 0
    for i in range(len(q_rows)):
        total += max(q_k[q_rows[i]], 1)
    ids = np.empty((total, 3), np.int64)
    dist = np.empty(total, np.float64)
    n = 0
    cw, ch = 1.0 / icw, 1.0 / ich
    for i in range(len(q_rows)):
        q = q_rows[i]
        kk = max(q_k[q], 1)
        lo, hi = q_lo[i], q_hi[i]
        best_d = np.empty(kk, np.float64)
        best_p = np.empty(kk, np.int64)
        have = 0
        checked = 0
        qx, qy, limit = q_x[q], q_y[q], q_r2[q]
        cx, cy = axis_cell(qx, x0, icw, nx), axis_cell(qy, y0, ich, ny)
        last = max(max(cx - box[0], box[1] - cx), max(cy - box[2], box[3] - cy))
        r = 0
        if q_op[q] == AND and q_off[q + 1] > q_off[q] and hi > lo:  # the rarest keyword's holders
            best_a, best_b = 0, -1
            for j in range(q_off[q], q_off[q + 1]):
                at = lower_bound(t_terms, 0, len(t_terms), q_val[j])
                a, b = 0, 0
                if at < len(t_terms) and t_terms[at] == q_val[j]:
                    a = lower_bound(t_post, t_starts[at], t_starts[at + 1], lo)
                    b = lower_bound(t_post, a, t_starts[at + 1], hi)
                if best_b < 0 or b - a < best_b - best_a:
                    best_a, best_b = a, b
            if best_b - best_a <= direct:
                for t in range(best_a, best_b):
                    p = t_post[t]
                    checked += 1
                    if qualifies(p, q, q_op, q_off, q_val, o_off, o_val):
                        have = _offer(p, o_x, o_y, o_seq, qx, qy, kk, best_d, best_p, have, limit)
                r = last + 1  # done
        while hi > lo and r <= last:
            if r > 0 and (have == kk or limit < np.inf):
                inner = min(min(qx - (x0 + (cx - r + 1) * cw), (x0 + (cx + r) * cw) - qx),
                            min(qy - (y0 + (cy - r + 1) * ch), (y0 + (cy + r) * ch) - qy))
                inner *= 1.0 - 1e-9  # a margin for the boundaries' rounding: stopping later is safe
                if inner > 0.0 and inner * inner > (min(best_d[kk - 1], limit) if have == kk else limit):
                    break
            for gy in range(max(cy - r, box[2]), min(cy + r, box[3]) + 1):
                edge_row = gy == cy - r or gy == cy + r
                for gx in range(max(cx - r, box[0]), min(cx + r, box[1]) + 1):
                    if not edge_row and gx != cx - r and gx != cx + r:
                        continue  # inside the ring: scanned before
                    arr, a, b = cell_candidates(gy * nx + gx, q, lo, hi, q_op, q_off, q_val, cell_ptr, cell_pos, ukeys,
                                            starts, post, vocab)
                    for t in range(a, b):
                        p = arr[t]
                        checked += 1
                        if qualifies(p, q, q_op, q_off, q_val, o_off, o_val):
                            have = _offer(p, o_x, o_y, o_seq, qx, qy, kk, best_d, best_p, have, limit)
            r += 1
        for j in range(have):
            ids[n, 0] = q_id[q]
            ids[n, 1] = o_id[best_p[j]]
            ids[n, 2] = o_seq[best_p[j]]
            dist[n] = best_d[j]
            n += 1
        work[i] = 1 + checked
    return ids[:n], dist[:n]


def answer_knn(store: ObjectStore, ev: Events, rows: np.ndarray,
               r2: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SKQ: the local k nearest as (qid, oid, seq) rows and d2, and the work of each snapshot row;
    `r2` (per event of `ev`): the largest d2 an answer may have (None: no bound)."""
    work = np.ones(len(rows), np.int64)
    if len(rows) == 0 or len(store.objects) == 0:
        return np.zeros((0, 3), np.int64), np.zeros(0), work
    lo, hi = store.bounds(ev, rows)
    r2 = np.full(len(ev), np.inf) if r2 is None else np.asarray(r2, np.float64)
    queries = KnnQueries(rows, lo, hi, ev.id, ev.x, ev.y, ev.k.astype(np.int64), r2, ev.op, ev.offsets, ev.values)
    ids, d2 = knn_answers(queries, store.stored(), store.index(), store.by_term(), store.grid.args, store.vocab,
                          DIRECT_POSTINGS, work)
    return ids, d2, work
