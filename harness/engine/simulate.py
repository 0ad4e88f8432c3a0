"""The epoch loop in process, without Spark: the same routing, worker indexes, mergers, monitor,
plan checks and state moves as the Spark runner (harness/engine/loop.py with the in-process
executor), on one core. For tests and quick studies of strategies, families and adjusters on
small streams; the Spark pipeline (harness/run/runner.py) is what experiments measure. Its
`run_stream` also takes another executor: the count mode's Spark variant runs the same assembly,
fit and loop on a SparkExecutor (harness/counts/spark.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from datasets.workloads.anomalies import normalise_prefix
from harness.core.events import Events, format_digest
from harness.engine.assembly import RunAssembly, assemble_run, oracle_digest
from harness.engine.epochs import epoch_bounds
from harness.engine.executors import InProcessExecutor
from harness.engine.loop import Executor, LoopResult, run_epochs
from harness.engine.setup import FamilySetup
from strategies import registry
from strategies.adjust_base import Adjuster, MigrationPlan
from strategies.base import FitContext


@dataclass
class SimResult:
    digest: str
    oracle_digest: str
    epochs: list[dict] = field(default_factory=list)  # per measured epoch: throughput, balance, migration
    plans: list[MigrationPlan] = field(default_factory=list)
    router: object = None
    feedback_rows: int = 0
    anomalies: dict = field(default_factory=dict)  # what normalising the stream fixed (datasets.workloads.anomalies)
    local_pairs: int = 0  # distinct pairs the workers counted themselves (harness/engine/local_pairs.py)
    repetitions: list[int] = field(default_factory=list)  # per measured epoch, the times it ran (`repeat`)
    indexes: str = ""  # each family's worker index and settings (RunAssembly.indexes, as the run row's)

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


def simulate(events: Events, warmup: int, strategy: "str | type", n_workers: int, epoch_events: float = 0,
             adjust: "str | Adjuster" = "none", adjust_params: dict | None = None, strategy_params: dict | None = None,
             context: FitContext | None = None, setup: FamilySetup | None = None, epochs_by: str = "count",
             index_params: dict | None = None, local_pairs: bool = True, repeat: int = 1,
             n_dispatchers: int = 1) -> SimResult:
    """Run a stream through a strategy (a registered name, or a Strategy class) in process. The
    families are the stream's own; the range index defaults to 16 cells per side (tiny streams),
    `index_params` maps a family to its settings, `setup` replaces the whole family setup (a test's
    own index); `local_pairs` as the config's (pairs of sole objects counted on the workers);
    `repeat` runs each measured epoch that many times from the same state, as measure.repeat does;
    `n_dispatchers` as the config's `dispatchers` (a router may route by seq % n_dispatchers).
    The stream is normalised first (datasets.workloads.anomalies), as the Spark runner does, so both
    give anomalies one meaning."""
    events, warmup, anomalies = normalise_prefix(events, warmup)
    context = context or default_context(events)
    cls = strategy if isinstance(strategy, type) else registry.get(strategy)
    index_params = {"range": {"cells_per_side": 16}, **(index_params or {})}
    bounds = epoch_bounds(events, warmup, epochs_by, epoch_events)
    loop, run = run_stream(cls, events, warmup, bounds, context, n_workers, index_params, adjust=adjust,
                           adjust_params=adjust_params, strategy_params=strategy_params, local_pairs=local_pairs,
                           anomalies=anomalies, setup=setup, repeat=repeat, n_dispatchers=n_dispatchers)
    count = sum(e.result_count for e in loop.epochs)
    hashed = sum(e.result_hash for e in loop.epochs) % (1 << 64)
    return SimResult(format_digest(count, hashed), oracle_digest(events, run.families), loop.series, loop.plans,
                     loop.router, sum(t.num_rows for e in loop.epochs for t in e.feedback.values()), anomalies,
                     sum(e.local_pairs for e in loop.epochs), [len(r) for r in loop.repetitions], run.indexes())


def run_stream(cls: type, events: Events, warmup: int, bounds: list[tuple[int, int, int]], context: FitContext,
               n_workers: int, index_params: dict | None = None, *, adjust: "str | Adjuster" = "none",
               adjust_params: dict | None = None, strategy_params: dict | None = None, local_pairs: bool = True,
               anomalies: dict | None = None, setup: FamilySetup | None = None, repeat: int = 1,
               n_dispatchers: int = 1, workload_family: str | None = None, tally=None, progress=None,
               label: str = "", fit_prefix: Events | None = None,
               executor: Callable[[FamilySetup], Executor] | None = None) -> tuple[LoopResult, RunAssembly]:
    """The run of a normalised stream cut into `bounds`, its router fitted here: its assembly
    (`assemble_run`, as the Spark runner's), the strategy's fit on the warm-up and the shared epoch
    loop (`run_epochs`), on the in-process executor or on the one `executor` builds from the run's
    family setup (the count mode's Spark variant: a SparkExecutor, harness/counts/spark.py).
    `simulate` and the count mode (harness/counts/) both run it, so the counts are those of the
    same routers, indexes and adjusters on either executor; `tally` is the count mode's observer of
    the in-process executor (InProcessExecutor.tally; a built executor carries its own),
    `fit_prefix` the warm-up it fits on when `events` is a sample (assemble_run)."""
    run = assemble_run(cls, events, warmup, context, n_workers, index_params, workload_family=workload_family,
                       adjust=adjust, adjust_params=adjust_params, local_pairs=local_pairs, anomalies=anomalies,
                       setup=setup, fit_prefix=fit_prefix)
    router = cls().fit(run.sample, n_workers, cls.make_params(strategy_params), run.context)
    runs_on = executor(run.setup) if executor is not None else InProcessExecutor(events, run.setup, n_workers, tally)
    loop = run_epochs(runs_on, router, events, run.setup, bounds, run.adjuster, n_workers, n_dispatchers,
                      progress=progress, label=label, repeat=repeat)
    return loop, run
