"""The cell -> worker router over a uniform grid.

Every grid-snapped plan routes this way (the grid baseline, plans re-fitted or adjusted onto grid
cells), so the shape lives here, apart from any one strategy's fit.
"""

from __future__ import annotations

import numpy as np

from harness.core.events import Events
from harness.core.grid import UniformGrid
from strategies.base import Pairs, Router
from strategies.routers import kernels as route_kernels


class CellMapRouter(Router):
    """Routes by a cell -> worker map over a uniform grid (also the shape of any grid-snapped plan)."""

    def __init__(self, n_workers: int, grid: UniformGrid, cell_worker: np.ndarray):
        super().__init__(n_workers)
        self.grid = grid
        self.cell_worker = np.ascontiguousarray(cell_worker, np.int64)

    def route_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        return rows, route_kernels.route_points_cellmap(rows, ev.x, ev.y, *self.grid.args, self.cell_worker)

    def route_range(self, ev: Events, rows: np.ndarray) -> Pairs:
        return route_kernels.route_rects_cellmap(
            rows, ev.xmin, ev.ymin, ev.xmax, ev.ymax, *self.grid.args, self.cell_worker, self.n_workers
        )

    def route_frequent_terms(self, ev: Events, rows: np.ndarray) -> Pairs:
        """A top-k-terms query to the workers of every cell its rectangle overlaps (no keywords)."""
        return self.route_range(ev, rows)

    def units(self, ev: Events, rows: np.ndarray) -> Pairs:
        """Grid cells: an object's cell, every cell a rectangle overlaps."""
        return self.grid.units(ev, rows)

    def unit_owner(self) -> np.ndarray:
        return self.cell_worker.copy()

    def with_unit_owner(self, owner: np.ndarray) -> "CellMapRouter":
        return type(self)(self.n_workers, self.grid, owner)

    def describe(self) -> dict:
        return {**super().describe(), "grid": [self.grid.nx, self.grid.ny], "cell_worker": self.cell_worker.tolist()}
