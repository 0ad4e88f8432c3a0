"""The rules every snapshot query's brute force shares (SSTD's SRQ and SKQ: each family's own in its
folder's oracle.py): which objects a snapshot query sees, and its keyword predicate.

Shares no code with the object store (harness/families/object_store.py): no grid, no postings, no
binary search; objects are scanned in seq order and keywords checked by linear membership. An
object is visible to a snapshot query q when it arrived before q (seq < q.seq) and within q's
look-back (ts > q.ts - q.tau).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.events import AND, Events


@njit(cache=True)
def term_member(vals, lo, hi, t):
    """Whether term t is among vals[lo:hi] (a linear scan)."""
    for i in range(lo, hi):
        if vals[i] == t:
            return True
    return False


@njit(cache=True)
def keywords_pass(o, q, op, offsets, values):
    """Whether object row o holds query row q's keywords (AND: all, OR: one; none: any object)."""
    need = offsets[q + 1] - offsets[q]
    hits = 0
    for j in range(offsets[q], offsets[q + 1]):
        if term_member(values, offsets[o], offsets[o + 1], values[j]):
            hits += 1
    if need == 0:
        return True
    return hits == need if op[q] == AND else hits > 0


@njit(cache=True)
def visible(o, q, seq, ts, tau):
    """Whether object row o arrived before snapshot query row q and within its look-back."""
    return seq[o] < seq[q] and ts[o] > ts[q] - tau[q]


def in_seq_order(stream: Events) -> Events:
    """The stream in seq order (itself when it already is)."""
    order = np.argsort(stream.seq, kind="stable")
    return stream if np.array_equal(order, np.arange(len(stream))) else stream.take(order)
