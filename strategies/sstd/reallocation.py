"""SSTD's workload reallocation (Chen et al., PVLDB 2020, Section 5.2) over per-unit statistics,
so PM and FM work on any router with units (and FG reuses FM on its rebuilt tree).

- Imbalance (Definition 4): L_max / L_min over the workers' summed leaf loads.
- FM ("workload reallocation"): Karmarkar-Karp splits all leaves (units) into m subsets, then the
  assignment subsets -> workers that moves the fewest continuous queries (Hungarian /
  Jonker-Volgenant, `scipy.optimize.linear_sum_assignment`), cost(X_j -> W_i) = sum over leaves
  P in X_j of P's queries not already on W_i.
- PM: the same on the leaves of the most and the least loaded worker only, 2-way KK and the
  cheaper of the two 2x2 assignments.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from harness.core.allocate import karmarkar_karp
from strategies.adjust_base import EpochStats, unit_table


def imbalance(loads: np.ndarray) -> float:
    """L_max / L_min (Definition 4): inf when some worker has no load and another has, 1 when none has."""
    loads = np.asarray(loads, np.float64)
    if len(loads) == 0 or loads.max() <= 0.0:
        return 1.0
    hi, lo = float(loads.max()), float(loads.min())
    if hi <= 0.0:
        return 1.0
    return hi / lo if lo > 0.0 else float("inf")


def unit_stats(stats: EpochStats, n_units: int) -> tuple[np.ndarray, np.ndarray]:
    """Per unit: load, and the continuous queries it stores now (queries_end: what moving it costs)."""
    table = unit_table(stats)
    load = np.zeros(n_units)
    queries = np.zeros(n_units)
    if len(table):
        idx = table.index.to_numpy(np.int64)
        ok = (idx >= 0) & (idx < n_units)
        load[idx[ok]] = table["load"].to_numpy(np.float64)[ok]
        queries[idx[ok]] = table["queries_end"].to_numpy(np.float64)[ok]
    return load, queries


def worker_unit_loads(stats: EpochStats) -> np.ndarray:
    """Per worker, the sum of the loads of the units it held in the epoch."""
    u = stats.units
    if len(u) == 0:
        return np.zeros(stats.n_workers)
    return np.bincount(u["worker"].to_numpy(np.int64), weights=u["load"].to_numpy(np.float64),
                       minlength=stats.n_workers)[:stats.n_workers]


def leafwise_cost(queries: np.ndarray, owner: np.ndarray, m: int) -> np.ndarray:
    """cost[u, i] = queries of unit u not on worker i: all of them unless i owns u (Section 5.2's
    transfer cost, the sum of |P.Q| over the leaves that change worker)."""
    cost = np.repeat(np.asarray(queries, np.float64)[:, None], m, axis=1)
    cost[np.arange(len(owner)), owner] = 0.0
    return cost


def assign_subsets(subset: np.ndarray, cost: np.ndarray, k: int, workers: np.ndarray) -> np.ndarray:
    """The bijection subsets -> `workers` (k of each) of least summed cost[u, worker] (the
    assignment problem; scipy's linear_sum_assignment is the Jonker-Volgenant solver the paper
    cites as [9]). Returns the worker of each subset."""
    c = np.zeros((k, len(workers)))
    for i, w in enumerate(workers):
        c[:, i] = np.bincount(subset, weights=cost[:, w], minlength=k)[:k]
    rows, cols = linear_sum_assignment(c)
    out = np.empty(k, np.int64)
    out[rows] = np.asarray(workers, np.int64)[cols]
    return out


def fm_owner(load: np.ndarray, cost: np.ndarray, home: np.ndarray, m: int) -> np.ndarray:
    """FM: KK over the units with load into m subsets, then the least-cost assignment. Units
    without load do not matter to balance, so they stay home (their current worker, when it
    has one; else the worker already holding most of their queries)."""
    owner = np.where(home >= 0, home, np.argmin(cost, axis=1)).astype(np.int64)
    pos = np.flatnonzero(load > 0)
    if len(pos):
        sub = karmarkar_karp(load[pos], m)
        owner[pos] = assign_subsets(sub, cost[pos], m, np.arange(m))[sub]
    return owner


def pm_owner(load: np.ndarray, cost: np.ndarray, owner: np.ndarray, m: int) -> np.ndarray | None:
    """PM: the leaves of the most and the least loaded worker re-split by 2-way KK, and the
    cheaper of the two ways to give the halves to those workers. None if they are one worker."""
    wl = np.bincount(owner, weights=load, minlength=m)
    hot, cold = int(np.argmax(wl)), int(np.argmin(wl))
    if hot == cold:
        return None
    both = np.flatnonzero(((owner == hot) | (owner == cold)) & (load > 0))
    new = owner.copy()
    if len(both):
        sub = karmarkar_karp(load[both], 2)
        new[both] = assign_subsets(sub, cost[both], 2, np.array([hot, cold]))[sub]
    return new


def ordered(ratio: float, loads: np.ndarray) -> tuple[float, float]:
    """What 'better balanced' compares: the ratio, then L_max (the ratio is inf while a worker is idle)."""
    return ratio, float(np.max(loads, initial=0.0))
