"""Compiled routing kernels shared by the routers.

Each kernel turns a set of event rows into (row, worker) pairs in one pass into output arrays
that double when full (`_push`); a per-row stamp array removes duplicate workers. (A count-then-
fill double pass measured 3-4x slower: the work is the lookups, not the allocation.)
All cell arithmetic goes through `axis_cell`, the one definition of "which cell holds v", so a
point and every rectangle that contains it always agree on their cells (the routing invariant).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def axis_cell(v, v0, inv_w, n):
    """Cell index of coordinate v on an axis of n cells starting at v0; clamped, monotone in v."""
    c = math.floor((v - v0) * inv_w)
    if c < 0:
        return 0
    if c > n - 1:
        return n - 1
    return int(c)


@njit(cache=True, inline="always")
def lower_bound(a, lo, hi, v):
    """First index in a[lo:hi] (sorted ascending) with a[i] >= v (hi when none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, inline="always")
def upper_bound(a, lo, hi, v):
    """First index in a[lo:hi] (sorted ascending) with a[i] > v (hi when none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def points_to_cells(x, y, x0, y0, inv_cw, inv_ch, nx, ny):
    out = np.empty(len(x), np.int64)
    for i in range(len(x)):
        out[i] = axis_cell(y[i], y0, inv_ch, ny) * nx + axis_cell(x[i], x0, inv_cw, nx)
    return out


@njit(cache=True)
def rects_to_cell_ranges(xmin, ymin, xmax, ymax, x0, y0, inv_cw, inv_ch, nx, ny):
    n = len(xmin)
    out = np.empty((n, 4), np.int64)
    for i in range(n):
        out[i, 0] = axis_cell(xmin[i], x0, inv_cw, nx)
        out[i, 1] = axis_cell(xmax[i], x0, inv_cw, nx)
        out[i, 2] = axis_cell(ymin[i], y0, inv_ch, ny)
        out[i, 3] = axis_cell(ymax[i], y0, inv_ch, ny)
    return out


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
def rect_cells(rows, xmin, ymin, xmax, ymax, x0, y0, inv_cw, inv_ch, nx, ny):
    """(row, cell) for every cell each rectangle overlaps (migration units of grid routers)."""
    total = 0
    for i in range(len(rows)):
        r = rows[i]
        total += (axis_cell(xmax[r], x0, inv_cw, nx) - axis_cell(xmin[r], x0, inv_cw, nx) + 1) * (
            axis_cell(ymax[r], y0, inv_ch, ny) - axis_cell(ymin[r], y0, inv_ch, ny) + 1)
    out_r = np.empty(total, np.int64)
    out_c = np.empty(total, np.int64)
    total = 0
    for i in range(len(rows)):
        r = rows[i]
        ix0 = axis_cell(xmin[r], x0, inv_cw, nx)
        ix1 = axis_cell(xmax[r], x0, inv_cw, nx)
        for iy in range(axis_cell(ymin[r], y0, inv_ch, ny), axis_cell(ymax[r], y0, inv_ch, ny) + 1):
            for ix in range(ix0, ix1 + 1):
                out_r[total] = r
                out_c[total] = iy * nx + ix
                total += 1
    return out_r, out_c


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
def last_terms(rows, offsets, values):
    """The largest term id of each row: its least frequent keyword (ids are frequency ranks)."""
    out = np.empty(len(rows), np.int64)
    for i in range(len(rows)):
        r = rows[i]
        out[i] = values[offsets[r + 1] - 1] if offsets[r + 1] > offsets[r] else -1
    return out


@njit(cache=True)
def greedy_least_loaded(order, loads, totals):
    """Items in `order`, each to the worker of least total so far (ties: lowest id); `totals`
    (one per worker, possibly already loaded) is updated in place. Returns the worker per item."""
    out = np.empty(len(loads), np.int64)
    for k in range(len(order)):
        i = order[k]
        best = 0
        for w in range(1, len(totals)):
            if totals[w] < totals[best]:
                best = w
        out[i] = best
        totals[best] += loads[i]
    return out


@njit(cache=True)
def lpt_onto(loads, totals):
    """Longest-processing-time greedy onto workers that already carry `totals` (updated in place):
    items by load descending, each to the least loaded worker; ties -> lowest id."""
    return greedy_least_loaded(np.argsort(-loads, kind="mergesort"), loads, totals)


@njit(cache=True)
def lpt_assign(loads, n_workers):
    """Longest-processing-time greedy from empty workers; deterministic (ties -> lowest id)."""
    return lpt_onto(loads, np.zeros(n_workers, np.float64))


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
