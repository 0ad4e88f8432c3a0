"""Textual hash routing, Tornado's text baseline: each term lives on the worker its hash names.

No load information at all (the contrast with `text_frequency`, which balances the terms' sample
load): an AND query goes to the worker of its least frequent keyword, an OR query to those of all
its keywords, an object to those of its terms that route a subscription (Tornado's routing layer
forwards an object to an evaluator only when its textual summary shares a keyword, tornado.txt l.99),
exactly as any term -> worker map routes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core.events import Events, splitmix64
from strategies.base import FitContext, Router, Strategy
from strategies.routers.termmap import TermMapRouter, object_terms_for


class TextHashStrategy(Strategy):
    name = "text_hash"
    families = frozenset({"range", "topk"})
    filters_objects = True  # object_terms="live": an object no subscription's routing term holds goes nowhere

    @dataclass
    class Params:
        salt: int = 0  # changes the hash, to see how much a given assignment matters
        # "live": an object to the workers of its terms that routed a subscription before it (the
        # routing layer consults each evaluator's textual summary, tornado.txt l.99); "all": all its terms
        object_terms: str = "live"

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        terms = np.arange(context.vocab_size, dtype=np.int64) + (np.int64(params.salt) << 32)
        return TermMapRouter(n_workers, (splitmix64(terms) % np.uint64(n_workers)).astype(np.int64),
                             object_terms_for(self.name, params.object_terms, sample, context))
