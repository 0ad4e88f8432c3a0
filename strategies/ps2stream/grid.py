"""Uniform grid partitioning, PS2Stream's space baseline (after SpatialHadoop's grid).

The space is cut into 2^6 x 2^6 cells (the granularity the paper found best); cells are grouped
into workers by longest-processing-time greedy on their sample load (the paper does not say how
cells are grouped; see ADR-0003). An object goes to the worker of its cell, a query to
the workers of every cell its rectangle overlaps.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.core.events import Events
from harness.core import allocate
from strategies.base import FitContext, Router, Strategy
from strategies.load import sample_parts, unit_load
from strategies.routers.cellmap import CellMapRouter
from harness.core.grid import UniformGrid


class GridStrategy(Strategy):
    name = "grid"
    families = frozenset({"range", "frequent_terms"})
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
