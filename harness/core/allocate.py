"""Allocating loads to workers: LPT greedy and Karmarkar-Karp multi-way number partitioning.

LPT (longest processing time first): items by load descending, each to the least loaded
worker; ties to the lowest id.

SSTD (Section 4.1.2, "Allocating the leaf nodes of the QT-tree to workers") splits the leaf
workloads into k subsets with the Karmarkar-Karp differencing method [Karmarkar & Karp 1982]. The
paper does not say which k-way variant; this is the greedy (not complete) k-way largest
differencing method (LDM) as described by Korf (2009) and analysed by Michiels et al. (2012):

    every number a becomes a k-tuple of subsets (a, 0, ..., 0); while more than one tuple is left,
    take the two tuples with the largest spread (max sum - min sum), join them by pairing the
    heaviest subset of one with the lightest of the other, the second heaviest with the second
    lightest, and so on; the last tuple is the partition.

Its makespan is at most (4/3 - 1/(3k)) times the optimum (Michiels et al.), the same guarantee
as LPT greedy; in practice it is usually better. Subsets are linked lists of items, so joining is
O(k log k) and the whole method O(n log n + n k log k). Ties break by item order, subset size and
creation order, so the result is deterministic. Reusable by adjusters: `karmarkar_karp` takes any
non-negative loads and returns an item -> subset array.
"""

from __future__ import annotations

import heapq

import numpy as np
from numba import njit


def karmarkar_karp(loads, k: int) -> np.ndarray:
    """Partition items with the given loads into k subsets; returns the subset id of each item.

    Subset ids are ordered by subset load, heaviest first (id 0), so callers that map subsets to
    workers get a stable, meaningful order. Zero loads are allowed (they spread by subset size).
    """
    loads = np.asarray(loads, dtype=np.float64).ravel()
    k = int(k)
    if k < 1:
        raise ValueError(f"karmarkar_karp needs k >= 1 subsets, got {k}")
    if np.any(~np.isfinite(loads)) or np.any(loads < 0):
        raise ValueError("karmarkar_karp needs finite, non-negative loads")
    n = len(loads)
    if n == 0:
        return np.zeros(0, np.int64)
    if k == 1:
        return np.zeros(n, np.int64)

    nxt = np.full(n, -1, np.int64)  # linked lists of items, one per subset
    tuples: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # sums, counts, heads, tails
    heap: list[tuple[float, int]] = []
    for i in np.argsort(-loads, kind="stable"):  # heaviest first: earlier seq wins ties
        sums = np.zeros(k)
        counts = np.zeros(k, np.int64)
        heads = np.full(k, -1, np.int64)
        tails = np.full(k, -1, np.int64)
        sums[0], counts[0], heads[0], tails[0] = loads[i], 1, i, i
        heap.append((-float(loads[i]), len(tuples)))
        tuples.append((sums, counts, heads, tails))
    heapq.heapify(heap)

    while len(heap) > 1:
        _, ia = heapq.heappop(heap)
        _, ib = heapq.heappop(heap)
        a, b = tuples[ia], tuples[ib]
        tuples[ia] = tuples[ib] = None  # type: ignore[call-overload]
        oa = np.lexsort((a[1], a[0]))[::-1]  # a heaviest first (by sum, then size)
        ob = np.lexsort((b[1], b[0]))  # b lightest first
        sums = a[0][oa] + b[0][ob]
        counts = a[1][oa] + b[1][ob]
        heads = a[2][oa].copy()
        tails = a[3][oa].copy()
        bh, bt = b[2][ob], b[3][ob]
        for j in range(k):  # concatenate list a_j with list b_j
            if bh[j] < 0:
                continue
            if heads[j] < 0:
                heads[j] = bh[j]
            else:
                nxt[tails[j]] = bh[j]
            tails[j] = bt[j]
        sums -= sums.min()  # only differences matter; keeps numbers small
        heapq.heappush(heap, (-(float(sums.max())), len(tuples)))
        tuples.append((sums, counts, heads, tails))

    sums, counts, heads, _ = tuples[heap[0][1]]
    out = np.empty(n, np.int64)
    for rank, j in enumerate(np.lexsort((counts, sums))[::-1]):
        item = heads[j]
        while item >= 0:
            out[item] = rank
            item = nxt[item]
    return out


def subset_loads(loads, assignment, k: int) -> np.ndarray:
    """Total load of each of the k subsets of an assignment."""
    return np.bincount(np.asarray(assignment, np.int64), weights=np.asarray(loads, np.float64), minlength=k)[:k]


def makespan(loads, assignment, k: int) -> float:
    """The largest subset load: the objective both LDM and LPT approximate."""
    return float(subset_loads(loads, assignment, k).max(initial=0.0))


# --- greedy (Graham's LPT and its in-order form) ---------------------------------------------------
# One kernel serves every greedy in the project: PS2Stream's and DkM-SKS's LPT (ties to the lowest
# id), DkM-SKS's Algorithm 3 (a given order), and the splits that must not leave a bin empty while
# items remain (kdt's text split, Hybrid-Partition's four subsets: ties to the bin with fewer items).

@njit(cache=True)
def greedy_onto(order, loads, totals, sizes, size_ties):
    """Items in `order`, each to the bin of least total so far; ties go to the bin with fewer
    items first when `size_ties`, then to the lowest id. `totals` and `sizes` (one per bin,
    possibly already loaded) are updated in place. Returns the bin per item (items not in
    `order` are left unset)."""
    out = np.empty(len(loads), np.int64)
    for k in range(len(order)):
        i = order[k]
        best = 0
        for w in range(1, len(totals)):
            if totals[w] < totals[best] or (size_ties and totals[w] == totals[best] and sizes[w] < sizes[best]):
                best = w
        out[i] = best
        totals[best] += loads[i]
        sizes[best] += 1
    return out


@njit(cache=True)
def greedy_least_loaded(order, loads, totals):
    """Items in `order`, each to the worker of least total so far (ties: lowest id); `totals` is
    updated in place. Algorithm 1 of DkM-SKS when `order` sorts by load descending, Algorithm 3
    in any other order."""
    return greedy_onto(order, loads, totals, np.zeros(len(totals), np.int64), False)


@njit(cache=True)
def lpt_onto(loads, totals):
    """Longest-processing-time greedy onto workers that already carry `totals` (updated in place):
    items by load descending, each to the least loaded worker; ties -> lowest id."""
    return greedy_least_loaded(np.argsort(-loads, kind="mergesort"), loads, totals)


@njit(cache=True)
def lpt_assign(loads, n_workers):
    """Longest-processing-time greedy from empty workers; deterministic (ties -> lowest id)."""
    return lpt_onto(loads, np.zeros(n_workers, np.float64))


@njit(cache=True)
def lpt_spread(loads, p):
    """LPT into p bins with ties to the bin with fewer items, then the lowest id, so zero-load
    items still spread and no bin stays empty while items remain."""
    return greedy_onto(np.argsort(-loads, kind="mergesort"), loads, np.zeros(p, np.float64), np.zeros(p, np.int64),
                       True)


@njit(cache=True)
def greedy_per_group(group, loads, p):
    """The spreading greedy (ties: fewer items, then lowest id) into p bins, in the given order,
    restarted at each run of equal `group` (items sorted by group)."""
    out = np.empty(len(group), np.int64)
    lo = 0
    for i in range(1, len(group) + 1):
        if i == len(group) or group[i] != group[lo]:
            part = greedy_onto(np.arange(i - lo), loads[lo:i], np.zeros(p, np.float64), np.zeros(p, np.int64), True)
            out[lo:i] = part
            lo = i
    return out
