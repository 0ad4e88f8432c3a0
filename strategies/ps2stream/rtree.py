"""R-tree partitioning, PS2Stream's third space baseline (Sec. VI-B, after SpatialHadoop): "constructs
a R-tree to do the partitioning, and then partitions the set of leaf nodes".

The R-tree is bulk-loaded by Sort-Tile-Recursive (STR) packing on the sample's points (objects and
query locations): sorted by x into S vertical slices of S * c points, each slice sorted by y into
leaves of c points, with about `leaves_per_worker` * m leaves in all. STR leaves leave gaps (and
points outside the sample would have no leaf), so each leaf is extended to a tile: slices meet at
the midpoint between their neighbouring x values, leaves of a slice at the midpoint between their
neighbouring y values, and the outer tiles reach to infinity, so the tiles cover the plane. Leaves
are grouped into workers by LPT on the sample load n_o * n_q + n_o + n_q (objects inside, queries
overlapping; strategies/load.py). The leaves stay the partitioning; routing goes through a
hierarchical R-tree over them (`node_capacity` entries a node, STR-packed bottom-up; Tornado's
"Standard R-tree" routing index, tornado.txt l.370), or, as the variant `routing: tiles`, by the
old binary searches over the tiles' cuts (`strategies/routers/rtree.py`). Decisions (variant,
fan-out, leaf grouping, uncovered space, the routing hierarchy) are in ADR-0024 and ADR-0092.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core.events import Events
from harness.core import allocate
from strategies.base import FitContext, Router, Strategy
from strategies.load import locations
from strategies.load import sample_parts, unit_load
from strategies.routers.rtree import NODE_CAPACITY, ROUTINGS, RTreeRouter, route_points_str, route_rects_str


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


class RTreeStrategy(Strategy):
    name = "rtree"
    families = frozenset({"range", "frequent_terms"})

    @dataclass
    class Params:
        leaves_per_worker: int = 16  # STR leaves (partition units) per worker
        node_capacity: int = NODE_CAPACITY  # entries per R-tree node of the routing index
        routing: str = "rtree"  # "rtree": search the R-tree; "tiles": binary searches over the cuts

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        if params.routing not in ROUTINGS:
            raise ValueError(f"strategy 'rtree': routing={params.routing!r} is not allowed; allowed: {list(ROUTINGS)}")
        if int(params.node_capacity) < 2:
            raise ValueError(f"strategy 'rtree': node_capacity={params.node_capacity!r} is not allowed; "
                             "a node holds at least 2 entries")
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
        router = RTreeRouter(n_workers, *tiles, allocate.lpt_assign(load, n_workers), load, context.extent,
                             routing=params.routing, node_capacity=params.node_capacity)
        router.sample_probes = router.probe_stats(sample)  # the search's cost on the sample (describe())
        return router
