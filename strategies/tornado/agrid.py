"""Tornado's Augmented Grid (A-Grid): cost-partitioned fine grid, neighbour-search range routing
and per-evaluator keyword summaries (Mahmood et al., Tornado; paper sections 3 and 4.1).

- Fine grid (section 3.1, section 5): square cells whose side is the average query side of the
  sample (r_c = r_q), enlarged when the grid would exceed `max_cells` (the paper's 1000 x 1000).
- Initial partitioning (section 4.1): a max-priority queue of rectangles keyed by cost; the
  costliest is split at the horizontal or vertical cut minimising the larger half's cost, until
  the requested number of partitions exists. A single-cell partition is set aside, not split
  (the paper says "until a single grid cell is reached"; we keep going with the others).
  Cell cost is Eq. 1, sum over sample objects of the queries they would find in the cell's
  inverted lists, plus the cell's objects and overlapping queries (see `cell_costs`).
- Routing (sections 3.2 to 3.5): an object goes to the partition of its cell in O(1); a query
  rectangle walks Algorithm 1 (neighbour search): from the partition of its top-left cell, follow
  each visited partition's right and bottom shortcuts to the next partition's dominant cell,
  O(partitions touched) and independent of the grid resolution.
- Keyword summaries (section 3.6): per partition the set of query keywords routed to it: every
  keyword of an OR (OVERLAPS) query, only the least frequent keyword of an AND (CONTAINS) query
  (the paper stores "a single keyword" without saying which; an object matching an AND query
  holds all its keywords, so it holds the least frequent one, and that one prunes best). An
  object is forwarded only if one of its terms is in its partition's summary. Entries carry the
  seq of the insertion that created them, and an object uses only entries older than itself.
  Summaries only grow (the paper's lazy cleaning is not modelled: a stale entry costs a false
  positive, never a lost result).

Partitions are explicit (inclusive cell rectangles + partition -> worker), one per worker by
default as in the paper (one evaluator per partition); `partitions_per_worker` > 1 groups them by
longest-processing-time greedy on their cost. Decisions are in ADR-0018.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core import allocate
from harness.core.events import INSERT, Events
from strategies.base import FitContext, Router, Strategy
from strategies.load import sample_parts
from strategies.tornado.agrid_build import cell_costs, fine_grid, kd_partition, rect_costs
from strategies.tornado.agrid_router import AGridRouter


class AGridStrategy(Strategy):
    name = "agrid"
    families = frozenset({"range", "frequent_terms"})
    filters_objects = True
    unit_router = True  # fine cells are the migration units (strategies/tornado/adjust.py)

    @dataclass
    class Params:
        summaries: bool = True  # drop objects no query of their partition could match (section 3.6)
        partitions_per_worker: int = 1  # the paper: one partition per evaluator
        cell_side: float = 0.0  # km; 0 = the sample's average query side (section 5: r_c = r_q)
        max_cells: int = 1_000_000  # the paper's 1000 x 1000 fine grid

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        n_parts = max(1, int(n_workers) * max(1, int(params.partitions_per_worker)))
        _, qs = sample_parts(sample)
        if params.cell_side > 0:
            side = float(params.cell_side)
        elif len(qs):
            side = float(np.mean((sample.xmax[qs] - sample.xmin[qs] + sample.ymax[qs] - sample.ymin[qs]) / 2.0))
        else:
            side = 0.0
        grid = fine_grid(context.extent, side, int(params.max_cells), n_parts)
        cost = cell_costs(sample, grid)
        rects = kd_partition(cost, grid.nx, grid.ny, n_parts)
        pcost = rect_costs(cost, grid.nx, grid.ny, rects)
        if len(rects) <= n_workers:
            part_worker = np.arange(len(rects), dtype=np.int64)  # one evaluator per partition
        else:
            # Zero-cost partitions still need spreading: a tiny per-partition floor breaks LPT ties.
            floor = 1e-9 * max(float(pcost.max(initial=0.0)), 1.0)
            part_worker = allocate.lpt_assign(pcost + floor, n_workers)
        router = AGridRouter(n_workers, grid, rects, part_worker, params.summaries, pcost)
        router.observe_inserts(sample, np.flatnonzero(sample.kind == INSERT))  # warm-up queries
        return router
