"""The kNN worker's epoch kernel: its sub-stream in seq order through the subscriptions' postings.

An insertion is linked under its terms (the per-term lists), a deletion sets its bound below every
distance, and an object probes its cell's ball postings (their points stored with them, so the
distance test reads memory in order) and the per-term lists under each of its terms. Only an object
within a subscription's bound (d2 < min(local k-th, r_g^2), inf while A(s) is not full) is looked at
further: unless the subscription took it already or it lacks an AND keyword, it enters A(s), and
the worker emits the candidate (qid, oid, seq, d2) (index.py's module docstring has the semantics).

The kernel, called once per chunk of events, takes the arrays that form one state together as
named tuples (the chunk, the subscriptions, their local results, the postings) and unpacks them
once at its top; the helpers it calls for every candidate take the arrays themselves (numba hands a
tuple over as one argument per array and counts a reference to each on every call).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from harness.core.events import AND, DELETE, INSERT, OBJECT
from harness.core.kernels import axis_cell, lower_bound
from harness.families.knn.nearest import insert_nearest
from harness.families.knn.postings import link_terms

# a chunk of the epoch's events: kind, seq, id, point, terms as CSR (offsets into the epoch's
# term ids) and the subscription slot of an insert or delete (-1: none)
Chunk = namedtuple("Chunk", ["kind", "seq", "id", "x", "y", "off", "val", "slot"])

# the subscriptions by slot: centre, k, keyword operator, keywords as CSR, query id
Subscriptions = namedtuple("Subscriptions", ["x", "y", "k", "op", "off", "val", "id"])

# per subscription its local A(s), at most k members in (d2, seq) order from koff[s] on, with the
# bound an object must be within (min(local k-th, r_g^2); -inf once deleted), the stamp of the last
# object it took, its member count and the global bound r_g^2 of the merger's feedback
Results = namedtuple("Results", ["bound", "stamp", "count", "koff", "d2", "seq", "oid", "rg2"])

# where objects look the subscriptions up (postings.py): per cell (grid cell or SOP subset) the
# sorted distinct keys cell x vocab + term and each key's run of ball postings with their points,
# the subsets' rectangles (none: the grid), and the per-term linked lists of the subscriptions
# without a ball in the grid
Postings = namedtuple("Postings", ["ukeys", "cell_ptr", "starts", "post", "px", "py", "sub_rect", "head", "nxt",
                                   "link_slot"])


@njit(cache=True)
def _has_all(q_off, q_val, s, o_val, o_lo, o_hi):
    """Every keyword of subscription s is among the object's (sorted) terms."""
    for j in range(q_off[s], q_off[s + 1]):
        at = lower_bound(o_val, o_lo, o_hi, q_val[j])
        if at >= o_hi or o_val[at] != q_val[j]:
            return False
    return True


@njit(cache=True, inline="always")
def _enter(s, d2, o_seq, o_id, o_val, o_lo, o_hi, qk, op, q_off, q_val, stamp, bound, count, koff, top_d, top_seq,
           top_oid):
    """An object within subscription s's bound: unless s already took it (an OR subscription
    reached under two of its terms) or it lacks an AND keyword, it enters A(s). Returns whether.
    Called for every object a bound admits, so it takes the arrays themselves (a tuple unpacked
    here would be counted again on every call)."""
    if stamp[s] == o_seq:
        return False
    stamp[s] = o_seq
    if op[s] == AND and not _has_all(q_off, q_val, s, o_val, o_lo, o_hi):
        return False
    k = qk[s]
    base = koff[s]
    c = insert_nearest(top_d, top_seq, top_oid, base, count[s], k, d2, o_seq, o_id)
    count[s] = c
    if c == k and top_d[base + k - 1] < bound[s]:
        bound[s] = top_d[base + k - 1]
    return True


@njit(cache=True)
def _emit(out, out_d, n_out, qid, oid, seq, d2):
    """Append a candidate, growing the outputs by doubling."""
    if n_out == out.shape[0]:
        bigger = np.empty((2 * out.shape[0] + 16, 3), np.int64)
        bigger[:n_out] = out[:n_out]
        out = bigger
        bigger_d = np.empty(2 * out_d.shape[0] + 16, np.float64)
        bigger_d[:n_out] = out_d[:n_out]
        out_d = bigger_d
    out[n_out, 0] = qid
    out[n_out, 1] = oid
    out[n_out, 2] = seq
    out_d[n_out] = d2
    return out, out_d


@njit(cache=True)
def run_stream(ev, subs, res, posts, n_links, grid, vocab, work):
    """The chunk's events in seq order (module docstring): `grid` is the grid's (x0, y0, 1 / cell
    width, 1 / cell height, nx, ny), `n_links` the per-term links in use. Returns the candidates
    ((qid, oid, seq) rows and their d2), the links in use and the checks spent in the per-term
    lists; adds each event's work to `work`."""
    kind, seq, ids, ex, ey, e_off, e_val, slot_of_row = ev
    qx, qy, qk, op, q_off, q_val, qid = subs
    bound, stamp, count, koff, top_d, top_seq, top_oid, rg2 = res
    ukeys, cell_ptr, starts, post, px, py, sub_rect, head, nxt, link_slot = posts
    x0, y0, icw, ich, nx, ny = grid
    out = np.empty((16, 3), np.int64)
    out_d = np.empty(16, np.float64)
    n_out = 0
    listed = 0  # checks spent in the per-term lists
    one = np.empty(1, np.int64)
    for r in range(len(kind)):
        if kind[r] == INSERT:
            one[0] = slot_of_row[r]
            bound[one[0]] = rg2[one[0]]
            before = n_links
            n_links = link_terms(one, op, q_off, q_val, head, nxt, link_slot, n_links)
            work[r] = 1 + n_links - before
        elif kind[r] == DELETE:
            if slot_of_row[r] >= 0:
                bound[slot_of_row[r]] = -np.inf
            work[r] = 1
        elif kind[r] == OBJECT:
            ox = ex[r]
            oy = ey[r]
            o_lo = e_off[r]
            o_hi = e_off[r + 1]
            checks = 0
            n_sub = sub_rect.shape[0]
            for ci in range(n_sub if n_sub else 1):
                if n_sub:  # SOP: every subset whose R holds the object (a rectangle test each)
                    checks += 1
                    if ox < sub_rect[ci, 0] or ox > sub_rect[ci, 2] or oy < sub_rect[ci, 1] or oy > sub_rect[ci, 3]:
                        continue
                    cell = ci
                else:
                    cell = axis_cell(oy, y0, ich, ny) * nx + axis_cell(ox, x0, icw, nx)
                c_lo = cell_ptr[cell]
                c_hi = cell_ptr[cell + 1]
                if c_hi == c_lo:
                    continue
                for j in range(o_lo, o_hi):
                    key = np.int64(cell) * vocab + e_val[j]
                    at = lower_bound(ukeys, c_lo, c_hi, key)
                    if at < c_hi and ukeys[at] == key:
                        checks += starts[at + 1] - starts[at]
                        for e in range(starts[at], starts[at + 1]):
                            dx = ox - px[e]
                            dy = oy - py[e]
                            d2 = dx * dx + dy * dy
                            s = post[e]
                            if d2 < bound[s] and _enter(s, d2, seq[r], ids[r], e_val, o_lo, o_hi, qk, op, q_off,
                                                        q_val, stamp, bound, count, koff, top_d, top_seq, top_oid):
                                out, out_d = _emit(out, out_d, n_out, qid[s], ids[r], seq[r], d2)
                                n_out += 1
            for j in range(o_lo, o_hi):
                t = e_val[j]
                if t < len(head):
                    e = head[t]
                    while e >= 0:
                        checks += 1
                        listed += 1
                        s = link_slot[e]
                        dx = ox - qx[s]
                        dy = oy - qy[s]
                        d2 = dx * dx + dy * dy
                        if d2 < bound[s] and _enter(s, d2, seq[r], ids[r], e_val, o_lo, o_hi, qk, op, q_off,
                                                        q_val, stamp, bound, count, koff, top_d, top_seq, top_oid):
                            out, out_d = _emit(out, out_d, n_out, qid[s], ids[r], seq[r], d2)
                            n_out += 1
                        e = nxt[e]
            work[r] = 1 + checks
    return out[:n_out], out_d[:n_out], n_links, listed
