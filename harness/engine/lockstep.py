"""The runs of one invocation in lockstep, so that each epoch is one Spark job for all of them.

The runs of an invocation (strategies and variants on the same events, workers and epochs) used to
run one after another, two or more Spark jobs each, and a sweep spent most of its time on Spark's
fixed cost per job. Here each run keeps its own loop (fit, epochs, adjustment, summary, logging)
in its own thread, but only one thread runs at a time: a run holds the baton (`cond`'s lock) while
it does driver work, so what the driver times for a run (fit, routing upkeep, plan selection) is
never shared with another run. A run that asks for an epoch waits with the baton released; when
every live run waits, the last to ask runs one job for all of them (`pipeline.run_epoch`, a lane
per run) and hands each its own result. A migration is the run's own job, run while it holds the
baton. When a shared job fails, each of its runs is retried alone, so a strategy that raises
fails alone, as it did when runs did not share jobs.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, ContextManager

from harness.core import store
from harness.engine.pipeline import EpochResult, LaneEpoch, run_epoch


class Lockstep:
    def __init__(self, spark, events_path: str | None, n_workers: int, group: str,
                 guard: Callable[[], ContextManager] = contextlib.nullcontext, fatal: tuple[type, ...] = ()):
        self.spark, self.n_workers = spark, n_workers
        self.events_df = spark.read.parquet(events_path) if events_path else None
        self.events_uri = store.as_uri(events_path) if events_path else None
        self.group = group  # the Spark job group of the shared jobs (task failures, cancelling)
        self.guard = guard  # wraps each shared job (the runner's lost-executor watchdog)
        self.fatal = fatal  # failures of the job, not of a lane: every lane gets them, no retry alone
        self.cond = threading.Condition()
        self.live: set[int] = set()
        self.asked: dict[int, tuple[tuple[int, int, int], LaneEpoch]] = {}
        self.answers: dict[int, list[EpochResult] | BaseException] = {}  # per lane, one result per repetition
        self.jobs = 0  # Spark jobs run for epochs, shared or not

    def run_lanes(self, tasks: list[Callable[[], object]], out: list, order: list[int] | None = None,
                  names: list[str] | None = None) -> None:
        """Each task as lane i of this lockstep's epoch jobs, a thread each holding the baton while it
        runs (its epochs wait for the others' in `epoch`); `out[i]` gets task i's result or the
        exception it raised, filled in place so a caller interrupted meanwhile keeps the lanes that
        ended. `order`: the order the threads start in. Ctrl-C cancels the jobs."""

        def lane_main(lane: int) -> None:
            with self.cond:
                try:
                    out[lane] = tasks[lane]()
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    out[lane] = exc
                finally:
                    self.leave(lane)

        for lane in range(len(tasks)):
            self.enter(lane)
        threads = [threading.Thread(target=lane_main, args=(lane,), daemon=True,
                                    name=names[lane] if names else f"lane-{lane}")
                   for lane in (order if order is not None else range(len(tasks)))]
        for t in threads:
            t.start()
        try:
            for t in threads:
                t.join()
        except KeyboardInterrupt:
            self.spark.sparkContext.cancelAllJobs()
            raise

    def enter(self, lane: int) -> None:
        with self.cond:
            self.live.add(lane)

    def leave(self, lane: int) -> None:
        """The run ended (or failed); called with the baton held."""
        self.live.discard(lane)
        self._run_when_all_asked()

    def epoch(self, lane: int, epoch: int, lo: int, hi: int, request: LaneEpoch) -> list[EpochResult]:
        """This run's epoch, once every live run has asked for one; called with the baton held."""
        self.asked[lane] = ((epoch, lo, hi), request)
        self._run_when_all_asked()
        self.cond.wait_for(lambda: lane in self.answers)
        answer = self.answers.pop(lane)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def wait_released(self, future) -> None:
        """Wait for `future` (a fit or a summary in a pool process) with the baton released, so the
        other runs can do their driver work meanwhile; called with the baton held, returns holding it."""
        future.add_done_callback(lambda _: self._notify())
        self.cond.wait_for(future.done)

    def _notify(self) -> None:
        with self.cond:
            self.cond.notify_all()

    def _run_when_all_asked(self) -> None:
        if not self.asked or len(self.asked) < len(self.live):
            return
        by_bounds: dict[tuple[int, int, int], list[int]] = {}
        for lane, (bounds, _) in sorted(self.asked.items()):
            by_bounds.setdefault(bounds, []).append(lane)
        asked, self.asked = self.asked, {}
        for bounds, lanes in by_bounds.items():
            self._run(bounds, lanes, [asked[lane][1] for lane in lanes])
        self.cond.notify_all()

    def _run(self, bounds: tuple[int, int, int], lanes: list[int], requests: list[LaneEpoch]) -> None:
        sc = self.spark.sparkContext
        previous = sc.getLocalProperty("spark.jobGroup.id")
        sc.setJobGroup(self.group, f"epoch {bounds[0]} of {len(lanes)} runs")
        try:
            self.jobs += 1
            with self.guard():
                results = run_epoch(self.spark, self.events_df, self.events_uri, *bounds, requests, self.n_workers)
            self.answers.update(zip(lanes, results))
        except Exception as exc:  # noqa: BLE001 - handed to the run(s) that asked
            if len(lanes) == 1 or isinstance(exc, self.fatal):
                self.answers.update((lane, exc) for lane in lanes)
            else:
                for lane, request in zip(lanes, requests):
                    self._run(bounds, [lane], [request])
        finally:
            if previous:
                sc.setJobGroup(previous, previous)
