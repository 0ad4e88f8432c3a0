"""The `qttree` strategy (SSTD, Section 4): J from the sample, Algorithm 1, then Karmarkar-Karp
over the leaves; kNN subscriptions (CKQ) routed as `ckq_routing` says (router.py). The tree grows to at least max(theta, n_workers) leaves (splits add 3 leaves, so
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
    families = frozenset({"range", "knn", "frequent_terms"})
    unit_router = True  # leaves are the migration units (SSTD Section 5; strategies/sstd/balance.py)
    split_kinds: ClassVar[tuple[str, ...]] = ("spatial", "text")

    @dataclass
    class Params:
        theta: int = 64  # the threshold on the number of leaves (SSTD default 64)
        # kNN subscriptions (CKQ): all = to every worker (SSTD Sec. 4.2; W_ckq without a text
        # factor), ball = like a CRQ on the rectangle around the ball, keyword routing included
        ckq_routing: str = "ball"

        def __post_init__(self):
            if self.ckq_routing not in ("all", "ball"):
                raise ValueError(f"strategy.params.ckq_routing={self.ckq_routing!r} is invalid; allowed: all, ball")

    def build(self, sample: Events, n_workers: int, params: Any, context: FitContext) -> QTTreeBuilder:
        stats = QueryStats(sample, context.extent, knn_by_keywords=getattr(params, "ckq_routing", "ball") == "ball")
        builder = QTTreeBuilder(stats, CostModel(stats), self.split_kinds)
        builder.build(max(int(params.theta), int(n_workers), 1))
        return builder

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        router = to_router(self.build(sample, n_workers, params, context).nodes, n_workers)
        router.knn_to_all = params.ckq_routing == "all"
        return router
