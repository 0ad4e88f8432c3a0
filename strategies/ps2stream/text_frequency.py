"""Frequency-based text partitioning, PS2Stream's first text baseline.

The lexicon is divided among workers balancing each term's sample load (objects containing it
times queries indexed under it, plus both), by longest-processing-time greedy; events are routed
by that term map (`strategies/routers/termmap.py`): an object only to the workers of those of its
terms that route a subscription (Definition 2, l.102; the dispatcher's H2, l.197).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.core.events import Events
from harness.core import allocate
from strategies.base import FitContext, Router, Strategy
from strategies.load import term_loads
from strategies.routers.termmap import TermMapRouter, object_terms_for


class FrequencyTextStrategy(Strategy):
    name = "text_frequency"
    families = frozenset({"range", "topk"})
    filters_objects = True  # object_terms="live": an object no subscription's routing term holds goes nowhere

    @dataclass
    class Params:
        # "live": an object to the workers of its terms that routed a subscription before it
        # (Definition 2, ps2stream.txt l.102; H2, l.197); "all": to those of all its terms
        object_terms: str = "live"

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        loads = term_loads(sample, context.vocab_size)
        # Unseen terms carry a small load proportional to their global frequency so they spread too.
        loads = loads + context.term_df / max(context.term_df.sum(), 1.0)
        return TermMapRouter(n_workers, allocate.lpt_assign(loads, n_workers),
                             object_terms_for(self.name, params.object_terms, sample, context))
