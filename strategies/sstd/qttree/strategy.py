"""The `qttree` strategy (SSTD, Section 4) as the paper states it, and `qttree_termmap`, the
harness's earlier routing kept as a named ablation (ADR-0096).

qttree: J from a six-type historical sample generated from the fitting sample's tweets
(history.py; sstd.txt l.180, l.320), Eq. 2 as the paper writes it (paper_cost.py; l.135-177),
Algorithm 1 with textual splits that assign each object to one child by least increment
(onecopy_build.py; l.188), Karmarkar-Karp over the leaves' costs (l.205), and routers that keep
their own keyword lists (onecopy_router.py; l.219-230). CKQs go to every worker (l.223).

qttree_termmap: the same Algorithm 1 over the fitting sample as it is, with a term -> child map
fixed at fit per textual node (an object goes to every child owning one of its terms, a query to
the children of its routing keywords) and Eq. 1's text factor on W_crq as well (cost.py).

The tree grows to at least max(theta, n_workers) leaves (splits add 3 leaves, so theta = 32 stops
at 34); `split_kinds` is what the ablations (quadtree.py, text_only.py) change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from harness.core.events import Events
from strategies.base import FitContext, Router, Strategy
from strategies.sstd.qttree.assemble import to_router
from strategies.sstd.qttree.builder import QTTreeBuilder
from strategies.sstd.qttree.cost import CostModel
from strategies.sstd.qttree.history import historical_sample
from strategies.sstd.qttree.onecopy_build import OneCopyBuilder, to_onecopy_router
from strategies.sstd.qttree.paper_cost import PaperCostModel
from strategies.sstd.qttree.stats import QueryStats


def _check_ckq_routing(value: str) -> None:
    if value not in ("all", "ball"):
        raise ValueError(f"strategy.params.ckq_routing={value!r} is invalid; allowed: all, ball")


class QTTreeStrategy(Strategy):
    name = "qttree"
    families = frozenset({"range", "knn", "frequent_terms"})
    unit_router = True  # leaves are the migration units (SSTD Section 5; strategies/sstd/balance.py)
    split_kinds: ClassVar[tuple[str, ...]] = ("spatial", "text")

    @dataclass
    class Params:
        theta: int = 64  # the threshold on the number of leaves (SSTD default 64)
        # kNN subscriptions (CKQ): all = to every worker (SSTD Sec. 4.2, l.223), ball = like a range
        # query on the rectangle around the ball (to every textual child of the leaves it overlaps)
        ckq_routing: str = "all"

        def __post_init__(self):
            _check_ckq_routing(self.ckq_routing)

    def build(self, sample: Events, n_workers: int, params: Any, context: FitContext) -> OneCopyBuilder:
        PaperCostModel(QueryStats(sample, context.extent, knn_by_keywords=False))  # a family SSTD lacks: refused
        stats = QueryStats(historical_sample(sample, context.extent, context.seed), context.extent,
                           knn_by_keywords=False)
        builder = OneCopyBuilder(stats, PaperCostModel(stats), self.split_kinds)
        builder.build(max(int(params.theta), int(n_workers), 1))
        return builder

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        builder = self.build(sample, n_workers, params, context)
        router = to_onecopy_router(builder.nodes, n_workers, builder.model)
        router.knn_to_all = params.ckq_routing == "all"
        return router


class QTTreeTermMapStrategy(Strategy):
    """The ablation `qttree_termmap`: textual children by a term -> child map fixed at fit (objects
    copied to every child owning one of their terms), J from the fitting sample as it is."""

    name = "qttree_termmap"
    families = frozenset({"range", "knn", "frequent_terms"})
    unit_router = True
    split_kinds: ClassVar[tuple[str, ...]] = ("spatial", "text")

    @dataclass
    class Params:
        theta: int = 64
        # kNN subscriptions (CKQ): all = to every worker, ball = like a CRQ on the rectangle around
        # the ball, keyword routing included
        ckq_routing: str = "ball"

        def __post_init__(self):
            _check_ckq_routing(self.ckq_routing)

    def build(self, sample: Events, n_workers: int, params: Any, context: FitContext) -> QTTreeBuilder:
        stats = QueryStats(sample, context.extent, knn_by_keywords=getattr(params, "ckq_routing", "ball") == "ball")
        builder = QTTreeBuilder(stats, CostModel(stats), self.split_kinds)
        builder.build(max(int(params.theta), int(n_workers), 1))
        return builder

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        router = to_router(self.build(sample, n_workers, params, context).nodes, n_workers)
        router.knn_to_all = params.ckq_routing == "all"
        return router
