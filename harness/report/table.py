"""The comparison table printed at the end of a run; headers and formats from the metrics registry."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from harness.report import metrics

COLUMNS = ("throughput_eps", "latency_p50_ms", "latency_p95_ms", "load_max_min", "obj_replication",
           "query_replication", "dispatcher_bytes", "worker_index_bytes_max", "build_s")


def comparison_table(rows: list[dict]) -> Table:
    t = Table(title="strategy comparison (measured epoch; throughput = events / bottleneck CPU time)")
    t.add_column("strategy")
    for col in COLUMNS:
        t.add_column(metrics.label(col), justify="right")
    t.add_column("oracle", justify="right")
    for r in rows:
        name = r.get("variant") or r["strategy"]
        if r.get("status") != "ok":
            t.add_row(name, f"[red]{str(r.get('error', 'error'))[:200]}[/red]", *[""] * len(COLUMNS))
            continue
        oracle = {True: "[green]ok[/green]", False: "[red]MISMATCH[/red]", None: "n/a"}[r.get("oracle_ok")]
        t.add_row(name, *(metrics.show(col, r.get(col)) for col in COLUMNS), oracle)
    return t


def print_comparison(rows: list[dict]) -> None:
    Console(width=None if sys.stdout.isatty() else 170).print(comparison_table(rows))
    first = rows[0] if rows else {}
    if first:
        shared = ", ".join(f"{metrics.metric(k).short} {metrics.show(k, first.get(k, 0.0), unit=True)}"
                           for k in ("time_spark_start_s", "time_data_s", "time_oracle_s"))
        print(f"time: {shared}; {metrics.metric('wall_s').short} per strategy: " + ", ".join(
            f"{r.get('variant') or r['strategy']} {metrics.show('wall_s', r.get('wall_s', 0), unit=True)}"
            for r in rows))
