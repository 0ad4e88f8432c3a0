"""R-tree partitioning, PS2Stream's third space baseline (Sec. VI-B, after SpatialHadoop): "constructs
a R-tree to do the partitioning, and then partitions the set of leaf nodes".

The R-tree is bulk-loaded by Sort-Tile-Recursive (STR) packing on the sample's points (objects and
query locations): sorted by x into S vertical slices of S * c points, each slice sorted by y into
leaves of c points, with about `leaves_per_worker` * m leaves in all. STR leaves leave gaps (and
points outside the sample would have no leaf), so each leaf is extended to a tile: slices meet at
the midpoint between their neighbouring x values, leaves of a slice at the midpoint between their
neighbouring y values, and the outer tiles reach to infinity. The tiles are half-open ([lo, hi)),
cover the plane and never overlap, so every object has exactly one leaf. Leaves are grouped into
workers by LPT on the sample load n_o * n_q + n_o + n_q (objects inside, queries overlapping;
strategies/load.py). Routing walks STR's two levels (slice by x, then leaf by y) with binary
searches: an object to its leaf's worker, a query to the workers of every leaf its rectangle
overlaps. Decisions (variant, fan-out, leaf grouping, uncovered space) are in docs/decisions.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from harness.core.events import Events
from harness.core import allocate
from harness.core import kernels
from harness.core.kernels import upper_bound
from strategies.base import FitContext, Pairs, Router, Strategy
from strategies.dkmsks.cost import locations
from strategies.load import sample_parts, unit_load


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


def str_tiles(px: np.ndarray, py: np.ndarray, n_leaves: int):
    """STR packing of the points into about n_leaves leaves, extended to a tiling of the plane.
    Returns xcuts (S-1), ycuts (CSR by slice, per slice its leaves - 1 cuts), ycut_off, leaf_start."""
    n = len(px)
    if n == 0:
        return np.zeros(0), np.zeros(0), np.zeros(2, np.int64), np.array([0, 1], np.int64)
    cap = int(np.ceil(n / max(n_leaves, 1)))
    n_slices = int(np.ceil(np.sqrt(np.ceil(n / cap))))
    per_slice = n_slices * cap
    by_x = np.lexsort((py, px))
    slice_of = np.empty(n, np.int64)
    slice_of[by_x] = np.arange(n) // per_slice
    n_slices = int(slice_of.max()) + 1
    xs = px[by_x]
    bound = np.arange(1, n_slices) * per_slice  # first sorted position of slices 1..S-1
    xcuts = (xs[bound - 1] + xs[bound]) / 2.0
    # within each slice: by y, leaves of cap points, cuts at the midpoint between neighbours
    order = np.lexsort((px, py, slice_of))
    s_sorted = slice_of[order]
    ys = py[order]
    first = np.searchsorted(s_sorted, np.arange(n_slices))
    rank = np.arange(n) - first[s_sorted]
    starts_leaf = (rank % cap == 0) & (rank > 0)  # first point of each leaf but the slice's first
    pos = np.flatnonzero(starts_leaf)
    ycuts = (ys[pos - 1] + ys[pos]) / 2.0
    cuts_per_slice = np.bincount(s_sorted[pos], minlength=n_slices)
    ycut_off = np.zeros(n_slices + 1, np.int64)
    np.cumsum(cuts_per_slice, out=ycut_off[1:])
    leaf_start = np.zeros(n_slices + 1, np.int64)
    np.cumsum(cuts_per_slice + 1, out=leaf_start[1:])
    return xcuts, ycuts, ycut_off, leaf_start


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
    families = frozenset({"range"})

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


class RTreeStrategy(Strategy):
    name = "rtree"
    families = frozenset({"range"})

    @dataclass
    class Params:
        leaves_per_worker: int = 16  # STR leaves (partition units) per worker

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        objs, qs = sample_parts(sample)
        qx, qy = locations(sample, qs)
        px = np.concatenate([sample.x[objs], qx]).astype(np.float64)
        py = np.concatenate([sample.y[objs], qy]).astype(np.float64)
        ok = np.isfinite(px) & np.isfinite(py)
        tiles = str_tiles(px[ok], py[ok], params.leaves_per_worker * n_workers)
        n_leaves = int(tiles[3][-1])
        ident = np.arange(n_leaves, dtype=np.int64)
        n_o = np.bincount(route_points_str(objs, sample.x, sample.y, *tiles, ident), minlength=n_leaves)
        _, q_leaf = route_rects_str(qs, sample.xmin, sample.ymin, sample.xmax, sample.ymax, *tiles, ident, n_leaves)
        n_q = np.bincount(q_leaf, minlength=n_leaves)
        load = unit_load(n_o, n_q)
        return RTreeRouter(n_workers, *tiles, allocate.lpt_assign(load, n_workers), load, context.extent)
