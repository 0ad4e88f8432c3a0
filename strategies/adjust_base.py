"""The load-adjustment contract: after an epoch an Adjuster reads the monitor's statistics and may
return a MigrationPlan (what moves where, and the router every dispatcher switches to).

Units. A router that can be adjusted names its *migration units* (grid cells, tree leaves,
text parts of a cell, A-Grid fine cells): `Router.units(ev, rows)` gives the (row, unit) pairs
where each event is stored or matched, `Router.unit_owner()` the worker of each unit, and
`Router.with_unit_owner(owner)` a copy with units reassigned. The routing of an event is then
exactly the owners of its units. A plan names units of the *new* router.

The harness (harness/engine/migration.py) checks a plan before anything moves: no unit on two workers,
workers in range, every live subscription placed somewhere, and every subscription that lands on
a worker which did not hold it belongs to a unit the plan declares as moving there. Then it
re-routes the workers' stored subscriptions under the new router (a Spark job), which is what
makes results stay exact across a migration whatever the adjuster did.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from harness.core.events import Events
from harness.core.params import ParamsMixin
from strategies.base import FitContext, Router

# Columns of EpochStats.units: one row per (unit, worker) that saw objects or stores queries.
UNIT_COLUMNS = ("unit", "worker", "objects", "updates", "queries_start", "queries_end", "queries", "query_bytes",
                "checks", "busy_s", "load")


@dataclass
class EpochStats:
    """What the monitor knows after an epoch (per worker and per unit), as the papers' systems do.

    units: UNIT_COLUMNS. `queries` is the average of the stored subscriptions at the epoch's start
    and end (PS2Stream Definition 3's n_q); `load` = objects * queries + objects + updates (the
    cell load of Definition 3 plus the Definition 1 per-event terms, every c = 1); `checks` the
    work of the unit's objects (1 + candidate checks each, the index's per-object work); `busy_s` the worker's measured busy time apportioned
    to its units by checks; `query_bytes` the size of the unit's stored subscriptions (S_g).
    workers: the per-worker table of harness/report/metrics.py for this epoch (worker, objects, inserts,
    deletes, updates, candidates, results, busy_s, restored, load, ...).
    recent: the epoch's events (a recent sample for repartitioning).
    live: the subscriptions alive at the epoch's end (their insert events).
    """

    epoch: int
    units: pd.DataFrame
    workers: pd.DataFrame
    recent: Events
    live: Events
    n_workers: int

    def worker_loads(self, column: str = "load") -> np.ndarray:
        loads = np.zeros(self.n_workers)
        loads[self.workers["worker"].to_numpy(np.int64)] = self.workers[column].to_numpy(np.float64)
        return loads


@dataclass
class MigrationPlan:
    """The new router, and the units (of the new router) whose subscriptions move: unit[i] goes
    from src[i] (-1 when it gathers from several workers, e.g. a merge) to dst[i]."""

    router: Router
    unit: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)  # what the adjuster did (phase, tau, operation)

    def __post_init__(self):
        self.unit = np.asarray(self.unit, np.int64)
        self.src = np.asarray(self.src, np.int64)
        self.dst = np.asarray(self.dst, np.int64)


def moves_between(old_owner: np.ndarray, new_owner: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(unit, src, dst) of the units whose owner changes, for plans that only reassign units."""
    old_owner = np.asarray(old_owner, np.int64)
    new_owner = np.asarray(new_owner, np.int64)
    moved = np.flatnonzero(old_owner != new_owner)
    return moved, old_owner[moved], new_owner[moved]


def reassignment(router: Router, new_owner: np.ndarray, **info) -> MigrationPlan | None:
    """The plan that moves units to `new_owner` on the same unit structure (None if nothing moves)."""
    unit, src, dst = moves_between(router.unit_owner(), new_owner)
    if len(unit) == 0:
        return None
    return MigrationPlan(router.with_unit_owner(new_owner), unit, src, dst, info)


def unit_table(stats: EpochStats) -> pd.DataFrame:
    """Per unit (summed over workers; a unit has one owner, so usually one row): the columns of
    UNIT_COLUMNS, index = unit id (bincount, not groupby: fine grids have a million units)."""
    units = stats.units
    cols = list(UNIT_COLUMNS[2:])
    if len(units) == 0:
        return pd.DataFrame(columns=cols, dtype=float)
    ids, inverse = np.unique(units["unit"].to_numpy(np.int64), return_inverse=True)
    sums = {c: np.bincount(inverse, weights=units[c].to_numpy(np.float64), minlength=len(ids)) for c in cols}
    return pd.DataFrame(sums, index=pd.Index(ids, name="unit"))


class Adjuster(ParamsMixin, ABC):
    """One load-adjustment method. An instance lives for one run (it may keep state across epochs).

    `strategies`: the strategy names it can adjust (None: any whose router has units and
    supports `with_unit_owner`). `adjust` returns None when the load needs no change."""

    kind: ClassVar[str] = "adjuster"
    name: ClassVar[str]
    strategies: ClassVar[frozenset[str] | None] = None

    def __init__(self, params: Any, n_workers: int, context: FitContext, strategy: str):
        self.params = params
        self.n_workers = int(n_workers)
        self.context = context
        self.strategy = strategy
        self.rng = np.random.default_rng([context.seed, 0xAD])

    @classmethod
    def applies_to(cls, strategy: str) -> bool:
        return cls.strategies is None or strategy in cls.strategies

    @classmethod
    def check_params(cls, params: Any) -> None:
        """Refuse parameter values this adjuster cannot use: a ValueError naming the field, the
        value and what is allowed. Validation calls it on `adjust.params` before Spark starts, and an
        adjuster's constructor may call it too. Default: any values."""

    @classmethod
    def check_run(cls, cfg, job) -> None:
        """Refuse a job this adjuster cannot run for a reason beyond its own parameters (those are
        `check_params`'), before Spark starts: a ValueError. `cfg` is the whole composed config,
        `job` what it asks for, resolved once (harness/run/config.py Job). Default: nothing to refuse."""

    @abstractmethod
    def adjust(self, router: Router, stats: EpochStats) -> MigrationPlan | None: ...


class NoAdjustment(Adjuster):
    """`none`: the static baseline every adjustment plot compares with."""

    name = "none"

    def adjust(self, router: Router, stats: EpochStats) -> MigrationPlan | None:
        return None


def _discover() -> dict[str, type[Adjuster]]:
    from strategies.registry import discover

    return discover(Adjuster)


def adjuster_names() -> list[str]:
    return list(_discover())


def get_adjuster(name: str) -> type[Adjuster]:
    table = _discover()
    if name not in table:
        raise ValueError(f"unknown adjuster {name!r}; valid adjusters: {', '.join(table)}")
    return table[name]
