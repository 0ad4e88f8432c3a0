"""DSkype's hashing-based distribution (Skype/DSkype Sec. 7.3.1, Eq. 14): h(s) = s.id mod N_sb.

The `hash` baseline with the paper's own function: each query on worker id mod N, every object
broadcast. Plain modulo keeps the paper's property that consecutive ids fill the workers in turn
(exactly balanced counts when ids are dense), which splitmix64 only gives in expectation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core.events import Events
from strategies.base import FitContext, Pairs, Router, Strategy
from strategies.routers.hash import HashRouter


class ModHashRouter(HashRouter):
    """HashRouter with Eq. 14's choice of worker; objects are still broadcast."""

    def _by_id(self, ev: Events, rows: np.ndarray) -> Pairs:
        """Eq. 14 (np.mod, so a negative id still gets a worker in [0, N))."""
        return rows, np.mod(ev.id[rows], self.n_workers).astype(np.int64)

    # the base class binds its aliases to its own _by_id, so they are rebound here (objects are
    # broadcast, so one worker answers a top-k-terms query too)
    route_range = route_knn = route_topk = route_frequent_terms = _by_id


class DSkypeHashStrategy(Strategy):
    name = "dskype_hash"
    families = frozenset({"range", "knn", "topk", "frequent_terms"})

    @dataclass
    class Params:
        pass

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        if int(n_workers) < 1:
            raise ValueError(f"dskype_hash: n_workers={n_workers!r} is invalid; allowed: an integer >= 1")
        return ModHashRouter(int(n_workers))
