"""Compiled search and cell kernels of the bottom layer, shared by routers and worker indexes.

All cell arithmetic goes through `axis_cell`, the one definition of "which cell holds v", so a
point and every rectangle that contains it always agree on their cells (the routing invariant).
"""

from __future__ import annotations

import math
import time

import numpy as np
from numba import njit, types


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
def last_terms(rows, offsets, values):
    """The largest term id of each row: its least frequent keyword (ids are frequency ranks)."""
    out = np.empty(len(rows), np.int64)
    for i in range(len(rows)):
        r = rows[i]
        out[i] = values[offsets[r + 1] - 1] if offsets[r + 1] > offsets[r] else -1
    return out


@njit(cache=True)
def csr_gather(offsets, values, rows):
    """Rows of a CSR array as a new one (offsets, values), in one pass where numpy needs a
    repeat, an arange and a gather of the values' length (a worker task takes every unit's events
    this way)."""
    new_offsets = np.empty(len(rows) + 1, np.int64)
    new_offsets[0] = 0
    for i in range(len(rows)):
        new_offsets[i + 1] = new_offsets[i] + offsets[rows[i] + 1] - offsets[rows[i]]
    out = np.empty(new_offsets[-1], values.dtype)
    for i in range(len(rows)):
        src = offsets[rows[i]] - new_offsets[i]
        for j in range(new_offsets[i], new_offsets[i + 1]):
            out[j] = values[src + j]
    return new_offsets, out


# clock_gettime through its C symbol, resolved by name when a kernel is linked (a ctypes pointer
# would be an address baked into numba's on-disk cache, stale in the next process)
_clock_gettime = types.ExternalFunction("clock_gettime", types.int32(types.int32, types.CPointer(types.int64)))
CLOCK_MONOTONIC = time.CLOCK_MONOTONIC  # the platform's id (1 on Linux, 6 on macOS)


@njit(cache=True)
def monotonic_ns(buf: np.ndarray) -> int:
    """Nanoseconds of the monotonic clock (about 20 ns a call, no system call), for timing phases
    inside a compiled loop; `buf` is two int64 of scratch."""
    _clock_gettime(CLOCK_MONOTONIC, buf.ctypes)
    return buf[0] * 1_000_000_000 + buf[1]
