"""The count mode on Spark (`counts.executor=spark`, issue 51 part 1): a job's strategies counted
as lanes of shared epoch jobs (harness/engine/lockstep.py, as the timed runner's), each through
the same assembly, fit and epoch loop as in process (`run_stream`) on the timed runs'
SparkExecutor, so that a stream larger than one machine's memory is counted on a cluster
(`cluster=standalone`; SSTD's 200M stored objects).

The counts are the workers' own counters (`WorkerOutput.counters`, in the statistics rows the
worker tasks return through Arrow), the dispatch tasks' and workers' tallies beside them
(harness/engine/tally.py), with one repetition and no timing read. The events the jobs read are
the cached stream's table (`publish_events`: under state_uri when set, where a cluster's
executors reach it) or, with an object sample, the kept events written once per invocation beside
the workers' state (seqs kept: the executor asks the jobs for each epoch's seq range).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import partial
from typing import Callable, ContextManager

import numpy as np
import pyarrow as pa

from harness.core import store
from harness.engine.executors import SparkExecutor
from harness.engine.lockstep import Lockstep


@dataclass
class SparkLane:
    """One strategy's lane of the count's epoch jobs: what `count_run` needs to run on Spark."""

    lockstep: Lockstep
    lane: int
    state_root: str  # the workers' state between epochs (URI), a folder per lane under it
    ship_events: bool = False  # the config's `ship_events`: blocks carry the events, not their seqs
    seq: np.ndarray | None = None  # the stream's seq per position, when a sample makes them differ

    def executor_for(self, tally) -> Callable:
        """The executor `run_stream` builds from the run's family setup, telling `tally` its counts."""
        return lambda setup: SparkExecutor(self.lockstep, self.lane, setup, self.lockstep.n_workers,
                                           store.join(self.state_root, f"lane={self.lane}"), False, None,
                                           self.ship_events, tally=tally, seq=self.seq)


def events_table(stream, full_table: str, state_root: str) -> str:
    """The table the epoch jobs read: the whole stream's (`full_table`), or the kept events of a
    sample, written under `state_root` (as Spark names it)."""
    if not stream.sampled:
        return full_table
    uri = store.join(state_root, "events.parquet")
    store.write_table(uri, pa.Table.from_batches([stream.events.to_arrow()]))
    return store.spark_uri(uri)


def count_lanes(spark, stream, full_table: str, state_root: str, n_workers: int, group: str,
                counters: list[Callable[..., object]], ship_events: bool = False,
                guard: Callable[[], ContextManager] = contextlib.nullcontext, fatal: tuple[type, ...] = ()) -> list:
    """Each of `counters` (called with its SparkLane: a `count_run` of one strategy) as a lane of
    the same epoch jobs over `stream` (harness/counts/tally.py `CountStream`); per counter its
    result or the exception it raised. `guard` wraps each job (the runner's lost-executor
    watchdog), `fatal` the failures that are the job's. The state (and a sample's table) is
    removed at the end."""
    out: list = [None] * len(counters)
    try:
        table = events_table(stream, full_table, state_root)
        lockstep = Lockstep(spark, table, n_workers, group, guard, fatal)
        seq = stream.events.seq if stream.sampled else None
        lockstep.run_lanes([partial(count, SparkLane(lockstep, lane, state_root, ship_events, seq))
                            for lane, count in enumerate(counters)], out)
    finally:
        store.remove_tree(state_root)
    return out
