"""The kNN worker's postings: where an object looks up the subscriptions it may enter.

A subscription with a finite ball (its local A(s) full, or a global bound fed back) is posted in
every grid cell its ball's bounding square overlaps (`ball_postings`; SOP: in its subset,
`subset_postings`), under every keyword (OR) or its least frequent keyword (AND, the one conjunct),
keyed cell x vocab + term. The others are linked under those keywords in per-term lists that every
object holding the term probes (`link_terms`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.events import AND
from harness.core.kernels import axis_cell


@njit(cache=True)
def ball_postings(slots, x, y, r2, op, offsets, values, x0, y0, icw, ich, nx, ny, vocab):
    """(key, slot) postings of subscriptions with a finite ball: key = cell * vocab + term."""
    total = 0
    for s in slots:
        r = np.sqrt(r2[s])
        n = (axis_cell(x[s] + r, x0, icw, nx) - axis_cell(x[s] - r, x0, icw, nx) + 1) * (
            axis_cell(y[s] + r, y0, ich, ny) - axis_cell(y[s] - r, y0, ich, ny) + 1)
        total += n * (1 if op[s] == AND else offsets[s + 1] - offsets[s])
    keys = np.empty(total, np.int64)
    post = np.empty(total, np.int64)
    k = 0
    for s in slots:
        r = np.sqrt(r2[s])
        t_lo = offsets[s + 1] - 1 if op[s] == AND else offsets[s]
        for iy in range(axis_cell(y[s] - r, y0, ich, ny), axis_cell(y[s] + r, y0, ich, ny) + 1):
            for ix in range(axis_cell(x[s] - r, x0, icw, nx), axis_cell(x[s] + r, x0, icw, nx) + 1):
                for j in range(t_lo, offsets[s + 1]):
                    keys[k] = (iy * nx + ix) * vocab + values[j]
                    post[k] = s
                    k += 1
    order = np.argsort(keys, kind="mergesort")
    return keys[order], post[order]


@njit(cache=True)
def subset_postings(slots, subset, op, offsets, values, vocab):
    """(key, slot) postings of bounded balls in SOP subsets: key = subset * vocab + term."""
    total = 0
    for s in slots:
        total += 1 if op[s] == AND else offsets[s + 1] - offsets[s]
    keys = np.empty(total, np.int64)
    post = np.empty(total, np.int64)
    k = 0
    for i in range(len(slots)):
        s = slots[i]
        t_lo = offsets[s + 1] - 1 if op[s] == AND else offsets[s]
        for j in range(t_lo, offsets[s + 1]):
            keys[k] = subset[i] * vocab + values[j]
            post[k] = s
            k += 1
    order = np.argsort(keys, kind="mergesort")
    return keys[order], post[order]


@njit(cache=True)
def link_terms(slots, op, offsets, values, head, nxt, slot_of, n_links):
    """Post subscriptions under their terms in the per-term linked lists; returns the new count."""
    for s in slots:
        t_lo = offsets[s + 1] - 1 if op[s] == AND else offsets[s]
        if n_links + offsets[s + 1] - t_lo > len(nxt):
            raise IndexError("kNN index: per-term links beyond their reserved capacity")
        for j in range(t_lo, offsets[s + 1]):
            t = values[j]
            slot_of[n_links] = s
            nxt[n_links] = head[t]
            head[t] = n_links
            n_links += 1
    return n_links
