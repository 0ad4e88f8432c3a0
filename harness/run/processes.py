"""The driver's pool of spawned processes: one per driver core, started once and kept for the
invocations of a sweep. Strategy fits run there side by side (harness/run/fits.py), so do the
runs' summaries once their last epoch job is done (harness/run/runner.py), and when a sweep ends
its summary plots are drawn there while the driver writes the experiment's figures
(harness/run/callbacks.py). Spawned, not forked: the driver has threads and a JVM gateway."""

from __future__ import annotations

import multiprocessing
import os
import threading
from concurrent.futures import Future, ProcessPoolExecutor

_LOCK = threading.Lock()
_POOL: dict[int, ProcessPoolExecutor] = {}


def driver_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def pool(processes: int) -> ProcessPoolExecutor:
    """The process's pool of that size, started on first use."""
    with _LOCK:
        if processes not in _POOL:
            _POOL[processes] = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"))
        return _POOL[processes]


def started() -> ProcessPoolExecutor | None:
    """A pool this process started already (None: none; starting one costs seconds of imports)."""
    with _LOCK:
        return next(iter(_POOL.values()), None)


def call(processes: int, fn, *args, wait=None):
    """`fn(*args)` in the pool when `processes` > 0, waiting with `wait(future)` (the runner releases
    its baton there, so the other runs go on), else here; again here when the pool cannot run it (an
    argument that does not pickle, a dead process, or `fn`'s own error, which the caller then gets
    from its own call)."""
    future = submit(processes, fn, *args) if processes > 0 else None
    if future is not None:
        try:
            (wait or (lambda f: f.exception()))(future)
            return future.result()
        except Exception:  # noqa: BLE001
            pass
    return fn(*args)


def submit(processes: int, fn, *args) -> Future | None:
    """`fn(*args)` in the pool as a future, or None when the pool cannot take it (broken, shut down)."""
    try:
        return pool(processes).submit(fn, *args)
    except Exception:  # noqa: BLE001 - the caller runs it itself
        return None


_LOGGING: list[ProcessPoolExecutor] = []


def logging_process() -> ProcessPoolExecutor:
    """One spawned process for a sweep's MLflow runs (harness/report/results.py), apart from the
    pool so that a run's logging never waits behind a fit, and one so that runs are logged in
    order; started on first use and kept for the sweep's invocations."""
    with _LOCK:
        if not _LOGGING:
            _LOGGING.append(ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")))
        return _LOGGING[0]
