"""The kd-tree router: walks a binary space partition exactly (no grid snapping).

An object takes the side its coordinate falls on (< split: left), a query every side its rectangle
reaches; leaves name workers. Kept apart from the kdtree baseline's fit so any tree-shaped plan can
route through it.
"""

from __future__ import annotations

import numpy as np

from harness.core.events import Events
from strategies.base import Pairs, Router
from strategies.routers import kernels as route_kernels


class KdTreeRouter(Router):
    def __init__(self, n_workers, split_dim, split_val, left, right, leaf_worker, regions):
        super().__init__(n_workers)
        self.split_dim = np.asarray(split_dim, np.int64)
        self.split_val = np.asarray(split_val, np.float64)
        self.left = np.asarray(left, np.int64)
        self.right = np.asarray(right, np.int64)
        self.leaf_worker = np.asarray(leaf_worker, np.int64)
        self.regions = np.asarray(regions, np.float64)  # per node xmin, ymin, xmax, ymax (for plots)

    def _tree(self):
        return self.split_dim, self.split_val, self.left, self.right, self.leaf_worker

    def route_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        return rows, route_kernels.kd_descend(rows, ev.x, ev.y, *self._tree())

    def route_range(self, ev: Events, rows: np.ndarray) -> Pairs:
        return route_kernels.kd_route_rects(rows, ev.xmin, ev.ymin, ev.xmax, ev.ymax, *self._tree(), self.n_workers)

    def route_frequent_terms(self, ev: Events, rows: np.ndarray) -> Pairs:
        """A top-k-terms query to the workers of every cell its rectangle overlaps (no keywords)."""
        return self.route_range(ev, rows)

    def describe(self) -> dict:
        leaves = np.flatnonzero(self.split_dim < 0)
        return {
            **super().describe(),
            "leaves": [{"worker": int(self.leaf_worker[i]), "region": self.regions[i].tolist()} for i in leaves],
        }
