"""Frequency-based text partitioning, PS2Stream's first text baseline.

The lexicon is divided among workers balancing each term's sample load (objects containing it
times queries indexed under it, plus both), by longest-processing-time greedy; events are routed
by that term map (`strategies/routers/termmap.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.core.events import Events
from harness.core import allocate
from strategies.base import FitContext, Router, Strategy
from strategies.load import term_loads
from strategies.routers.termmap import TermMapRouter


class FrequencyTextStrategy(Strategy):
    name = "text_frequency"
    families = frozenset({"range", "topk"})

    @dataclass
    class Params:
        pass

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        loads = term_loads(sample, context.vocab_size)
        # Unseen terms carry a small load proportional to their global frequency so they spread too.
        loads = loads + context.term_df / max(context.term_df.sum(), 1.0)
        return TermMapRouter(n_workers, allocate.lpt_assign(loads, n_workers))
