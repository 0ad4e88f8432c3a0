"""The terms objects are routed by: the routing terms of the subscriptions seen so far, each with
the seq of the first subscription that brought it (PS2Stream's H2, ps2stream.txt l.197; Tornado's
textual summaries, tornado.txt l.99).

A text router sends a subscription to the workers of its routing terms (an AND range query: its
least frequent keyword; an OR range query and a top-k subscription: every keyword), so an object
meets every subscription it can match on the workers of those of its terms that route some
subscription: PS2Stream's Definition 2 (l.102) sends an object to w_i *only if* it shares a term
with T_i, and the dispatcher discards one without a term in H2, "the terms in STS queries"
(l.197). Each term here carries the seq at which it first routed a subscription; an object at seq
s reads only the terms older than s (a subscription inserted after the object cannot match it),
which gives exact per-event semantics wherever the object is routed (`Router.observe_inserts`).
Deletions do not shrink the set: l.197 only adds a keyword ("H2 is updated correspondingly if it
does not contain the keyword"); a term whose subscriptions were all deleted still draws objects,
a superset that stays exact (ADR-0091).

gridt (strategies/ps2stream/gridt.py) keeps the same first-seq tables per cell, and shares
`merge_first_seqs` for its subscriptions that cover most of the grid.
"""

from __future__ import annotations

import numpy as np

from harness.core.events import RANGE, TOPK, Events, csr_take
from strategies.load import routing_terms

NEVER = np.iinfo(np.int64).max  # the seq of a term no subscription has been routed by yet


def text_routing_terms(ev: Events, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, term) pairs a term -> worker router sends the subscriptions `rows` by: a range query
    (and a family routed like it) by `strategies.load.routing_terms` (AND: its least frequent
    keyword; OR: each keyword), a top-k subscription by every keyword (DSkype Sec. 7.3.3). Rows of
    other families give no pair."""
    rows = np.asarray(rows, np.int64)
    fam = ev.family[rows]
    rr, rt = routing_terms(ev, rows[fam == RANGE])
    top = rows[fam == TOPK]
    off, terms = csr_take(ev.offsets, ev.values, top)
    return (np.concatenate([rr, np.repeat(top, np.diff(off))]),
            np.concatenate([rt, terms.astype(np.int64)]))


def merge_first_seqs(terms: np.ndarray, seqs: np.ndarray, new_terms: np.ndarray,
                     new_seqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A sorted term -> first seq table (distinct `terms`, their `seqs`) with the (term, seq)
    pairs `new_*` added: each term keeps the smallest seq it appeared at."""
    t = np.r_[np.asarray(terms, np.int64), np.asarray(new_terms, np.int64)]
    s = np.r_[np.asarray(seqs, np.int64), np.asarray(new_seqs, np.int64)]
    order = np.lexsort((s, t))
    t, s = t[order], s[order]
    first = np.r_[True, t[1:] != t[:-1]] if len(t) else np.zeros(0, bool)
    return t[first], s[first]


def first_seq_table(n_terms: int) -> np.ndarray:
    """A dense term -> first seq table over a vocabulary of `n_terms`, every term unseen."""
    return np.full(int(n_terms), NEVER, np.int64)


def observe_first_seqs(table: np.ndarray, terms: np.ndarray, seqs: np.ndarray) -> None:
    """Lower each term's entry in the dense `table` to the seq it appeared at now (in place)."""
    terms = np.asarray(terms, np.int64)
    bad = (terms < 0) | (terms >= len(table))
    if bad.any():
        raise ValueError(f"a subscription's term {int(terms[bad][0])} is outside the router's vocabulary "
                         f"of {len(table)} terms (context.term_df); allowed: 0..{len(table) - 1}")
    np.minimum.at(table, terms, np.asarray(seqs, np.int64))
