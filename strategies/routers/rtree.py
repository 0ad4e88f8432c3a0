"""The STR R-tree router: two-level tiles (vertical slices by x, leaves by y within a slice).

The tiles are half-open ([lo, hi)), cover the plane and never overlap, so every object has exactly
one leaf. Routing walks the two levels with binary searches (sped up by per-axis bin tables for
points): an object to its leaf's worker, a query to the workers of every leaf its rectangle
overlaps. Leaves are the movable units (`leaf_worker`), so adjusters can regroup them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core import kernels
from harness.core.events import Events
from harness.core.kernels import upper_bound
from strategies.base import Pairs, Router


@njit(cache=True, inline="always")
def _upper(a, lo, hi, v):
    """Number of a[lo:hi] <= v (a sorted): searchsorted side='right', without building a view."""
    return upper_bound(a, lo, hi, v) - lo


@njit(cache=True, inline="always")
def _leaf_of(x, y, xcuts, ycuts, ycut_off, leaf_start):
    s = _upper(xcuts, 0, len(xcuts), x)
    return leaf_start[s] + _upper(ycuts, ycut_off[s], ycut_off[s + 1], y)


@njit(cache=True)
def route_points_str(rows, x, y, xcuts, ycuts, ycut_off, leaf_start, leaf_worker):
    out = np.empty(len(rows), np.int64)
    for i in range(len(rows)):
        r = rows[i]
        out[i] = leaf_worker[_leaf_of(x[r], y[r], xcuts, ycuts, ycut_off, leaf_start)]
    return out


@njit(cache=True)
def route_points_tables(rows, x, y, xcuts, ycuts, ycut_off, leaf_start, tx, ty, x0, icw, y0, ich, leaf_worker):
    """route_points_str sped up by per-axis bin tables: a bin that no cut crosses names its slice
    (or its leaf within the slice) directly; only points in a crossed bin binary-search."""
    bx = len(tx)
    by = len(ty) // max(len(leaf_start) - 1, 1)
    out = np.empty(len(rows), np.int64)
    for i in range(len(rows)):
        r = rows[i]
        s = tx[kernels.axis_cell(x[r], x0, icw, bx)]
        if s < 0:
            s = _upper(xcuts, 0, len(xcuts), x[r])
        j = ty[s * by + kernels.axis_cell(y[r], y0, ich, by)]
        if j < 0:
            j = _upper(ycuts, ycut_off[s], ycut_off[s + 1], y[r])
        out[i] = leaf_worker[leaf_start[s] + j]
    return out


def bin_tables(xcuts, ycuts, ycut_off, extent, bx: int = 4096, by: int = 1024):
    """Per-axis lookup tables over the extent: tx[bin] = the slice every x of that bin falls in, or
    -1 when a cut crosses the bin; ty[s * by + bin] = likewise the leaf row within slice s. Bins are
    widened by a relative epsilon (and the outer bins reach infinity, as axis_cell clamps), so a
    table hit always equals the binary search."""
    x0, y0, x1, y1 = (float(v) for v in extent)
    icw, ich = bx / max(x1 - x0, 1e-9), by / max(y1 - y0, 1e-9)

    def table(cuts, v0, inv, n):
        eps = 1e-9 * max(1.0, abs(v0), abs(v0 + n / inv), n / inv)
        lo = v0 + np.arange(n) / inv - eps
        hi = v0 + (np.arange(n) + 1) / inv + eps
        lo[0], hi[-1] = -np.inf, np.inf
        a = np.searchsorted(cuts, lo, side="right")
        b = np.searchsorted(cuts, hi, side="right")
        return np.where(a == b, a, -1).astype(np.int32)

    tx = table(np.asarray(xcuts), x0, icw, bx)
    n_slices = len(ycut_off) - 1
    ty = np.concatenate([table(ycuts[ycut_off[s]:ycut_off[s + 1]], y0, ich, by) for s in range(n_slices)])
    return tx, ty, x0, icw, y0, ich


@njit(cache=True)
def route_rects_str(rows, xmin, ymin, xmax, ymax, xcuts, ycuts, ycut_off, leaf_start, leaf_worker, n_out):
    """Each rectangle to the distinct values leaf_worker[leaf] over the tiles it overlaps (pass
    leaf_worker = arange(n_leaves) and n_out = n_leaves to list the leaves themselves)."""
    stamp = np.full(n_out, -1, np.int64)
    out_r = np.empty(0, np.int64)
    out_w = np.empty(0, np.int64)
    total = 0
    for p in range(2):
        if p == 1:
            out_r = np.empty(total, np.int64)
            out_w = np.empty(total, np.int64)
            stamp[:] = -1
            total = 0
        for i in range(len(rows)):
            r = rows[i]
            s0 = _upper(xcuts, 0, len(xcuts), xmin[r])
            s1 = _upper(xcuts, 0, len(xcuts), xmax[r])
            for s in range(s0, s1 + 1):
                j0 = _upper(ycuts, ycut_off[s], ycut_off[s + 1], ymin[r])
                j1 = _upper(ycuts, ycut_off[s], ycut_off[s + 1], ymax[r])
                for j in range(j0, j1 + 1):
                    w = leaf_worker[leaf_start[s] + j]
                    if stamp[w] != i:  # written out: a numba-inlined helper measured 2x slower
                        stamp[w] = i
                        if p == 1:
                            out_r[total] = r
                            out_w[total] = w
                        total += 1
    return out_r, out_w


def tile_regions(xcuts, ycuts, ycut_off, leaf_start) -> np.ndarray:
    """(n_leaves, 4) half-open tiles [xmin, xmax) x [ymin, ymax), outer sides infinite."""
    xb = np.concatenate([[-np.inf], xcuts, [np.inf]])
    out = []
    for s in range(len(leaf_start) - 1):
        yb = np.concatenate([[-np.inf], ycuts[ycut_off[s]:ycut_off[s + 1]], [np.inf]])
        for j in range(leaf_start[s + 1] - leaf_start[s]):
            out.append((xb[s], yb[j], xb[s + 1], yb[j + 1]))
    return np.array(out, np.float64).reshape(-1, 4)


class RTreeRouter(Router):
    def __init__(self, n_workers, xcuts, ycuts, ycut_off, leaf_start, leaf_worker, leaf_load, extent):
        super().__init__(n_workers)
        self.xcuts = np.ascontiguousarray(xcuts, np.float64)
        self.ycuts = np.ascontiguousarray(ycuts, np.float64)
        self.ycut_off = np.ascontiguousarray(ycut_off, np.int64)
        self.leaf_start = np.ascontiguousarray(leaf_start, np.int64)
        self.leaf_worker = np.ascontiguousarray(leaf_worker, np.int64)  # the movable unit -> worker map
        self.leaf_load = np.asarray(leaf_load, np.float64)
        self.extent = tuple(float(v) for v in extent)
        self.tx, self.ty, *self.bins = bin_tables(self.xcuts, self.ycuts, self.ycut_off, self.extent)

    def _tiles(self):
        return self.xcuts, self.ycuts, self.ycut_off, self.leaf_start

    def leaves_of_points(self, x, y) -> np.ndarray:
        rows = np.arange(len(x), dtype=np.int64)
        ident = np.arange(len(self.leaf_worker), dtype=np.int64)
        return route_points_tables(rows, np.asarray(x, np.float64), np.asarray(y, np.float64), *self._tiles(),
                                   self.tx, self.ty, *self.bins, ident)

    def route_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        return rows, route_points_tables(rows, ev.x, ev.y, *self._tiles(), self.tx, self.ty, *self.bins,
                                         self.leaf_worker)

    def route_range(self, ev: Events, rows: np.ndarray) -> Pairs:
        return route_rects_str(rows, ev.xmin, ev.ymin, ev.xmax, ev.ymax, *self._tiles(), self.leaf_worker,
                               self.n_workers)

    def route_frequent_terms(self, ev: Events, rows: np.ndarray) -> Pairs:
        """A top-k-terms query to the workers of every cell its rectangle overlaps (no keywords)."""
        return self.route_range(ev, rows)

    def regions(self) -> np.ndarray:
        return tile_regions(*self._tiles())

    def describe(self) -> dict:
        ex = self.extent
        reg = self.regions()
        reg[:, 0] = np.clip(reg[:, 0], ex[0], ex[2])
        reg[:, 2] = np.clip(reg[:, 2], ex[0], ex[2])
        reg[:, 1] = np.clip(reg[:, 1], ex[1], ex[3])
        reg[:, 3] = np.clip(reg[:, 3], ex[1], ex[3])
        return {
            **super().describe(),
            "slices": int(len(self.leaf_start) - 1),
            "leaves": [{"worker": int(w), "region": r.tolist(), "load": float(ld)}
                       for w, r, ld in zip(self.leaf_worker, reg, self.leaf_load)],
        }
