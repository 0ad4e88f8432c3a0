"""Textual hash routing, Tornado's text baseline: each term lives on the worker its hash names.

No load information at all (the contrast with `text_frequency`, which balances the terms' sample
load): an AND query goes to the worker of its least frequent keyword, an OR query to those of all
its keywords, an object to those of all its terms, exactly as any term -> worker map routes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core.events import Events, splitmix64
from strategies.base import FitContext, Router, Strategy
from strategies.routers.termmap import TermMapRouter


class TextHashStrategy(Strategy):
    name = "text_hash"
    families = frozenset({"range", "topk"})

    @dataclass
    class Params:
        salt: int = 0  # changes the hash, to see how much a given assignment matters

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        terms = np.arange(context.vocab_size, dtype=np.int64) + (np.int64(params.salt) << 32)
        return TermMapRouter(n_workers, (splitmix64(terms) % np.uint64(n_workers)).astype(np.int64))
