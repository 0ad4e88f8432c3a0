"""DkM-SKS subscription partitioning (Tsuruoka et al., arXiv 2101.12417, Sec. 4), applied to range
subscriptions.

Cost (Sec. 4.1): within a subset S_r whose members' regions are enclosed by R, a subscription
costs C(s) = sum over its keywords of P(R, lambda) = |O_{R,lambda}| / |O_init| (Eq. 4-5), a subset
the sum of its members (Eq. 6). For a range subscription the region is its rectangle. Algorithm 2
splits the costliest subset, Space-only (quadrants of its space r) when it holds more than gamma2
subscriptions, otherwise whichever of Space-only and Hybrid (LPT into four by Eq. 5) costs less,
until there are gamma1 * m subsets. Algorithm 3 then deals the subscriptions out one by one, subsets
by cost descending and members by cost descending, each to the least loaded worker, so that
neighbours with similar keywords land on different workers. A later subscription s_n takes the
subset S* whose R overlaps its own region most (Eq. 7), costs Eq. 5 under that R*, and goes
online to argmin C(w) (strategies/routers/subscription_table.py). Objects are broadcast to every
worker.

Decisions (the paper leaves them open; see ADR-0021): C(s) is recomputed with the
R of the subset s is in, for every candidate child; the space r of a Hybrid child is its parent's
r; empty children are dropped; singletons are never split, and the loop also stops when nothing
can split (so with fewer than gamma1 * m subscriptions, e.g. the paper's gamma1 = 100,000 on a
small sample, every subset ends a singleton); when no subset overlaps s_n, R* is s_n's own region.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from harness.core.events import Events, csr_take
from strategies.base import FitContext, Router, Strategy
from strategies.dkmsks.cost import eq5_numerators
from strategies.dkmsks.balls import with_balls
from strategies.dkmsks.counts import ObjectStats
from strategies.dkmsks.partition import assign_members, partition_subsets
from strategies.dkmsks.regions import RegionIndex, RegionTerms, regions
from strategies.load import locations
from strategies.routers.subscription_table import SubscriptionTableRouter, finish, sample_state
from strategies.load import sample_parts

DESCRIBE_SUBSETS = 2000  # subsets listed by describe() (the costliest), for plots


class DkmRouter(SubscriptionTableRouter):
    cost_model = "DkM-SKS Eq. (4)-(6), new subscriptions by Eq. (7)"

    def __init__(self, n_workers: int, stats: ObjectStats, index: RegionIndex, terms: RegionTerms, subset_cost,
                 subset_size, splits, cost_floor: float = 0.0, **state):
        super().__init__(n_workers, **state)
        self.cost_floor = float(cost_floor)
        self.stats = stats
        self.index = index  # the subsets' rectangles R, for Eq. (7)
        self.terms = terms  # O_init's terms inside each R, for Eq. (5) under R*
        self.subset_cost = np.asarray(subset_cost, np.float64)
        self.subset_size = np.asarray(subset_size, np.int64)
        self.splits = dict(splits)

    def new_costs(self, ev: Events, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, np.int64)
        ev = with_balls(ev, rows, self.stats)  # a kNN subscription's R_n: its ball over O_init
        order = self.index.cell_order(ev.xmin, ev.ymin, ev.xmax, ev.ymax, rows)  # neighbours together:
        by_cell = rows[order]  # both lookups below then reuse what the previous subscription read
        best = self.index.best_overlap_rows(ev.xmin, ev.ymin, ev.xmax, ev.ymax, by_cell)  # S* by Eq. (7)
        num, done = self.terms.counts(best, ev.offsets, ev.values, by_cell)  # Eq. (5) where R* has a term list
        rest = np.flatnonzero(~done)  # the others (and s_n's own region when none overlaps): strips
        if len(rest):
            own = regions(ev, by_cell[rest])
            r_star = np.where((best[rest] >= 0)[:, None], self.index.rects[np.maximum(best[rest], 0)], own)
            num[rest] = eq5_numerators(self.stats, r_star, *csr_take(ev.offsets, ev.values, by_cell[rest]))
        cost = np.empty(len(rows), np.float64)
        cost[order] = np.maximum(self.stats.p(num), self.cost_floor)
        return cost

    def describe(self) -> dict:
        top = np.argsort(-self.subset_cost, kind="stable")[:DESCRIBE_SUBSETS]
        return {
            **super().describe(),
            "n_subsets": len(self.subset_cost),
            "splits": self.splits,
            "subsets": [
                {"R": self.index.rects[i].tolist(), "cost": float(self.subset_cost[i]),
                 "subscriptions": int(self.subset_size[i])}
                for i in top
            ],
        }


class DkmSksStrategy(Strategy):
    name = "dkmsks"
    families = frozenset({"range", "knn", "frequent_terms"})

    @dataclass
    class Params:
        gamma1: int = 100_000  # Algorithm 2 stops at gamma1 * m subsets
        gamma2: int = 20  # subsets larger than this are split Space-only
        # every subscription costs at least this fraction of the sample's mean positive Eq. (5)
        # cost (indexing and checking one is never free); 0 = the paper's costs as they are
        min_cost_fraction: float = 0.1

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        objs, qs = sample_parts(sample)
        obj_off, obj_val = csr_take(sample.offsets, sample.values, objs)
        stats = ObjectStats(sample.x[objs], sample.y[objs], obj_off, obj_val)
        rects = regions(sample, qs)
        cx, cy = locations(sample, qs)
        off, val = csr_take(sample.offsets, sample.values, qs)
        part = partition_subsets(stats, cx, cy, rects, off, val, context.extent, params.gamma1 * n_workers,
                                 params.gamma2)
        positive = part.member_cost[part.member_cost > 0]
        floor = params.min_cost_fraction * (float(positive.mean()) if len(positive) else 1.0)
        part = replace(part, member_cost=np.maximum(part.member_cost, floor))
        worker, _ = assign_members(part, n_workers)
        index = RegionIndex(part.rects)
        by_cell = index.cell_order(*[np.ascontiguousarray(c) for c in part.rects.T], np.arange(len(part.rects)))
        router = DkmRouter(
            n_workers, stats, index, RegionTerms(stats, part.rects, obj_off, obj_val, layout=by_cell),
            stats.p(part.cost),
            np.bincount(part.subset_of, minlength=len(part.cost)), part.splits,
            cost_floor=float(stats.p(np.array([floor]))[0]),
            **sample_state(sample, qs, worker, stats.p(part.member_cost), n_workers),
        )
        return finish(router, sample)
