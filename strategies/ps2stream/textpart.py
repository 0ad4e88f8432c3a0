"""Pieces shared by the load- and co-occurrence-aware text partitionings (text_hypergraph,
text_metric): the sample's multicast items as term sets, deduplicated; water filling of worker
capacity; LPT for the terms a partitioner leaves without a worker; a term map router that reports
how its map was built."""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.events import AND, Events, csr_take
from harness.core import allocate
from strategies.load import sample_parts


# --- the sample's multicast items as term sets ---------------------------------------------------

def sample_items(sample: Events) -> tuple[np.ndarray, np.ndarray]:
    """Term sets (CSR) of the sample items a TermMapRouter multicasts: objects, OR subscriptions."""
    objs, qs = sample_parts(sample)
    rows = np.concatenate([objs, qs[sample.op[qs] != AND]])
    return csr_take(sample.offsets, sample.values, rows)


def drop_terms(offsets: np.ndarray, values: np.ndarray, drop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same sets without the terms where `drop[term]` is true."""
    n = len(offsets) - 1
    keep = ~drop[values]
    row = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    lengths = np.bincount(row[keep], minlength=n)
    new_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    return new_offsets, values[keep]


@njit(cache=True)
def _set_hashes(offsets, values):
    out = np.empty(len(offsets) - 1, np.uint64)
    for i in range(len(offsets) - 1):
        h = np.uint64(14695981039346656037)
        for j in range(offsets[i], offsets[i + 1]):
            h = (h ^ np.uint64(values[j] + 1)) * np.uint64(1099511628211)
        out[i] = h ^ np.uint64(offsets[i + 1] - offsets[i])
    return out


@njit(cache=True)
def _group_equal_sets(order, hashes, offsets, values):
    """Group ids of rows visited in hash order: a row joins the current group if its terms equal
    the group's first row (a hash collision only splits a group, it never merges two sets)."""
    group = np.empty(len(order), np.int64)
    g = -1
    first = -1
    for k in range(len(order)):
        r = order[k]
        same = False
        if first >= 0 and hashes[r] == hashes[first]:
            n = offsets[r + 1] - offsets[r]
            if n == offsets[first + 1] - offsets[first]:
                same = True
                for j in range(n):
                    if values[offsets[r] + j] != values[offsets[first] + j]:
                        same = False
                        break
        if not same:
            g += 1
            first = r
        group[r] = g
    return group


def dedup_sets(offsets: np.ndarray, values: np.ndarray, weights: np.ndarray):
    """Merge identical term sets: (offsets, values, summed weights), in first-occurrence order."""
    if len(offsets) <= 2:
        return offsets, values, np.asarray(weights, np.float64)
    hashes = _set_hashes(offsets, values)
    group = _group_equal_sets(np.argsort(hashes, kind="stable"), hashes, offsets, values)
    _, first_rows, inverse = np.unique(group, return_index=True, return_inverse=True)
    # renumber groups in first-occurrence order so the output does not depend on hash values
    order = np.argsort(first_rows, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    w = np.bincount(rank[inverse], weights=weights, minlength=len(order))
    new_offsets, new_values = csr_take(offsets, values, first_rows[order])
    return new_offsets, new_values, w


@njit(cache=True)
def water_level(totals, remaining):
    """The level x at which pouring `remaining` into the workers below x fills them exactly:
    sum(max(0, x - totals)) = remaining. Workers already above x get nothing."""
    t = np.sort(totals)
    acc = 0.0
    for i in range(len(t)):
        acc += t[i]
        level = (remaining + acc) / (i + 1)
        if i == len(t) - 1 or level <= t[i + 1]:
            return level
    return 0.0


def spread_unseen(term_worker: np.ndarray, term_df: np.ndarray, n_workers: int) -> None:
    """Terms without a worker yet get one by LPT on their document frequency (+1, so that terms of
    zero frequency spread too instead of all landing on worker 0)."""
    unseen = np.flatnonzero(term_worker < 0)
    if len(unseen):
        term_worker[unseen] = allocate.lpt_assign(np.asarray(term_df, np.float64)[unseen] + 1.0, n_workers)
