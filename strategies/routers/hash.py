"""The hash router: each query on one worker chosen by its id, every object broadcast.

No replication of queries, full replication of objects: correct for every query family without
knowing anything about the data, so any strategy can fall back to it (DSkype's hash baseline).
"""

from __future__ import annotations

import numpy as np

from harness.core.events import Events, splitmix64
from strategies.base import Pairs, Router


class HashRouter(Router):
    def route_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        return self.to_every_worker(ev, rows)

    def _by_id(self, ev: Events, rows: np.ndarray) -> Pairs:
        """Hashed id, so consecutive ids do not land on workers in lock step."""
        return rows, (splitmix64(ev.id[rows]) % np.uint64(self.n_workers)).astype(np.int64)

    route_range = route_knn = route_topk = route_frequent_terms = _by_id
