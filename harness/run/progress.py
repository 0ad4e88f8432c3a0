"""A progress display for long runs: one bar over the run's steps, with elapsed time."""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn


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
            self._task = self._bar.add_task("starting", total=total)
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
