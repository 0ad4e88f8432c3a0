"""The term -> worker router: the shape shared by every lexicon-partitioning strategy.

An AND query goes to the worker of its least frequent keyword, an OR query (and a top-k subscription)
to the workers of all its keywords (one conjunct each). An object goes, by default
(`object_terms="live"`), to the workers of those of its terms that routed a subscription before it
(strategies/routers/live_terms.py): a matching query is always indexed under one of the object's
terms, and that term routed it, so the pair meets there; an object with no such term is sent
nowhere (PS2Stream's Definition 2, ps2stream.txt l.102, and H2, l.197; Tornado's textual summaries,
tornado.txt l.99). `object_terms="all"` sends it to the workers of all its terms, whether or not a
subscription was routed by them (DSkype's keyword-based method, skype.txt l.616, whose
communication cost is min(|m.psi|, N_sb), l.697). Strategies differ in how they build the map
(frequency LPT, hashing, hypergraph or metric partitioning) and in that default.
"""

from __future__ import annotations

import numpy as np

from harness.core import kernels
from harness.core.events import AND, INSERT, RANGE, TOPK, Events
from strategies.base import Pairs, Router
from strategies.routers import kernels as route_kernels
from strategies.routers.live_terms import NEVER, first_seq_table, observe_first_seqs, text_routing_terms

OBJECT_TERMS = ("live", "all")  # the values of a term router's `object_terms` parameter


def check_object_terms(strategy: str, value) -> str:
    """`value` if it is an allowed `object_terms`, else a ValueError naming the field."""
    if value not in OBJECT_TERMS:
        raise ValueError(f"strategy {strategy!r}: strategy.params.object_terms={value!r} is invalid; allowed: "
                         f"'live' (an object to the workers of its terms that route a subscription) or 'all' "
                         f"(to the workers of all its terms)")
    return value


def object_terms_for(strategy: str, value, sample: Events, context) -> str:
    """The `object_terms` a term router runs with: `value` once checked, except "all" whenever the
    workload holds top-k subscriptions (the run's families, `FitContext.family_contexts`, or the
    sample's). A top-k subscription is initialised at its registration against the window of
    messages that came before it (harness/families/topk/family.py), so a message must already be
    on the workers of all its terms, whether or not a subscription was routed by them yet; a range
    or kNN subscription matches only objects that arrive while it lives, so "live" is exact there."""
    value = check_object_terms(strategy, value)
    topk = "topk" in getattr(context, "family_contexts", {}) or bool(np.any(sample.family == TOPK))
    return "all" if topk else value


class TermMapRouter(Router):
    """Routes by a term -> worker map: the shape shared by every lexicon-partitioning strategy.

    With `object_terms="live"`, `term_seq[t]` is the seq of the first subscription routed by term
    t (NEVER: none yet) and `every_seq` that of the first subscription of a family routed to every
    worker (after it, objects go to the workers of all their terms, as with "all": such a query,
    e.g. SSTD's frequent-terms CTQ, needs objects whatever their terms)."""

    def __init__(self, n_workers: int, term_worker: np.ndarray, object_terms: str = "live"):
        super().__init__(n_workers)
        self.term_worker = np.ascontiguousarray(term_worker, np.int64)
        self.object_terms = check_object_terms(type(self).__name__, object_terms)
        self.term_seq = first_seq_table(len(self.term_worker) if object_terms == "live" else 0)
        self.every_seq = int(NEVER)

    def observe_inserts(self, ev: Events, rows: np.ndarray) -> None:
        """Record the routing terms of the subscriptions inserted (`text_routing_terms`), each
        with the seq of its first subscription, and the first seq of a subscription of a family
        this router sends to every worker."""
        if self.object_terms != "live":
            return
        rows = np.asarray(rows, np.int64)
        rows = rows[ev.kind[rows] == INSERT]
        fam = ev.family[rows]
        everywhere = rows[(fam != RANGE) & (fam != TOPK)]
        if len(everywhere):
            self.every_seq = min(self.every_seq, int(ev.seq[everywhere].min()))
        r, t = text_routing_terms(ev, rows)
        observe_first_seqs(self.term_seq, t, ev.seq[r])

    def route_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        if self.object_terms == "all":
            return self.store_objects(ev, rows)
        return route_kernels.route_live_term_sets(np.asarray(rows, np.int64), ev.seq, ev.offsets, ev.values,
                                                  self.term_worker, self.term_seq, self.every_seq, self.n_workers)

    def store_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        """Where workers keep objects for snapshot queries: the workers of all the object's terms,
        so a snapshot query routed by any term finds every object holding it (and every copy
        `route_objects` makes is among them)."""
        return route_kernels.route_term_sets(np.asarray(rows, np.int64), ev.offsets, ev.values, self.term_worker,
                                             self.n_workers)

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
        live = int((self.term_seq < NEVER).sum()) if self.object_terms == "live" else None
        return {**super().describe(), "terms_per_worker": counts.tolist(), "object_terms": self.object_terms,
                "routing_terms_seen": live}


class PartitionedTermRouter(TermMapRouter):
    """A TermMapRouter that also reports how its map was built (for plots and reports)."""

    def __init__(self, n_workers: int, term_worker: np.ndarray, info: dict | None = None,
                 object_terms: str = "live"):
        super().__init__(n_workers, term_worker, object_terms)
        self.info = dict(info or {})

    def describe(self) -> dict:
        return {**super().describe(), **self.info}
