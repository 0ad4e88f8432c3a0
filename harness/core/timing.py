"""CPU-time bookkeeping shared by worker indexes, mergers, migrations and adjusters."""

from __future__ import annotations

import time


def work_clock() -> float:
    """Seconds of CPU the calling thread has used: the clock of a migration's stall (packing,
    shipping and installing the moved state) and of an adjuster's decision. Wall time would charge
    a migration with whatever else the machine ran meanwhile (the same SSTD FG move stalled 38.6,
    70.3 and 489.6 ms on a shared machine: ../shared/reviews/fidelity-2026-11-29.md, cause C);
    the workers' index time is CPU time too, so the stall and the work it delays share one basis
    (issue 48)."""
    return time.thread_time()


class CompileClock:
    """Seconds numba spends compiling inside a `with` block (outermost compilations only: nested
    ones are part of their caller's). Busy times exclude it: a kernel compiled for a type
    signature no earlier epoch met (once per machine, as it is then cached) is not index work,
    and one such compilation in one epoch used to swamp a whole run's throughput."""

    def __init__(self):
        self.seconds = 0.0
        self._depth = 0
        self._t0 = 0.0

    def __enter__(self):
        from numba.core import event

        clock = self

        class _Listener(event.Listener):
            def on_start(self, ev):
                if clock._depth == 0:
                    clock._t0 = time.perf_counter()
                clock._depth += 1

            def on_end(self, ev):
                clock._depth -= 1
                if clock._depth == 0:
                    clock.seconds += time.perf_counter() - clock._t0

        self._ctx = event.install_listener("numba:compile", _Listener())
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)
