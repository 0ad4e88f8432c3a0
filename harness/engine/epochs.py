"""A run as a sequence of epochs, and the adjustment step between two of them.

Epoch 0 is the warm-up (the strategies' fitting sample). The measured stream is cut by event
count (`epochs.by=count`, `epochs.size` events each; a remainder under half an epoch joins the
last one) or by event time (`epochs.by=time`, `epochs.size` seconds of `ts` each); size 0 keeps
it one epoch, the static experiment. After each measured epoch but the last, the adjuster sees
the monitor's statistics and may return a plan; `plan_step` times its selection and checks the
plan before anything moves. Shared by the Spark runner and the in-process simulator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from harness.core.events import Events
from harness.core.timing import work_clock
from harness.engine.migration import live_queries, validate_plan
from harness.engine.monitor import units_frame, workers_frame
from strategies.adjust_base import Adjuster, EpochStats, MigrationPlan

EPOCH_BY = ("count", "time")


def epoch_bounds(events: Events, warmup: int, by: str = "count", size: float = 0) -> list[tuple[int, int, int]]:
    """(epoch, first seq, end seq) of the warm-up and of each measured epoch."""
    n = len(events)
    if by not in EPOCH_BY:
        raise ValueError(f"epochs.by={by!r} is invalid; allowed: {', '.join(EPOCH_BY)}")
    if size <= 0 or n <= warmup:
        cuts = [warmup, n]
    elif by == "count":  # a remainder shorter than half an epoch joins the last one
        cuts = list(range(warmup, n, int(size)))
        if len(cuts) > 1 and n - cuts[-1] < size / 2:
            cuts.pop()
        cuts.append(n)
    else:
        ts = events.ts[warmup:]
        edges = np.arange(ts[0], ts[-1], float(size))[1:]
        cuts = [warmup, *(warmup + np.searchsorted(ts, edges, side="left")).tolist(), n]
    cuts = sorted(set(cuts))
    bounds = [(0, 0, warmup)]
    bounds += [(i + 1, lo, hi) for i, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:])) if hi > lo]
    return bounds


def epoch_stats(epoch: int, unit_tables: list[pa.Table], worker_stats: dict[int, dict], events: Events,
                lo: int, hi: int, n_workers: int) -> EpochStats:
    """What an adjuster sees after an epoch."""
    return EpochStats(epoch=epoch, units=units_frame(unit_tables), workers=workers_frame(worker_stats, n_workers),
                      recent=events.take(np.arange(lo, hi)), live=live_queries(events, hi), n_workers=n_workers)


@dataclass
class Step:
    plan: MigrationPlan | None
    select_s: float


def plan_step(adjuster: Adjuster, router, stats: EpochStats) -> Step:
    """Ask the adjuster (timed in CPU time, harness.core.timing.work_clock: the plan selection
    time) and check its plan against the live set."""
    t0 = work_clock()
    plan = adjuster.adjust(router, stats)
    select_s = work_clock() - t0
    if plan is None:
        return Step(None, select_s)
    validate_plan(plan, router, stats.live, stats.n_workers)  # raises InvalidPlanError
    return Step(plan, select_s)


def epoch_row(epoch: int, n_events: int, worker_stats: dict[int, dict], route_s: float, n_dispatchers: int,
              n_workers: int, unit_tables: list[pa.Table] | None = None, observe_s: float = 0.0) -> dict:
    """Per-epoch series: throughput (events / bottleneck, the migration stall included) and balance.
    A dispatcher's time is its share of the routing plus the whole routing-state upkeep
    (`observe_s`): every dispatcher keeps its own copy of the routing state current."""
    table = workers_frame(worker_stats, n_workers)
    busy = (table["busy_s"] + table["pause_s"]).to_numpy()
    bottleneck = max(route_s / n_dispatchers + observe_s, float(busy.max()) if len(busy) else 0.0, 1e-12)
    loads = table["load"].to_numpy()
    row = {
        "epoch": epoch, "events": n_events, "throughput_eps": n_events / bottleneck,
        "load_max_min": float(loads.max() / loads.min()) if loads.min() > 0 else float("inf"),
        "load_max_mean": float(loads.max() / loads.mean()) if loads.mean() > 0 else float("nan"),
        "busy_max_s": float(busy.max()), "pause_max_s": float(table["pause_s"].max()),
        # the least busy worker: busy_max_s / busy_min_s is the epoch's balance, which an
        # adjustment claim reads on the epochs after the move (harness/report/claims/preconditions.py)
        "busy_min_s": float(busy.min()),
    }
    if unit_tables:  # the balance of the monitor's unit loads, what SSTD's detection compares
        units = units_frame(unit_tables)
        per_worker = np.bincount(units["worker"].to_numpy(), weights=units["load"].to_numpy(), minlength=n_workers)
        row["unit_load_max_min"] = (float(per_worker.max() / per_worker.min()) if per_worker.min() > 0
                                    else float("inf"))
    return row


def stall(res, pause: dict[int, float]) -> None:
    """Charge a migration's stall to the workers it involved: as busy time before the epoch
    (throughput) and as a wait before each one's first event (latency)."""
    for w, p in pause.items():
        res.worker_stats.setdefault(w, {})["pause_s"] = p
        if w in res.service and len(res.service[w][1]):
            seqs, service = res.service[w]
            service = service.copy()
            service[0] += p
            res.service[w] = (seqs, service)


def migration_pause(step, mig) -> dict[int, float]:
    """Per worker stall of a migration: its own moving work (sending or receiving), plus the
    deciding time on the workers the load leaves (PS2Stream: the overloaded worker selects the
    cells it gives away; a plan gathering from several workers stalls them all). The deciding
    time is the part of the plan step the adjuster says its paper's workers do (`stall_s` in the
    plan's info: PS2Stream's Phase I trials and Phase II selection), else the whole plan step
    (`select_s`), which also counts the harness building the new router object."""
    sources = {w for w in step.plan.src.tolist() if w >= 0}
    if (step.plan.src < 0).any():
        sources |= set(mig.pause_s)
    deciding = float(step.plan.info.get("stall_s", step.select_s))
    pause = dict(mig.pause_s)
    for w in sources:
        pause[w] = pause.get(w, 0.0) + deciding
    return dict(sorted(pause.items()))


