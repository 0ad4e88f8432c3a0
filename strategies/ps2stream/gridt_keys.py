"""The sorted key arrays that store gridt's H1 and H2 (PS2Stream, Section IV-C): keys owner << 32 |
term (owner = term map for H1, cell for H2), searched, grown and cut into per-owner CSR runs by
the helpers here, so the router and its adjusters share one key layout (TERM_BITS, TERM_MASK).
"""

from __future__ import annotations

import numpy as np
from numba import njit

TERM_BITS = np.int64(32)
TERM_MASK = np.int64(0xFFFFFFFF)


@njit(cache=True)
def merge_sorted(keys, a, b, new_keys, new_a, new_b):
    """Merge two sorted, disjoint key arrays with two int64 columns each."""
    n, m = len(keys), len(new_keys)
    ok = np.empty(n + m, np.int64)
    oa = np.empty(n + m, np.int64)
    ob = np.empty(n + m, np.int64)
    i = j = 0
    for k in range(n + m):
        if j == m or (i < n and keys[i] < new_keys[j]):
            ok[k], oa[k], ob[k] = keys[i], a[i], b[i]
            i += 1
        else:
            ok[k], oa[k], ob[k] = new_keys[j], new_a[j], new_b[j]
            j += 1
    return ok, oa, ob


def first_per_key(keys: np.ndarray, seqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys (sorted) with the smallest seq of each. (An unstable sort plus a grouped
    minimum: a stable argsort measured 2.5x slower.)"""
    if len(keys) == 0:
        return keys, seqs
    order = np.argsort(keys)
    k, s = keys[order], seqs[order]
    start = np.flatnonzero(np.concatenate([[True], k[1:] != k[:-1]]))
    return k[start], np.minimum.reduceat(s, start)


def sorted_find(keys: np.ndarray, probe: np.ndarray) -> np.ndarray:
    """Index of each probe in the sorted keys, -1 when absent."""
    if len(keys) == 0:
        return np.full(len(probe), -1, np.int64)
    pos = np.minimum(np.searchsorted(keys, probe), len(keys) - 1)
    return np.where(keys[pos] == probe, pos, -1)


def owner_ptr(keys: np.ndarray, n_owner: int) -> np.ndarray:
    """CSR pointers of sorted (owner << 32 | term) keys."""
    return np.searchsorted(keys, np.arange(n_owner + 1, dtype=np.int64) << TERM_BITS).astype(np.int64)


def sorted_insert(keys: np.ndarray, cols: tuple, new_keys: np.ndarray, new_cols: tuple) -> tuple:
    """Insert sorted new keys (absent from keys) and their two columns, keeping keys sorted."""
    k, a, b = merge_sorted(keys, cols[0], cols[1], np.ascontiguousarray(new_keys, np.int64),
                           np.ascontiguousarray(new_cols[0], np.int64), np.ascontiguousarray(new_cols[1], np.int64))
    return k, (a, b)


def slots_of_workers(tmap: np.ndarray, workers: np.ndarray, tmc_ptr: np.ndarray, tmc_worker: np.ndarray) -> np.ndarray:
    """Slot of each (term map, worker) pair: the worker's first position in the map's worker list."""
    n_maps = len(tmc_ptr) - 1
    owner = np.repeat(np.arange(n_maps, dtype=np.int64), np.diff(tmc_ptr))
    keys = (owner << TERM_BITS) | tmc_worker
    order = np.argsort(keys, kind="stable")
    probe = (np.asarray(tmap, np.int64) << TERM_BITS) | workers
    pos = np.minimum(np.searchsorted(keys[order], probe), max(len(keys) - 1, 0))
    if len(probe) and (len(keys) == 0 or np.any(keys[order][pos] != probe)):
        raise ValueError("gridt: a term map entry's worker must be one of the map's workers")
    return order[pos] - tmc_ptr[tmap] if len(probe) else np.zeros(0, np.int64)
