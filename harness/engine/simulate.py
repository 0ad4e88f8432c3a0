"""The epoch loop in process, without Spark: the same routing, worker indexes, monitor, plan
checks and state moves as the Spark runner, on one core. For tests and quick studies of
adjusters on small streams; the Spark pipeline (harness/runner.py) is what experiments measure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import numpy as np

from harness.engine.epochs import epoch_bounds, epoch_row, epoch_stats, migration_pause, plan_step
from harness.core.events import INSERT, Events, digest_of, sorted_unique
from harness.engine.migration import gather_state, split_state, summarise
from harness.engine.monitor import unit_stats
from harness.families.base import IndexContext
from harness.families.range.gi2 import GI2Index
from harness.families.range.oracle import oracle_keys
from strategies import registry
from strategies.adjust_base import Adjuster, MigrationPlan, get_adjuster
from strategies.base import FitContext


@dataclass
class SimResult:
    digest: str
    oracle_digest: str
    epochs: list[dict] = field(default_factory=list)  # per measured epoch: throughput, balance, migration
    plans: list[MigrationPlan] = field(default_factory=list)
    router: object = None

    @property
    def exact(self) -> bool:
        return self.digest == self.oracle_digest


def default_context(events: Events, seed: int = 0) -> FitContext:
    """Extent = the events' bounding box, term frequencies counted on the stream."""
    xs = np.concatenate([events.x, events.xmin[np.isfinite(events.xmin)], events.xmax[np.isfinite(events.xmax)]])
    ys = np.concatenate([events.y, events.ymin[np.isfinite(events.ymin)], events.ymax[np.isfinite(events.ymax)]])
    df = np.bincount(events.values, minlength=int(events.values.max()) + 1 if len(events.values) else 1)
    return FitContext((float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max())), df.astype(np.float64),
                      seed)


def migrate_in_process(states: dict[int, Events], router, n_workers: int, index_factory, old_router=None):
    """Move stored subscriptions from where `old_router` put them to where `router` places them;
    returns the new states and the result."""
    kept: dict[int, Events] = {}
    incoming: dict[int, list[Events]] = {w: [] for w in range(n_workers)}
    infos = []
    for w in range(n_workers):
        parts, out_s, leaving = split_state(states.get(w, Events.empty()), router, w, old_router)
        infos.append({"src": w, "out_s": out_s, "leaving": leaving})
        for dest, part in parts.items():
            if dest == w:
                kept[w] = part
            else:
                incoming[dest].append(part)
    new_states = {}
    for w in range(n_workers):
        g = gather_state(w, kept.get(w), incoming[w], index_factory)
        new_states[w] = g.state
        infos.append({"dst": w, "moved_in": g.moved_in, "moved_bytes": g.moved_bytes, "in_s": g.index_s})
    return new_states, summarise(infos, n_workers, 0.0)


def simulate(events: Events, warmup: int, strategy: str, n_workers: int, epoch_events: float = 0,
             adjust: "str | Adjuster" = "none", adjust_params: dict | None = None, strategy_params: dict | None = None,
             context: FitContext | None = None, index_factory=None, epochs_by: str = "count") -> SimResult:
    context = context or default_context(events)
    cls = registry.get(strategy)
    router = cls().fit(events.take(np.arange(warmup)), n_workers, cls.make_params(strategy_params), context)
    if isinstance(adjust, Adjuster):  # an instance (tests may bring their own)
        adjuster = adjust
    else:
        adj_cls = get_adjuster(adjust)
        adjuster = adj_cls(adj_cls.make_params(adjust_params), n_workers, context, strategy)
    index_factory = index_factory or partial(GI2Index, IndexContext(context.extent, context.vocab_size),
                                             cells_per_side=16)
    bounds = epoch_bounds(events, warmup, epochs_by, epoch_events)
    states: dict[int, Events] = {}
    keys = []
    pause: dict[int, float] = {}
    result = SimResult("", digest_of(oracle_keys(events)))
    for epoch, lo, hi in bounds:
        router.observe_inserts(events, lo + np.flatnonzero(events.kind[lo:hi] == INSERT))
        ev = events.take(np.arange(lo, hi))
        rows, workers = router.route(ev)
        worker_stats, tables = {}, []
        for w in range(n_workers):
            mine = np.sort(rows[workers == w])
            sub = ev.take(mine)
            start = states.get(w, Events.empty())
            index = index_factory()
            index.restore(start)
            out = index.process(sub)
            keys.append(out.keys)
            states[w] = index.export_state()
            worker_stats[w] = {**out.counters, "busy_s": out.busy_s, "restored": len(start),
                               "pause_s": pause.get(w, 0.0), "events": len(sub)}
            if adjuster.name != "none":  # the monitor runs only for an adjuster, as on Spark
                tables.append(unit_stats(router, w, sub, out.work, out.busy_s, start, states[w]))
        pause = {}
        if epoch == 0:
            continue
        row = epoch_row(epoch, hi - lo, worker_stats, 0.0, 1, n_workers, tables)
        row.update(migrated_queries=0, migrated_bytes=0, select_s=0.0, migration_s=0.0)
        if adjuster.name != "none" and hi < len(events):
            step = plan_step(adjuster, router, epoch_stats(epoch, tables, worker_stats, events, lo, hi, n_workers))
            row["select_s"] = step.select_s
            if step.plan is not None:
                states, moved = migrate_in_process(states, step.plan.router, n_workers, index_factory, router)
                router = step.plan.router
                result.plans.append(step.plan)
                pause = migration_pause(step, moved)
                row.update(migrated_queries=moved.moved_queries, migrated_bytes=moved.moved_bytes,
                           migration_s=moved.migration_s, operation=str(step.plan.info.get("operation", adjust)))
        result.epochs.append(row)
    result.digest = digest_of(sorted_unique(np.concatenate(keys)) if keys else np.zeros(0, np.int64))
    result.router = router
    return result
