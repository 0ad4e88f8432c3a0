"""What a reported figure is: its name, unit, meaning, better direction and display format.

The registry of every metric a run reports is harness/report/metrics.py; the type lives at the
bottom layer so that a query family can declare the figures it computes (`Family.metrics`) without
importing the report.
"""

from __future__ import annotations

from dataclasses import dataclass

BETTER = ("higher", "lower", None)


@dataclass(frozen=True)
class Metric:
    name: str
    short: str  # what a reader calls it: "throughput", "L_max/L_min"
    unit: str  # of the stored value; "" for ratios and shares
    description: str
    better: str | None  # "higher", "lower", or None for descriptive figures (counts, digests, setup times)
    fmt: str = "{:,.2f}"  # display format, applied to value * scale
    display_unit: str | None = None  # shown instead of `unit` (bytes as MB)
    scale: float = 1.0  # stored value * scale = displayed value
    log: bool = False  # plotted on a log axis (ratios that span orders of magnitude)
    # a column of the runs table (results/runs.parquet), the one table claims and the site read; False
    # for a figure kept only in the run's folder and MLflow (metrics.json, the per-epoch series
    # epochs.parquet and a run row's epoch<N>_<timing>): the runs table's column list is derived from this
    column: bool = True

    @property
    def shown_unit(self) -> str:
        return self.unit if self.display_unit is None else self.display_unit
