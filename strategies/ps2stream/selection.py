"""Cell selection for PS2Stream's Minimum Cost Migration (Chen et al., Definition 4, Section V-A).

Phase II of the local adjustment picks cells of the most loaded worker whose loads L_g reach tau
at the least total size S_g. The four methods are pure functions of (L_g, S_g, tau), kept apart
from the adjusters so they can be checked against brute force: `select_dp` the exact knapsack DP
(Section V-A1), `select_gr` the greedy (Section V-A2, Figure 5), `select_si` largest cells first
and `select_ra` random cells (the comparison methods of Section VI-D).

All four return the chosen indices. Only cells with L_g > 0 are candidates (a cell without load
cannot help). When tau <= 0 nothing is needed, and when even all cells together carry less than
tau no set satisfies Definition 4: both return an empty selection.
"""

from __future__ import annotations

import numpy as np
from numba import njit

EMPTY = np.zeros(0, np.int64)


class SelectionRefused(ValueError):
    """The DP would need more memory than its budget (Section VI-D: DP runs out of memory)."""


def _candidates(load: np.ndarray, tau: float) -> np.ndarray | None:
    load = np.asarray(load, np.float64)
    cand = np.flatnonzero(load > 0)
    if tau <= 0 or len(cand) == 0 or load[cand].sum() < tau:
        return None
    return cand


def _prefix_until(order: np.ndarray, load: np.ndarray, tau: float) -> np.ndarray:
    """The shortest prefix of `order` whose load reaches tau."""
    k = int(np.searchsorted(np.cumsum(load[order]), tau, side="left"))
    return order[: k + 1]


@njit(cache=True)
def _greedy_scan(order, load, size, tau):
    """Section V-A2: scan by relative cost; a cell that keeps the running load below tau joins GS,
    any other cell g' is a GL candidate, GS_1..GS_t + {g'}; keep the cheapest candidate. Stops when
    the GS cost alone reaches the best candidate's (no later candidate can be cheaper)."""
    acc_l = 0.0
    acc_s = 0.0
    best_s = np.inf
    best_n = -1
    best_g = -1
    gs = np.empty(len(order), np.int64)
    n_gs = 0
    for g in order:
        if acc_s >= best_s:
            break
        if acc_l + load[g] < tau:
            gs[n_gs] = g
            n_gs += 1
            acc_l += load[g]
            acc_s += size[g]
        elif acc_s + size[g] < best_s:
            best_s = acc_s + size[g]
            best_n = n_gs
            best_g = g
    if best_g < 0:
        return np.empty(0, np.int64)
    out = np.empty(best_n + 1, np.int64)
    out[:best_n] = gs[:best_n]
    out[best_n] = best_g
    return out


def select_gr(load, size, tau: float) -> np.ndarray:
    """GR (Section V-A2): cells in ascending S_g / L_g (ties by index), GS/GL candidates of Fig. 5."""
    load = np.asarray(load, np.float64)
    size = np.asarray(size, np.float64)
    cand = _candidates(load, tau)
    if cand is None:
        return EMPTY
    order = cand[np.argsort(size[cand] / load[cand], kind="stable")]
    return np.sort(_greedy_scan(order, load, size, float(tau)))


def select_si(load, size, tau: float) -> np.ndarray:
    """SI (Section VI-D): cells in descending size until the load reaches tau."""
    load = np.asarray(load, np.float64)
    cand = _candidates(load, tau)
    if cand is None:
        return EMPTY
    order = cand[np.argsort(-np.asarray(size, np.float64)[cand], kind="stable")]
    return np.sort(_prefix_until(order, load, tau))


def select_ra(load, size, tau: float, rng: np.random.Generator) -> np.ndarray:
    """RA (Section VI-D): cells in random order until the load reaches tau."""
    load = np.asarray(load, np.float64)
    cand = _candidates(load, tau)
    if cand is None:
        return EMPTY
    return np.sort(_prefix_until(cand[rng.permutation(len(cand))], load, tau))


def dp_table_bytes(n: int, p: int) -> int:
    """Memory of the DP's A(i, j) table: (n + 1) x (P + 1) float64."""
    return (n + 1) * (p + 1) * 8


def select_dp(load, size, tau: float, size_unit: float = 1.0, max_table_bytes: int = 256 << 20) -> np.ndarray:
    """DP (Section V-A1): A(i, j) = the largest load of a subset of cells 1..i of total size <= j,
    A(i, j) = A(i-1, j) if j < S_i else max(A(i-1, j), A(i-1, j - S_i) + L_i) (the paper's "j <= S_i"
    would forbid a cell that exactly fills j: read as the knapsack's "<"), for j in [0, P]; the
    answer is the smallest j with A(n, j) >= tau, recovered by back-tracking. Sizes are bucketed to
    integers, ceil(S_g / size_unit), so the result is optimal for the bucketed sizes; P is the GR
    solution's bucketed cost (an upper bound of the minimum). Raises SelectionRefused when the
    table would exceed max_table_bytes."""
    load = np.asarray(load, np.float64)
    cand = _candidates(load, tau)
    if cand is None:
        return EMPTY
    sizes = np.ceil(np.maximum(np.asarray(size, np.float64)[cand], 0.0) / float(size_unit)).astype(np.int64)
    loads = load[cand]
    n = len(cand)
    upper = int(sizes[select_gr(loads, sizes, tau)].sum())
    need = dp_table_bytes(n, upper)
    if need > max_table_bytes:
        raise SelectionRefused(
            f"dp: the knapsack table would need {n + 1} x {upper + 1} entries = {need / 2**20:.1f} MiB "
            f"({n} cells, P = {upper} size units of {size_unit:g} bytes), above the budget "
            f"max_table_bytes = {max_table_bytes / 2**20:.1f} MiB; use adjust=gr, or raise size_unit or "
            f"max_table_bytes")
    a = np.zeros((n + 1, upper + 1))
    for i in range(1, n + 1):
        s = sizes[i - 1]
        a[i] = a[i - 1]
        if s <= upper:
            np.maximum(a[i - 1, s:], a[i - 1, : upper + 1 - s] + loads[i - 1], out=a[i, s:])
    slack = 1e-12 * float(loads.sum())  # sums in another order may differ in the last bits
    reach = np.flatnonzero(a[n] >= tau - slack)
    j = int(reach[0])
    chosen = []
    for i in range(n, 0, -1):
        if a[i, j] != a[i - 1, j]:
            chosen.append(i - 1)
            j -= int(sizes[i - 1])
    return np.sort(cand[np.asarray(chosen, np.int64)]) if chosen else EMPTY
