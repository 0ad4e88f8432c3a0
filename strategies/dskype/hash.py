"""Hash baseline: each query lives on one worker chosen by its id; every object is broadcast.

The simplest correct partitioning: no replication of queries, full replication of objects. It
is the floor any space- or text-aware strategy has to beat, and it routes every query family.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core.events import Events, splitmix64
from strategies.base import FitContext, Pairs, Router, Strategy


class HashRouter(Router):
    families = frozenset({"range", "knn", "topk", "snapshot"})

    def route_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        n = self.n_workers
        return np.repeat(rows, n), np.tile(np.arange(n, dtype=np.int64), len(rows))

    def _by_id(self, ev: Events, rows: np.ndarray) -> Pairs:
        """Hashed id, so consecutive ids do not land on workers in lock step."""
        return rows, (splitmix64(ev.id[rows]) % np.uint64(self.n_workers)).astype(np.int64)

    route_range = route_knn = route_topk = route_snapshot = _by_id


class HashStrategy(Strategy):
    name = "hash"
    families = frozenset({"range", "knn", "topk", "snapshot"})

    @dataclass
    class Params:
        pass

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        return HashRouter(n_workers)
