"""A progress display for long runs: one bar over the invocation's steps, with elapsed time, and
in a sweep a line for the sweep as a whole (jobs and runs done, an estimate of the time left)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn


@dataclass
class SweepState:
    """The sweep in progress (Hydra runs its jobs in this process; harness.run.callbacks keeps it)."""
    jobs: int = 0  # 0: no sweep
    jobs_done: int = 0
    runs_done: int = 0
    started: float = field(default_factory=time.perf_counter)

    def line(self) -> str:
        elapsed = time.perf_counter() - self.started
        left = f", about {_clock(elapsed / self.jobs_done * (self.jobs - self.jobs_done))} left" if self.jobs_done else ""
        return (f"sweep: job {min(self.jobs_done + 1, self.jobs)}/{self.jobs}, {self.runs_done} runs done, "
                f"{_clock(elapsed)} elapsed{left}")

    def summary(self) -> str:
        return (f"sweep: {self.jobs_done} of {self.jobs} jobs, {self.runs_done} runs, "
                f"{_clock(time.perf_counter() - self.started)}")


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


SWEEP = SweepState()


def count_jobs(overrides: list[str], sweeper_params: dict | None) -> int:
    """Jobs a Hydra multirun makes of its command-line overrides and its sweeper's params (a key on
    the command line replaces the sweeper's, as Hydra's basic sweeper does)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    texts = [f"{k}={v}" for k, v in (sweeper_params or {}).items()] + list(overrides)
    by_key = {o.key_or_group: o for o in OverridesParser.create().parse_overrides(texts)}
    n = 1
    for o in by_key.values():
        if o.is_sweep_override():
            n *= len(list(o.sweep_string_iterator()))
    return n


class Progress:
    def __init__(self, enabled: bool = True, total: int = 1):
        self.console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
        self.enabled = enabled
        self.t0 = time.perf_counter()
        self._bar = None
        if enabled:
            self._bar = RichProgress(
                TextColumn("[bold blue]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                console=self.console, transient=not sys.stderr.isatty(),
            )
            self._bar.start()
            if SWEEP.jobs:
                self._bar.add_task(SWEEP.line(), total=SWEEP.jobs, completed=SWEEP.jobs_done)
            self._task = self._bar.add_task("starting", total=total)
            if SWEEP.jobs and not self.console.is_terminal:
                self.console.print(SWEEP.line(), highlight=False)
        self._started = False

    def step(self, description: str) -> None:
        if not self.enabled:
            return
        if self._started:
            self._bar.advance(self._task)
        self._started = True
        self._bar.update(self._task, description=description)
        if not self.console.is_terminal:
            self.console.print(f"[{time.perf_counter() - self.t0:7.1f}s] {description}", highlight=False)

    def extend(self, steps: int) -> None:
        """More steps than planned (a run cut into many epochs)."""
        if self.enabled and steps > 0:
            self._bar.update(self._task, total=self._bar.tasks[0].total + steps)

    def warn(self, message: str) -> None:
        self.console.print(f"[yellow]warning:[/yellow] {message}", highlight=False)

    def done(self) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=self._bar.tasks[0].total, description="done")
            self._bar.stop()
