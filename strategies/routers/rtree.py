"""The R-tree router: STR leaves extended to tiles, indexed by a hierarchical R-tree.

The partitions (leaves) are STR tiles (strategies/ps2stream/rtree.py): half-open ([lo, hi)), they
cover the plane and never overlap, so every object has exactly one leaf. Routing goes through a
standard R-tree over the tiles' rectangles (Guttman's search, as Tornado's Fig. 9 "Standard
R-tree" routing index, tornado.txt l.370): nodes of at most `node_capacity` entries (16 by
default), packed bottom-up by Sort-Tile-Recursive on the entries' centres; a search descends every
child whose rectangle holds the point (overlaps the query rectangle). Node rectangles are the
unions of their children's and do overlap (neighbouring slices' tiles are cut at different y), so
a point can descend several paths: the routing cost grows with the number of partitions, as the
paper's R-tree routing time does. Each search counts its probes (nodes visited, entry rectangles
tested): `RTreeRouter.probe_stats`.

The old routing, two binary searches over STR's slice/leaf cuts (sped up by per-axis bin tables),
stays as the variant `routing: tiles` (same leaves, same copies, no hierarchy). Leaves are the
movable units (`leaf_worker`), so adjusters can regroup them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core import kernels
from harness.core.events import OBJECT, Events
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


# ---------------------------------------------------------------- the R-tree over the tiles

NODE_CAPACITY = 16  # entries per node; the paper gives none (tornado.txt l.370): ADR-0092
ROUTINGS = ("rtree", "tiles")


def _str_groups(cx: np.ndarray, cy: np.ndarray, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """STR packing of n entries (centres cx, cy) into nodes of at most `capacity`: sorted by x into
    ceil(sqrt(P)) slices of ceil(sqrt(P)) * capacity entries (P = ceil(n / capacity) nodes), each
    slice sorted by y and cut into runs of `capacity`. Returns the entries' order and the start of
    each node's run in that order (plus n at the end)."""
    n = len(cx)
    n_nodes = -(-n // capacity)
    per_slice = int(np.ceil(np.sqrt(n_nodes))) * capacity
    by_x = np.lexsort((cy, cx))
    slice_of = np.empty(n, np.int64)
    slice_of[by_x] = np.arange(n) // per_slice
    order = np.lexsort((cx, cy, slice_of))
    s_sorted = slice_of[order]
    first = np.searchsorted(s_sorted, np.arange(s_sorted[-1] + 1))
    rank = np.arange(n) - first[s_sorted]
    starts = np.flatnonzero(rank % capacity == 0)
    return order, np.append(starts, n).astype(np.int64)


def _centres(mbr: np.ndarray, extent) -> tuple[np.ndarray, np.ndarray]:
    """Centres of rectangles clipped to the extent (the outer tiles reach infinity)."""
    x0, y0, x1, y1 = extent
    cx = (np.clip(mbr[:, 0], x0, x1) + np.clip(mbr[:, 2], x0, x1)) / 2.0
    cy = (np.clip(mbr[:, 1], y0, y1) + np.clip(mbr[:, 3], y0, y1)) / 2.0
    return cx, cy


def build_rtree(leaf_mbr: np.ndarray, extent, capacity: int = NODE_CAPACITY) -> dict[str, np.ndarray]:
    """A static R-tree over the leaves' rectangles (n, 4: xmin, ymin, xmax, ymax), bulk-loaded
    bottom-up by STR: the leaves are packed into leaf nodes, those nodes into parents, and so on up
    to one root. Node rectangles are their children's union.

    Flat layout, nodes numbered from the root (0) level by level: node k's children are
    child_lo[k]..child_hi[k], node ids when k < n_internal, else positions in the entry arrays
    (entry_mbr, entry_leaf: the leaf index of each entry)."""
    capacity = int(capacity)
    if capacity < 2:
        raise ValueError(f"rtree node_capacity={capacity}: a node must hold at least 2 entries")
    extent = tuple(float(v) for v in extent)
    leaf_mbr = np.asarray(leaf_mbr, np.float64).reshape(-1, 4)
    items = leaf_mbr
    ids = np.arange(len(leaf_mbr), dtype=np.int64)  # the current level's items, as leaf ids at the bottom
    levels = []  # bottom-up: (mbr, child_lo, child_hi) of each level's nodes, in the level's final order
    entry_leaf = None
    while True:
        cx, cy = _centres(items, extent)
        order, starts = _str_groups(cx, cy, capacity)
        items, ids = items[order], ids[order]
        if entry_leaf is None:
            entry_leaf, entry_mbr = ids, items
        elif levels:  # the level below is now in `order`: its nodes keep their child ranges
            levels[-1] = tuple(a[order] for a in levels[-1])
        lo, hi = starts[:-1], starts[1:]
        mbr = np.column_stack([np.minimum.reduceat(items[:, 0], lo), np.minimum.reduceat(items[:, 1], lo),
                               np.maximum.reduceat(items[:, 2], lo), np.maximum.reduceat(items[:, 3], lo)])
        levels.append((mbr, lo, hi))
        if len(lo) == 1:
            break
        items, ids = mbr, np.arange(len(lo), dtype=np.int64)
    levels.reverse()  # root first
    base = np.cumsum([0] + [len(lv[1]) for lv in levels])
    child_lo = np.concatenate([lv[1] + (base[d + 1] if d + 1 < len(levels) else 0) for d, lv in enumerate(levels)])
    child_hi = np.concatenate([lv[2] + (base[d + 1] if d + 1 < len(levels) else 0) for d, lv in enumerate(levels)])
    return {
        "node_mbr": np.ascontiguousarray(np.concatenate([lv[0] for lv in levels]), np.float64),
        "child_lo": child_lo.astype(np.int64), "child_hi": child_hi.astype(np.int64),
        "n_internal": np.int64(base[-2]),  # every node above the leaf-node level
        "entry_mbr": np.ascontiguousarray(entry_mbr, np.float64), "entry_leaf": entry_leaf.astype(np.int64),
        "height": np.int64(len(levels)),
    }


@njit(cache=True)
def route_points_rtree(rows, x, y, node_mbr, child_lo, child_hi, n_internal, entry_mbr, entry_leaf,
                       xcuts, ycuts, ycut_off, leaf_start, leaf_worker):
    """Each point down the R-tree (Guttman's search: every child whose closed rectangle holds it,
    the half-open tile test at the entries) to its leaf's worker. Returns the workers and, per row,
    the nodes visited and the entry rectangles tested. The tiles do not overlap, so one entry
    holds a finite point; a point no tile holds (a NaN coordinate) takes the cuts' leaf, as the
    `tiles` routing gives it."""
    n = len(rows)
    out = np.empty(n, np.int64)
    visits = np.zeros(n, np.int32)
    tests = np.zeros(n, np.int32)
    stack = np.empty(len(child_lo) + 1, np.int64)
    for i in range(n):
        r = rows[i]
        px = x[r]
        py = y[r]
        leaf = -1
        nv = 0
        nt = 0
        stack[0] = 0
        top = 1
        while top > 0:
            top -= 1
            k = stack[top]
            nv += 1
            nt += child_hi[k] - child_lo[k]
            if k < n_internal:
                for c in range(child_lo[k], child_hi[k]):
                    if node_mbr[c, 0] <= px and px <= node_mbr[c, 2] and node_mbr[c, 1] <= py and py <= node_mbr[c, 3]:
                        stack[top] = c
                        top += 1
            else:
                for e in range(child_lo[k], child_hi[k]):
                    if entry_mbr[e, 0] <= px and px < entry_mbr[e, 2] and entry_mbr[e, 1] <= py and py < entry_mbr[e, 3]:
                        leaf = entry_leaf[e]
        if leaf < 0:
            leaf = _leaf_of(px, py, xcuts, ycuts, ycut_off, leaf_start)
        out[i] = leaf_worker[leaf]
        visits[i] = nv
        tests[i] = nt
    return out, visits, tests


@njit(cache=True)
def route_rects_rtree(rows, xmin, ymin, xmax, ymax, node_mbr, child_lo, child_hi, n_internal, entry_mbr,
                      entry_leaf, xcuts, ycuts, ycut_off, leaf_start, leaf_worker, n_out):
    """Each closed rectangle down the R-tree (every child whose rectangle it overlaps) to the
    distinct values leaf_worker[leaf] of the tiles it overlaps (leaf_worker = arange(n_leaves),
    n_out = n_leaves lists the leaves). Returns (rows, values, per-row nodes visited, per-row entry
    rectangles tested). A rectangle no tile meets (NaN sides) takes the cuts' walk, as `tiles`.
    Two passes, as route_rects_str: count, then fill (the probes are counted in the first)."""
    n = len(rows)
    visits = np.zeros(n, np.int32)
    tests = np.zeros(n, np.int32)
    stack = np.empty(len(child_lo) + 1, np.int64)
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
        for i in range(n):
            r = rows[i]
            a0 = xmin[r]
            b0 = ymin[r]
            a1 = xmax[r]
            b1 = ymax[r]
            before = total
            nv = 0
            nt = 0
            stack[0] = 0
            top = 1
            while top > 0:
                top -= 1
                k = stack[top]
                nv += 1
                nt += child_hi[k] - child_lo[k]
                if k < n_internal:
                    for c in range(child_lo[k], child_hi[k]):
                        if node_mbr[c, 0] <= a1 and a0 <= node_mbr[c, 2] and node_mbr[c, 1] <= b1 and b0 <= node_mbr[c, 3]:
                            stack[top] = c
                            top += 1
                else:
                    for e in range(child_lo[k], child_hi[k]):
                        if entry_mbr[e, 0] <= a1 and a0 < entry_mbr[e, 2] and entry_mbr[e, 1] <= b1 and b0 < entry_mbr[e, 3]:
                            w = leaf_worker[entry_leaf[e]]
                            if stamp[w] != i:
                                stamp[w] = i
                                if p == 1:
                                    out_r[total] = r
                                    out_w[total] = w
                                total += 1
            if total == before:
                s0 = _upper(xcuts, 0, len(xcuts), a0)
                s1 = _upper(xcuts, 0, len(xcuts), a1)
                for s in range(s0, s1 + 1):
                    j0 = _upper(ycuts, ycut_off[s], ycut_off[s + 1], b0)
                    j1 = _upper(ycuts, ycut_off[s], ycut_off[s + 1], b1)
                    for j in range(j0, j1 + 1):
                        w = leaf_worker[leaf_start[s] + j]
                        if stamp[w] != i:
                            stamp[w] = i
                            if p == 1:
                                out_r[total] = r
                                out_w[total] = w
                            total += 1
            if p == 0:
                visits[i] = nv
                tests[i] = nt
    return out_r, out_w, visits, tests


def _mean(a) -> float:
    return float(np.mean(a)) if len(a) else float("nan")


class RTreeRouter(Router):
    """Routes through the R-tree over the STR tiles (`routing="rtree"`, the paper's) or, as the
    variant `routing="tiles"`, by binary searches over the tiles' cuts; both give the same copies."""

    def __init__(self, n_workers, xcuts, ycuts, ycut_off, leaf_start, leaf_worker, leaf_load, extent,
                 routing: str = "rtree", node_capacity: int = NODE_CAPACITY):
        super().__init__(n_workers)
        if routing not in ROUTINGS:
            raise ValueError(f"rtree routing={routing!r}: allowed values are {list(ROUTINGS)}")
        self.routing = routing
        self.node_capacity = int(node_capacity)
        self.xcuts = np.ascontiguousarray(xcuts, np.float64)
        self.ycuts = np.ascontiguousarray(ycuts, np.float64)
        self.ycut_off = np.ascontiguousarray(ycut_off, np.int64)
        self.leaf_start = np.ascontiguousarray(leaf_start, np.int64)
        self.leaf_worker = np.ascontiguousarray(leaf_worker, np.int64)  # the movable unit -> worker map
        self.leaf_load = np.asarray(leaf_load, np.float64)
        self.extent = tuple(float(v) for v in extent)
        self.tree = build_rtree(tile_regions(*self._tiles()), self.extent, self.node_capacity)
        if routing == "tiles":
            self.tx, self.ty, *self.bins = bin_tables(self.xcuts, self.ycuts, self.ycut_off, self.extent)
        self.sample_probes: dict | None = None  # probe_stats on the fit sample (strategy fit sets it)

    def _tiles(self):
        return self.xcuts, self.ycuts, self.ycut_off, self.leaf_start

    def _tree(self):
        t = self.tree
        return (t["node_mbr"], t["child_lo"], t["child_hi"], t["n_internal"], t["entry_mbr"], t["entry_leaf"])

    def leaves_of_points(self, x, y) -> np.ndarray:
        rows = np.arange(len(x), dtype=np.int64)
        ident = np.arange(len(self.leaf_worker), dtype=np.int64)
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        if self.routing == "tiles":
            return route_points_tables(rows, x, y, *self._tiles(), self.tx, self.ty, *self.bins, ident)
        return route_points_rtree(rows, x, y, *self._tree(), *self._tiles(), ident)[0]

    def route_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        if self.routing == "tiles":
            return rows, route_points_tables(rows, ev.x, ev.y, *self._tiles(), self.tx, self.ty, *self.bins,
                                             self.leaf_worker)
        return rows, route_points_rtree(rows, ev.x, ev.y, *self._tree(), *self._tiles(), self.leaf_worker)[0]

    def route_range(self, ev: Events, rows: np.ndarray) -> Pairs:
        if self.routing == "tiles":
            return route_rects_str(rows, ev.xmin, ev.ymin, ev.xmax, ev.ymax, *self._tiles(), self.leaf_worker,
                                   self.n_workers)
        return route_rects_rtree(rows, ev.xmin, ev.ymin, ev.xmax, ev.ymax, *self._tree(), *self._tiles(),
                                 self.leaf_worker, self.n_workers)[:2]

    def route_frequent_terms(self, ev: Events, rows: np.ndarray) -> Pairs:
        """A top-k-terms query to the workers of every cell its rectangle overlaps (no keywords)."""
        return self.route_range(ev, rows)

    def probe_stats(self, ev: Events, rows: np.ndarray | None = None) -> dict:
        """The R-tree search's probes for the given rows (default all) of a stream: per routed object
        (a point) and per query rectangle, the mean nodes visited and entry rectangles tested.
        Off the routing path (it routes the rows once more), for the fit report and audits; the
        same count whichever `routing` the router uses (the tree is always built)."""
        rows = np.arange(len(ev), dtype=np.int64) if rows is None else np.asarray(rows, np.int64)
        obj = rows[ev.kind[rows] == OBJECT]
        qs = rows[ev.kind[rows] != OBJECT]
        _, pv, pt = route_points_rtree(obj, ev.x, ev.y, *self._tree(), *self._tiles(), self.leaf_worker)
        _, _, qv, qt = route_rects_rtree(qs, ev.xmin, ev.ymin, ev.xmax, ev.ymax, *self._tree(), *self._tiles(),
                                         self.leaf_worker, self.n_workers)
        return {"objects": int(len(obj)), "object_nodes_mean": _mean(pv), "object_tests_mean": _mean(pt),
                "queries": int(len(qs)), "query_nodes_mean": _mean(qv), "query_tests_mean": _mean(qt)}

    def regions(self) -> np.ndarray:
        return tile_regions(*self._tiles())

    def size_bytes(self) -> int:
        """Dispatcher memory: the router's arrays and its R-tree's."""
        return super().size_bytes() + int(sum(v.nbytes for v in self.tree.values() if isinstance(v, np.ndarray)))

    def describe(self) -> dict:
        ex = self.extent
        reg = self.regions()
        reg[:, 0] = np.clip(reg[:, 0], ex[0], ex[2])
        reg[:, 2] = np.clip(reg[:, 2], ex[0], ex[2])
        reg[:, 1] = np.clip(reg[:, 1], ex[1], ex[3])
        reg[:, 3] = np.clip(reg[:, 3], ex[1], ex[3])
        return {
            **super().describe(),
            "routing": self.routing,
            "slices": int(len(self.leaf_start) - 1),
            "rtree": {"node_capacity": self.node_capacity, "height": int(self.tree["height"]),
                      "nodes": int(len(self.tree["child_lo"])), "sample_probes": self.sample_probes},
            "leaves": [{"worker": int(w), "region": r.tolist(), "load": float(ld)}
                       for w, r, ld in zip(self.leaf_worker, reg, self.leaf_load)],
        }
