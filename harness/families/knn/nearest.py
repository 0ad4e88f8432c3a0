"""A subscription's k nearest as three parallel slices (squared distance, seq, object id) sorted by
distance, ties in arrival order: the one insertion the worker index (stream.py, its local A(s))
and the merger (merge.py, the global A(s)) both make. Compiled inline into each caller's loop."""

from __future__ import annotations

from numba import njit


@njit(cache=True, inline="always")
def insert_nearest(top_d, top_seq, top_oid, base, count, k, d2, seq, oid):
    """Insert (d2, seq, oid) into the slice [base, base + k) holding `count` members: after every
    member with a distance <= d2 (they are older), the k-th dropped when full. The caller has
    checked it belongs (count < k, or d2 below the k-th). Returns the new count."""
    pos = count if count < k else k - 1
    while pos > 0 and top_d[base + pos - 1] > d2:
        if pos < k:
            top_d[base + pos] = top_d[base + pos - 1]
            top_seq[base + pos] = top_seq[base + pos - 1]
            top_oid[base + pos] = top_oid[base + pos - 1]
        pos -= 1
    top_d[base + pos] = d2
    top_seq[base + pos] = seq
    top_oid[base + pos] = oid
    return count + 1 if count < k else count
