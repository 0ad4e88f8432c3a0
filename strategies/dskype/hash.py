"""Hash baseline: each query lives on one worker chosen by its id; every object is broadcast.

The simplest correct partitioning: no replication of queries, full replication of objects. It
is the floor any space- or text-aware strategy has to beat, and it routes every query family.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.core.events import Events
from strategies.base import FitContext, Router, Strategy
from strategies.routers.hash import HashRouter


class HashStrategy(Strategy):
    name = "hash"
    families = frozenset({"range", "knn", "topk", "frequent_terms"})

    @dataclass
    class Params:
        pass

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        return HashRouter(n_workers)
