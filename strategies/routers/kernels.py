"""Compiled routing kernels shared by the router shapes.

Each kernel turns a set of event rows into (row, worker) pairs in one pass into output arrays
that double when full (`_push`); a per-row stamp array removes duplicate workers. (A count-then-
fill double pass measured 3-4x slower: the work is the lookups, not the allocation.)
Cell arithmetic comes from `harness.core.kernels.axis_cell`, so points and rectangles agree.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.kernels import axis_cell


@njit(cache=True)
def route_points_cellmap(rows, x, y, x0, y0, inv_cw, inv_ch, nx, ny, cell_worker):
    """Each point to the worker owning its cell."""
    out = np.empty(len(rows), np.int64)
    for i in range(len(rows)):
        r = rows[i]
        out[i] = cell_worker[axis_cell(y[r], y0, inv_ch, ny) * nx + axis_cell(x[r], x0, inv_cw, nx)]
    return out


@njit(cache=True)
def _grow(out_r, out_w):
    bigger_r = np.empty(max(2 * len(out_r), 16), np.int64)
    bigger_w = np.empty(len(bigger_r), np.int64)
    bigger_r[: len(out_r)] = out_r
    bigger_w[: len(out_w)] = out_w
    return bigger_r, bigger_w


@njit(cache=True, inline="always")
def _push(i, r, w, stamp, out_r, out_w, total):
    """Append the pair (r, w) unless row i (the i-th routed row) already has worker w."""
    if stamp[w] != i:
        stamp[w] = i
        if total == len(out_r):
            out_r, out_w = _grow(out_r, out_w)
        out_r[total] = r
        out_w[total] = w
        total += 1
    return out_r, out_w, total


@njit(cache=True)
def _pair_buffers(n_rows, n_workers):
    """Output arrays sized for about two pairs per row, and the stamp array (no row seen yet)."""
    cap = max(2 * n_rows, 16)
    return np.empty(cap, np.int64), np.empty(cap, np.int64), np.full(n_workers, -1, np.int64)


@njit(cache=True)
def route_rects_cellmap(rows, xmin, ymin, xmax, ymax, x0, y0, inv_cw, inv_ch, nx, ny, cell_worker, n_workers):
    """Each rectangle to the distinct workers owning the cells it overlaps."""
    bound = 0  # a rectangle yields at most min(its cells, workers) pairs
    for i in range(len(rows)):
        r = rows[i]
        cells = (axis_cell(xmax[r], x0, inv_cw, nx) - axis_cell(xmin[r], x0, inv_cw, nx) + 1) * (
            axis_cell(ymax[r], y0, inv_ch, ny) - axis_cell(ymin[r], y0, inv_ch, ny) + 1)
        bound += min(cells, n_workers)
    out_r = np.empty(bound, np.int64)
    out_w = np.empty(bound, np.int64)
    stamp = np.full(n_workers, -1, np.int64)
    total = 0
    for i in range(len(rows)):
        r = rows[i]
        ix0 = axis_cell(xmin[r], x0, inv_cw, nx)
        ix1 = axis_cell(xmax[r], x0, inv_cw, nx)
        iy0 = axis_cell(ymin[r], y0, inv_ch, ny)
        iy1 = axis_cell(ymax[r], y0, inv_ch, ny)
        for iy in range(iy0, iy1 + 1):
            base = iy * nx
            for ix in range(ix0, ix1 + 1):
                w = cell_worker[base + ix]
                if stamp[w] != i:
                    stamp[w] = i
                    out_r[total] = r
                    out_w[total] = w
                    total += 1
    return out_r[:total], out_w[:total]


@njit(cache=True)
def route_term_sets(rows, offsets, values, term_worker, n_workers):
    """Each row to the distinct workers owning any of its terms (object multicast, OR queries)."""
    bound = 0  # a row yields at most min(its terms, workers) pairs: allocate once, fill once
    for i in range(len(rows)):
        bound += min(offsets[rows[i] + 1] - offsets[rows[i]], n_workers)
    out_r = np.empty(bound + 1, np.int64)  # + 1: the last discarded write below
    out_w = np.empty(bound + 1, np.int64)
    stamp = np.full(n_workers, -1, np.int64)
    total = 0
    for i in range(len(rows)):
        r = rows[i]
        for j in range(offsets[r], offsets[r + 1]):
            w = term_worker[values[j]]
            # branch-free duplicate stamp: always write, advance only for a new worker (a row's
            # terms repeat workers unpredictably; the branch measured about 20% slower)
            out_r[total] = r
            out_w[total] = w
            total += stamp[w] != i
            stamp[w] = i
    return out_r[:total], out_w[:total]


@njit(cache=True)
def route_live_term_sets(rows, seq, offsets, values, term_worker, term_seq, every_seq, n_workers):
    """Each object to the distinct workers of those of its terms that routed a subscription before
    it (term_seq[t] < its seq: PS2Stream's H2, l.197), or of all its terms when it comes after
    every_seq (a subscription routed to every worker lives: route_term_sets). An object none of
    whose terms qualifies goes nowhere."""
    bound = 0
    for i in range(len(rows)):
        bound += min(offsets[rows[i] + 1] - offsets[rows[i]], n_workers)
    out_r = np.empty(bound + 1, np.int64)  # + 1: the last discarded write below
    out_w = np.empty(bound + 1, np.int64)
    stamp = np.full(n_workers, -1, np.int64)
    total = 0
    for i in range(len(rows)):
        r = rows[i]
        s = seq[r]
        every = s > every_seq
        for j in range(offsets[r], offsets[r + 1]):
            t = values[j]
            if every or term_seq[t] < s:
                w = term_worker[t]
                out_r[total] = r  # branch-free duplicate stamp, as route_term_sets
                out_w[total] = w
                total += stamp[w] != i
                stamp[w] = i
    return out_r[:total], out_w[:total]


@njit(cache=True)
def kd_descend(rows, x, y, split_dim, split_val, left, right, leaf_worker):
    """Each point down a kd-tree: left when its coordinate is < the split value."""
    out = np.empty(len(rows), np.int64)
    for i in range(len(rows)):
        r = rows[i]
        node = 0
        while split_dim[node] >= 0:
            v = x[r] if split_dim[node] == 0 else y[r]
            node = left[node] if v < split_val[node] else right[node]
        out[i] = leaf_worker[node]
    return out


@njit(cache=True)
def kd_route_rects(rows, xmin, ymin, xmax, ymax, split_dim, split_val, left, right, leaf_worker, n_workers):
    """Each rectangle to the distinct workers of the kd-tree leaves it overlaps (depth-first)."""
    out_r, out_w, stamp = _pair_buffers(len(rows), n_workers)
    stack = np.empty(256, np.int64)
    total = 0
    for i in range(len(rows)):
        r = rows[i]
        stack[0] = 0
        top = 1
        while top > 0:
            top -= 1
            node = stack[top]
            d = split_dim[node]
            if d < 0:
                out_r, out_w, total = _push(i, r, leaf_worker[node], stamp, out_r, out_w, total)
                continue
            lo = xmin[r] if d == 0 else ymin[r]
            hi = xmax[r] if d == 0 else ymax[r]
            if lo < split_val[node]:
                stack[top] = left[node]
                top += 1
            if hi >= split_val[node]:
                stack[top] = right[node]
                top += 1
    return out_r[:total].copy(), out_w[:total].copy()
