"""The epoch loop of a run, shared by the Spark runner and the in-process executor.

Per epoch: the driver's routing upkeep (`Router.observe_inserts`, timed and charged to the
dispatchers, as the papers' main server does it; `Router.observe_objects`, each dispatcher's share
of the object decisions), the epoch itself (an `Executor`: one Spark job,
or the same stages in process), the stall a migration left, the adjustment step, and the mergers'
feedback handed to the router that routes the next epoch. Routers only ever see the stream
through `routing_view`, so a family routed like another looks like it everywhere.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from harness.core.events import DELETE, INSERT, OBJECT, Events
from harness.engine.epochs import epoch_row, epoch_stats, migration_pause, plan_step, stall
from harness.engine.migration import MigrationResult
from harness.engine.pipeline import EpochResult

# what an adjuster's plan may report about its cell selection besides select_cells_s (PS2Stream's
# Phase II, timed several times: strategies/ps2stream/adjust.py), copied into the epoch's row
SELECTION_EXTRAS = ("select_cells_s_ci_lo", "select_cells_s_ci_hi", "select_candidates")
from harness.engine.rounds import finish_epoch
from harness.engine.setup import FamilySetup
from harness.engine.versions import Version, keep_versions, versioned
from harness.engine.worker import routing_view
from strategies.base import Router


class Executor(Protocol):
    """Runs one epoch's stages and moves the workers' state for a migration."""

    def epoch(self, epoch: int, lo: int, hi: int, router, collect_service: bool, monitor: bool,
              feedback: dict | None = None, keep_state: bool = True, horizon: int | None = None,
              resend: Events | None = None, repeat: int = 1) -> list[EpochResult]:
        """The epoch's result once per repetition: its work timed `repeat` times from the same
        state inside its tasks (harness/engine/worker_epoch.py), the same results in each."""

    def migrate(self, epoch: int, router, old_router) -> MigrationResult: ...

    def second_round(self, epoch: int, requests: dict) -> list[tuple]:
        """The epoch's second round over its kept state: per (family, worker) block of `requests`,
        (code, worker, result blobs, work, busy seconds) (harness/engine/rounds.py)."""

    def keep_pairs_of(self, epoch: int, rows) -> None:
        """Write the results the driver merged (a second round's, a RESULT_SCHEMA table:
        harness/families/result_rows.py) where the run keeps its pairs."""


@dataclass
class LoopResult:
    epochs: list[EpochResult]  # every epoch, the warm-up first
    series: list[dict]  # one row per measured epoch (epochs.parquet)
    router: object  # the router after the last epoch
    plans: list = field(default_factory=list)  # the migration plans applied
    # per measured epoch, every repetition's result, the discarded ones first (`repeat` > 1)
    repetitions: list[list[EpochResult]] = field(default_factory=list)

    @property
    def measured(self) -> list[EpochResult]:
        return self.epochs[1:]


def live_inserts(events: Events, qids: np.ndarray, seq_end: int) -> Events | None:
    """The insert events of the subscriptions `qids` that are live at `seq_end` (None when none)."""
    if len(qids) == 0:
        return None
    kind, ids = events.kind[:seq_end], events.id[:seq_end]
    ins = np.flatnonzero((kind == INSERT) & np.isin(ids, qids))
    ins = ins[~np.isin(ids[ins], ids[kind == DELETE])]
    return events.take(ins) if len(ins) else None


def timed_objects(router, view: Events, rows: np.ndarray, n_dispatchers: int, repeat: int) -> list[float]:
    """The router's decisions for an epoch's objects (`Router.observe_objects`), timed `repeat`
    times like `timed_upkeep`, each time divided by the dispatchers: the driver decides for all
    of them, and each dispatcher only for the objects dealt to it (SSTD's routers each route their
    own objects, sstd.txt l.219-221). A router without the hook is not timed."""
    if type(router).observe_objects is Router.observe_objects:
        return [0.0] * repeat
    n = max(int(n_dispatchers), 1)
    times = []
    for _ in range(repeat - 1):
        trial = copy.deepcopy(router)
        t0 = time.perf_counter()
        trial.observe_objects(view, rows, n)
        times.append((time.perf_counter() - t0) / n)
    t0 = time.perf_counter()
    router.observe_objects(view, rows, n)
    return times + [(time.perf_counter() - t0) / n]


def timed_upkeep(router, view: Events, rows: np.ndarray, repeat: int) -> list[float]:
    """The router's upkeep for an epoch's insertions (`Router.observe_inserts`), timed `repeat`
    times as the epoch's other work is: the first repetitions on copies of the router, the last on
    the router itself. Its first call in a process compiles the router's kernels, which one run of
    an invocation pays for every strategy that shares them (kop's ball search was 600 times slower
    in one run than in the same run after dkmsks); the discarded first repetition takes that, as
    it does for the workers. A router without upkeep (the default) is timed once for every one."""
    if type(router).observe_inserts is Router.observe_inserts or len(rows) == 0 or repeat <= 1:
        t0 = time.perf_counter()
        router.observe_inserts(view, rows)
        return [time.perf_counter() - t0] * repeat
    times = []
    for _ in range(repeat - 1):
        trial = copy.deepcopy(router)
        t0 = time.perf_counter()
        trial.observe_inserts(view, rows)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    router.observe_inserts(view, rows)
    return times + [time.perf_counter() - t0]


def run_epochs(executor: Executor, router, events: Events, setup: FamilySetup, bounds: list[tuple[int, int, int]],
               adjuster, n_workers: int, n_dispatchers: int, progress=None, label: str = "",
               repeat: int = 1) -> LoopResult:
    """The run's epochs; each measured one's work is timed `repeat` times from the same state
    (timings vary, results may not: the executor's tasks stop on a repetition whose result differs)."""
    if repeat < 1:
        raise ValueError(f"repeat={repeat!r} is invalid; allowed: an integer >= 1 (measure.repeat)")
    view = routing_view(events, setup.codes)
    last = bounds[-1][0]
    out = LoopResult([], [], router)
    pause: dict[int, float] = {}
    feedback: dict = {}  # the mergers' feedback of the previous epoch: the workers read it first
    resend = None  # live subscriptions whose routes gained workers with that feedback
    older: list[Version] = []  # replaced routers whose kept objects snapshot queries may still see
    look_back = max([ctx.look_back for ctx in setup.contexts.values()], default=0.0)
    for i, (epoch, lo, hi) in enumerate(bounds):
        if progress is not None:
            name = "warm-up" if epoch == 0 else f"measured {epoch}/{last}"
            progress.step(f"{label}: epoch {epoch} ({name}, {hi - lo:,} events)")
        n_reps = repeat if epoch > 0 else 1
        observe_s = timed_upkeep(router, view, lo + np.flatnonzero(view.kind[lo:hi] == INSERT), n_reps)
        decide_s = timed_objects(router, view, lo + np.flatnonzero(view.kind[lo:hi] == OBJECT), n_dispatchers, n_reps)
        observe_s = [a + b for a, b in zip(observe_s, decide_s)]
        # thresholds valid until the next epoch's end, for a router that routes by them
        horizon = bounds[i + 1][2] if router.wants_thresholds and epoch < last else None
        older = keep_versions(older, float(events.ts[lo]), look_back)
        dispatch = versioned(router, older)
        reps = executor.epoch(epoch, lo, hi, dispatch, collect_service=epoch > 0,
                              monitor=adjuster is not None and 0 < epoch < last, feedback=feedback,
                              # nothing reads the last epoch's state, but a second round
                              keep_state=epoch < last or bool(setup.two_rounds),
                              horizon=horizon, resend=resend, repeat=n_reps)
        if setup.two_rounds:
            finish_epoch(executor, epoch, events, setup, dispatch, reps)
        for res, upkeep_s in zip(reps, observe_s):
            res.observe_s = upkeep_s
            stall(res, pause)
        res = reps[-1]
        pause = {}
        out.epochs.append(res)
        if epoch > 0:
            out.repetitions.append(reps)
            row = epoch_row(epoch, res.n_events, res.worker_stats, res.route_ns / 1e9, n_dispatchers, n_workers,
                            res.units, observe_s=res.observe_s)
            row.update(results=res.result_count, migrated_queries=0, migrated_bytes=0, select_s=0.0,
                       migration_s=0.0, observe_s=res.observe_s, **res.timings,
                       replicas_dropped=sum(st.get("replicas_dropped", 0) for st in res.worker_stats.values()),
                       resent=sum(st.get("resent", 0) for st in res.worker_stats.values()))
            if adjuster is not None and epoch < last:
                step = plan_step(adjuster, router, epoch_stats(epoch, res.units, res.worker_stats, view, lo, hi,
                                                               n_workers))
                row["select_s"] = step.select_s
                if step.plan is not None:
                    mig = executor.migrate(epoch, step.plan.router, router)
                    if setup.stores_objects:  # its objects stay put: snapshot queries still go there
                        older.append(Version(router, hi, float(events.ts[hi - 1])))
                    router = step.plan.router
                    out.plans.append(step.plan)
                    pause = migration_pause(step, mig)
                    info = step.plan.info
                    row.update(select_cells_s=float(info.get("select_cells_s", step.select_s)),
                               **{k: float(info[k]) for k in SELECTION_EXTRAS if k in info},
                               migrated_queries=mig.moved_queries, migrated_bytes=mig.moved_bytes,
                               migration_s=mig.migration_s, migration_job_s=mig.job_s,
                               operation=str(step.plan.info.get("operation", adjuster.name)))
            out.series.append(row)
        for code, table in res.feedback.items():  # before the next epoch is dispatched
            router.observe_feedback(setup.names[code], table)
        feedback = res.feedback
        resend = live_inserts(events, router.pending_resends(), hi)
        if resend is not None:
            resend = resend.take(np.flatnonzero(router.routes_gained(routing_view(resend, setup.codes))))
    out.router = router
    return out
