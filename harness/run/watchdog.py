"""A run that lost every executor fails within a bounded time instead of waiting forever.

Spark retries a lost executor's tasks on the executors that remain and, on a standalone cluster,
the worker starts a new executor; but when the workers themselves are gone, the scheduler waits for
resources with no limit ("Initial job has not accepted any resources"). The watchdog polls the
driver's view of the live executors; when a run's jobs are active and none has been alive for
`timeout_s`, it cancels the run's job group, and the run ends with a `LostExecutors` error that
says so (its row gets status=error; rows already written stay). In local mode the driver is its own
executor, so there is nothing to watch.
"""

from __future__ import annotations

import threading
import time


class LostExecutors(RuntimeError):
    pass


def live_executors(spark) -> int:
    """Executors registered with the driver, the driver itself not counted."""
    return max(spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1, 0)


class ExecutorWatchdog:
    """Context manager around a run's jobs (their job group is `group`)."""

    def __init__(self, spark, group: str, timeout_s: float, poll_s: float = 1.0):
        self.spark, self.group, self.timeout_s, self.poll_s = spark, group, float(timeout_s), poll_s
        self.fired = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self):
        master = self.spark.sparkContext.master
        if self.timeout_s > 0 and not master.startswith("local"):
            self._thread = threading.Thread(target=self._watch, name="executor-watchdog", daemon=True)
            self._thread.start()
        return self

    def _active(self) -> bool:
        tracker = self.spark.sparkContext.statusTracker()
        return any(tracker.getJobInfo(j) is not None and tracker.getJobInfo(j).status == "RUNNING"
                   for j in tracker.getJobIdsForGroup(self.group))

    def _watch(self) -> None:
        since = None
        while not self._stop.wait(self.poll_s):
            try:
                starved = live_executors(self.spark) == 0 and self._active()
            except Exception:  # noqa: BLE001 - the session is stopping: nothing left to watch
                return
            if not starved:
                since = None
                continue
            since = since if since is not None else time.monotonic()
            if time.monotonic() - since >= self.timeout_s:
                self.fired = True
                self.spark.sparkContext.cancelJobGroup(self.group)
                return

    def __exit__(self, exc_type, exc, tb):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.fired and exc_type is not None:
            raise LostExecutors(
                f"no executor alive for {self.timeout_s:g} s (cluster.lost_executors_timeout_s) while the run's "
                "jobs waited: the cluster lost its workers; the run was cancelled (make cluster-status shows "
                "what is still running)") from exc
        return False
