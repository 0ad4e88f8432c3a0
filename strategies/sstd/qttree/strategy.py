"""The `qttree` strategy (SSTD, Section 4): J from the sample, Algorithm 1, then Karmarkar-Karp
over the leaves. The tree grows to at least max(theta, n_workers) leaves (splits add 3 leaves, so
theta = 32 stops at 34, as the notes say); leaf weights for Karmarkar-Karp are the leaves' Eq. 2
costs. `split_kinds` is what the ablations (quadtree.py, text_only.py) change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from harness.core.events import Events
from strategies.base import FitContext, Router, Strategy
from strategies.sstd.qttree.assemble import to_router
from strategies.sstd.qttree.builder import QTTreeBuilder
from strategies.sstd.qttree.cost import CostModel
from strategies.sstd.qttree.stats import QueryStats


class QTTreeStrategy(Strategy):
    name = "qttree"
    families = frozenset({"range"})
    unit_router = True  # leaves are the migration units (SSTD Section 5; strategies/sstd/balance.py)
    split_kinds: ClassVar[tuple[str, ...]] = ("spatial", "text")

    @dataclass
    class Params:
        theta: int = 64  # the threshold on the number of leaves (SSTD default 64)

    def build(self, sample: Events, n_workers: int, params: Any, context: FitContext) -> QTTreeBuilder:
        stats = QueryStats(sample, context.extent)
        builder = QTTreeBuilder(stats, CostModel(stats), self.split_kinds)
        builder.build(max(int(params.theta), int(n_workers), 1))
        return builder

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        return to_router(self.build(sample, n_workers, params, context).nodes, n_workers)
