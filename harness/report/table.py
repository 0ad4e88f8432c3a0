"""The comparison table printed at the end of a run."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table


def _mb(v) -> str:
    return "-" if v is None else f"{v / 1e6:.2f} MB"


def _num(v, fmt="{:,.0f}") -> str:
    try:
        return fmt.format(v)
    except (TypeError, ValueError):
        return "-"


def comparison_table(rows: list[dict]) -> Table:
    t = Table(title="strategy comparison (measured epoch; throughput = events / bottleneck CPU time)")
    for col in ("strategy", "throughput ev/s", "lat p50 ms", "lat p95 ms", "Lmax/Lmin", "obj repl", "query repl",
                "dispatcher mem", "max worker mem", "build s", "oracle"):
        t.add_column(col, justify="left" if col == "strategy" else "right")
    for r in rows:
        if r.get("status") != "ok":
            t.add_row(r.get("variant") or r["strategy"], f"[red]{str(r.get('error', 'error'))[:200]}[/red]", *[""] * 9)
            continue
        oracle = {True: "[green]ok[/green]", False: "[red]MISMATCH[/red]", None: "n/a"}[r.get("oracle_ok")]
        t.add_row(
            r.get("variant") or r["strategy"], _num(r["throughput_eps"]), _num(r["latency_p50_ms"], "{:.2f}"),
            _num(r["latency_p95_ms"], "{:.2f}"), _num(r["load_max_min"], "{:.2f}"),
            _num(r["obj_replication"], "{:.2f}"), _num(r["query_replication"], "{:.2f}"),
            _mb(r["dispatcher_bytes"]), _mb(r["worker_index_bytes_max"]), _num(r["build_s"], "{:.3f}"), oracle,
        )
    return t


def print_comparison(rows: list[dict]) -> None:
    Console(width=None if sys.stdout.isatty() else 170).print(comparison_table(rows))
    first = rows[0] if rows else {}
    if first:
        spark = first.get("time_spark_start_s", 0.0)
        data = first.get("time_data_s", 0.0)
        print(f"time: spark start {spark:.1f}s, data {data:.1f}s, oracle {first.get('time_oracle_s', 0.0):.1f}s; "
              "per strategy: " + ", ".join(
                  f"{r.get('variant') or r['strategy']} {r.get('wall_s', 0):.1f}s" for r in rows))
