"""Strategy fits in a pool of processes, so that the runs of an invocation fit side by side.

Every run of an invocation fits its strategy on the warm-up sample before its first epoch, and
the runs share their epoch jobs (harness/engine/lockstep.py), so the first job waits for the
slowest fit. In the driver the fits ran one after another under the baton while the other cores
idled (kdt's Algorithm 1 alone takes seconds at 32 workers; a grand_range invocation's fits were
3-11 s, issue 19). A fit is a function of (strategy class, sample, workers, params, context) alone,
so a pool process gives the router the driver would have (pickled back), and its time is taken
there, around `fit` only, on a core of its own: what `build_s` always meant.

A fit the pool cannot run (a class or input that does not pickle, a process that died, an error
the fit raised) runs again in the caller, as before: the run then reports the fit's own error.
"""

from __future__ import annotations

import importlib
import time

from harness.run.processes import call, driver_cores, pool


def fit_processes(setting: int | None, n_runs: int) -> int:
    """Processes to fit an invocation's `n_runs` runs in (`fit_processes`: null = one per driver
    core when there are at least two runs, so a sweep keeps one pool whatever its runs per
    invocation; 0 = in the runs' own threads)."""
    if setting is not None:  # checked by config.validate
        return int(setting)
    return driver_cores() if n_runs >= 2 else 0


def warm(processes: int) -> None:
    """Start the pool's processes and their imports now (the driver starts Spark and prepares the
    data meanwhile), not when the first fit is due."""
    if processes > 0:
        p = pool(processes)
        for _ in range(processes):
            p.submit(_import_strategies)


def _import_strategies() -> None:
    """The strategies' modules, imported in a fresh pool process before its first fit."""
    importlib.import_module("strategies.registry")


REHEARSAL_EVENTS = 2_000
_REHEARSED: set = set()  # the strategy classes this process has fitted once


def _fit(cls, sample, workers: int, params, context, rehearse: bool = False):
    """The fit, timed. With `rehearse`, a strategy's first fit in this process is preceded by an
    untimed one on the sample's first events: it loads the strategy's compiled kernels (numba's
    cache), which the timed fit of whichever run came first would otherwise pay for all (agrid's
    0.09 s fit took 0.55 s as a pool process's first), as the discarded first repetition does for
    the workers (harness/engine/worker_epoch.py)."""
    if rehearse and cls not in _REHEARSED:
        _REHEARSED.add(cls)
        try:
            cls().fit(sample.slice(0, min(len(sample), REHEARSAL_EVENTS)), workers, params, context)
        except Exception:  # noqa: BLE001 - a sample too small for the strategy: the timed fit decides
            pass
    t0 = time.perf_counter()
    router = cls().fit(sample, workers, params, context)
    return router, time.perf_counter() - t0


_LAST_S: dict[str, float] = {}  # run label -> its last fit's seconds in this process


def longest_first(labels: list[str]) -> list[int]:
    """The order in which to start the runs' fits: the slowest last time first (a sweep's next
    invocation fits the same strategies), so the pool is not left waiting on one long fit that
    began last; unseen labels keep their order, first."""
    return sorted(range(len(labels)), key=lambda i: -_LAST_S.get(labels[i], float("inf")))


def fit(cls, sample, workers: int, params, context, processes: int = 0, wait=None) -> tuple[object, float]:
    """(router, seconds of the fit): in the pool when `processes` > 0, waiting with `wait(future)`
    (the runner releases its baton there, so other runs can send their fits), else here."""
    return call(processes, _fit, cls, sample, workers, params, context, processes > 0, wait=wait)


def remember(label: str, seconds: float) -> None:
    _LAST_S[label] = seconds
