"""Uniform grid partitioning, PS2Stream's space baseline (after SpatialHadoop's grid).

The space is cut into 2^6 x 2^6 cells (the granularity the paper found best); cells are grouped
into workers by longest-processing-time greedy on their sample load (the paper does not say how
cells are grouped; see docs/decisions.md). An object goes to the worker of its cell, a query to
the workers of every cell its rectangle overlaps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core.events import Events
from harness.core import allocate
from strategies.routers import kernels as route_kernels
from strategies.base import FitContext, Pairs, Router, Strategy
from strategies.load import sample_parts, unit_load
from harness.core.grid import UniformGrid


class CellMapRouter(Router):
    """Routes by a cell -> worker map over a uniform grid (also the shape of any grid-snapped plan)."""

    families = frozenset({"range"})

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

    def units(self, ev: Events, rows: np.ndarray) -> Pairs:
        """Grid cells: an object's cell, every cell a rectangle overlaps."""
        return self.grid.units(ev, rows)

    def unit_owner(self) -> np.ndarray:
        return self.cell_worker.copy()

    def with_unit_owner(self, owner: np.ndarray) -> "CellMapRouter":
        return type(self)(self.n_workers, self.grid, owner)

    def describe(self) -> dict:
        return {**super().describe(), "grid": [self.grid.nx, self.grid.ny], "cell_worker": self.cell_worker.tolist()}


class GridStrategy(Strategy):
    name = "grid"
    families = frozenset({"range"})
    unit_router = True

    @dataclass
    class Params:
        cells_per_side: int = 64

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        grid = UniformGrid.over(context.extent, params.cells_per_side)
        objs, qs = sample_parts(sample)
        n_o = grid.object_counts(sample.x[objs], sample.y[objs])
        n_q = grid.overlap_counts(sample.xmin[qs], sample.ymin[qs], sample.xmax[qs], sample.ymax[qs])
        return CellMapRouter(n_workers, grid, allocate.lpt_assign(unit_load(n_o, n_q), n_workers))
