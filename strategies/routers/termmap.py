"""The term -> worker router: the shape shared by every lexicon-partitioning strategy.

An AND query goes to the worker of its least frequent keyword, an OR query (and a top-k subscription)
to the workers of all
its keywords (one conjunct each), an object to the workers of all its terms: a matching query is
always indexed under one of the object's terms, so the pair meets there. Strategies differ only in
how they build the map (frequency LPT, hashing, hypergraph or metric partitioning).
"""

from __future__ import annotations

import numpy as np

from harness.core import kernels
from harness.core.events import AND, Events
from strategies.base import Pairs, Router
from strategies.routers import kernels as route_kernels


class TermMapRouter(Router):
    """Routes by a term -> worker map: the shape shared by every lexicon-partitioning strategy."""

    def __init__(self, n_workers: int, term_worker: np.ndarray):
        super().__init__(n_workers)
        self.term_worker = np.ascontiguousarray(term_worker, np.int64)

    def route_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        return route_kernels.route_term_sets(rows, ev.offsets, ev.values, self.term_worker, self.n_workers)

    def route_range(self, ev: Events, rows: np.ndarray) -> Pairs:
        is_and = ev.op[rows] == AND
        and_rows = rows[is_and]
        ra = and_rows, self.term_worker[kernels.last_terms(and_rows, ev.offsets, ev.values)]
        ro = route_kernels.route_term_sets(rows[~is_and], ev.offsets, ev.values, self.term_worker, self.n_workers)
        return np.concatenate([ra[0], ro[0]]), np.concatenate([ra[1], ro[1]])

    def route_topk(self, ev: Events, rows: np.ndarray) -> Pairs:
        """A top-k subscription to the workers of all its keywords: a message that can enter its
        top-k shares one of them (DSkype's keyword-based distribution, Sec. 7.3)."""
        return route_kernels.route_term_sets(rows, ev.offsets, ev.values, self.term_worker, self.n_workers)

    def describe(self) -> dict:
        counts = np.bincount(self.term_worker, minlength=self.n_workers)
        return {**super().describe(), "terms_per_worker": counts.tolist()}


class PartitionedTermRouter(TermMapRouter):
    """A TermMapRouter that also reports how its map was built (for plots and reports)."""

    def __init__(self, n_workers: int, term_worker: np.ndarray, info: dict | None = None):
        super().__init__(n_workers, term_worker)
        self.info = dict(info or {})

    def describe(self) -> dict:
        return {**super().describe(), **self.info}
