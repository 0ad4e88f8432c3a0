"""KOP, DkM-SKS's keyword-oriented baseline (Tsuruoka et al., arXiv 2101.12417, Sec. 3.1),
applied to range subscriptions.

A subscription costs Eq. (1), C(s) = sum over its keywords of P(lambda) = |O_lambda| / |O_init|
(O_init = the sample's objects): the expected number of its keywords a new object holds, space
ignored. Algorithm 1 (Graham's LPT over the individual subscriptions, cost descending, ties to
the lowest worker id) places the sample's subscriptions; later ones go online to argmin C(w)
with the same Eq. (1) cost, and a deletion subtracts its cost
(strategies/routers/subscription_table.py). Objects are broadcast to every worker, so no pair can
be missed whatever the keyword operator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core.events import Events, csr_take
from harness.core import allocate
from strategies.base import FitContext, Router, Strategy
from strategies.dkmsks.cost import eq1_numerators
from strategies.routers.subscription_table import SubscriptionTableRouter, finish, sample_state
from strategies.load import sample_parts


class KopRouter(SubscriptionTableRouter):
    cost_model = "KOP Eq. (1): sum of P(lambda)"

    def __init__(self, n_workers: int, term_count: np.ndarray, n_init: int, **state):
        super().__init__(n_workers, **state)
        self.term_count = np.asarray(term_count, np.int64)
        self.n_init = int(n_init)

    def new_costs(self, ev: Events, rows: np.ndarray) -> np.ndarray:
        off, val = csr_take(ev.offsets, ev.values, rows)
        return eq1_numerators(self.term_count, off, val) / max(self.n_init, 1)


class KopStrategy(Strategy):
    name = "kop"
    families = frozenset({"range", "knn", "frequent_terms"})
    # the paper's worker index (DkM-SKS Sec. 3): an inverted file, a one-cell grid (index.knn.layout=paper)
    paper_index = {"knn": {"cells_per_side": 1}}

    @dataclass
    class Params:
        pass

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        objs, qs = sample_parts(sample)
        _, obj_terms = csr_take(sample.offsets, sample.values, objs)
        term_count = np.bincount(obj_terms.astype(np.int64), minlength=1)
        off, val = csr_take(sample.offsets, sample.values, qs)
        cost = eq1_numerators(term_count, off, val) / max(len(objs), 1)
        order = np.argsort(-cost, kind="stable")
        worker = allocate.greedy_least_loaded(order, cost, np.zeros(n_workers, np.float64))
        router = KopRouter(n_workers, term_count, len(objs), **sample_state(sample, qs, worker, cost, n_workers))
        return finish(router, sample)
