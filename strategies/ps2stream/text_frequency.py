"""Frequency-based text partitioning, PS2Stream's first text baseline.

The lexicon is divided among workers balancing each term's sample load (objects containing it
times queries indexed under it, plus both), by longest-processing-time greedy. An AND query goes
to the worker of its least frequent keyword, an OR query to the workers of all its keywords (one
conjunct each), an object to the workers of all its terms: a matching query is always indexed
under one of the object's terms, so the pair meets there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core.events import AND, Events
from harness.core import allocate
from harness.core import kernels
from strategies.routers import kernels as route_kernels
from strategies.base import FitContext, Pairs, Router, Strategy
from strategies.load import term_loads


class TermMapRouter(Router):
    """Routes by a term -> worker map: the shape shared by every lexicon-partitioning strategy."""

    families = frozenset({"range"})

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

    def describe(self) -> dict:
        counts = np.bincount(self.term_worker, minlength=self.n_workers)
        return {**super().describe(), "terms_per_worker": counts.tolist()}


class FrequencyTextStrategy(Strategy):
    name = "text_frequency"
    families = frozenset({"range"})

    @dataclass
    class Params:
        pass

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        loads = term_loads(sample, context.vocab_size)
        # Unseen terms carry a small load proportional to their global frequency so they spread too.
        loads = loads + context.term_df / max(context.term_df.sum(), 1.0)
        return TermMapRouter(n_workers, allocate.lpt_assign(loads, n_workers))
