"""The comparison table printed at the end of a run; headers and formats from the metrics registry."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from harness.report import metrics

COLUMNS = ("throughput_eps", "bottleneck_resource", "latency_p50_ms", "latency_p95_ms", "busy_max_min",
           "load_max_min", "obj_replication",
           "query_replication", "dispatcher_bytes", "worker_index_bytes_max", "build_s")


def idle_workers(r: dict) -> bool:
    """A run in which fewer workers received events than were requested."""
    used = r.get("partitions_actual")
    return r.get("status") == "ok" and used is not None and used < r["workers"]


def workers_used(r: dict) -> str:
    """"454/1000" when fewer workers received events than were requested, else the worker count."""
    return f"{int(r['partitions_actual'])}/{r['workers']}" if idle_workers(r) else str(r.get("workers", ""))


def interval(r: dict) -> str:
    """"lo-hi": the throughput's interval when the run repeated (its coverage: the footer)."""
    if (r.get("repetitions") or 0) < 2:
        return "-"
    return (f"{metrics.show('throughput_eps', r.get('throughput_eps_ci_lo'))}-"
            f"{metrics.show('throughput_eps', r.get('throughput_eps_ci_hi'))}")


def comparison_table(rows: list[dict]) -> Table:
    """One row per run; a "workers used" column only when some run left workers idle (it explains an
    infinite L_max/L_min)."""
    basis = next((r["throughput_basis"] for r in rows if r.get("throughput_basis")), "compute")
    t = Table(title=f"strategy comparison (measured epochs; throughput: {basis}, events / the busiest "
                    f"{'resource' if basis != 'compute' else 'CPU'}'s time)")
    t.add_column("strategy")
    idle = any(idle_workers(r) for r in rows)
    if idle:
        t.add_column("workers used", justify="right")
    repeated = any((r.get("repetitions") or 0) > 1 for r in rows)
    for col in COLUMNS:
        t.add_column(metrics.label(col), justify="right")
        if col == "throughput_eps" and repeated:
            t.add_column("interval (events/s)", justify="right", no_wrap=True)
    t.add_column("oracle", justify="right")
    for r in rows:
        name = r.get("variant") or r["strategy"]
        lead = [name, workers_used(r)] if idle else [name]
        if r.get("status") != "ok":
            t.add_row(*lead, f"[red]{str(r.get('error', 'error'))[:200]}[/red]", *[""] * (len(COLUMNS) + repeated))
            continue
        oracle = {True: "[green]ok[/green]", False: "[red]MISMATCH[/red]", None: "n/a"}[r.get("oracle_ok")]
        cells = [metrics.show(col, r.get(col)) + ("*" if col == "throughput_eps" and r.get("too_short") else "")
                 for col in COLUMNS]
        if repeated:
            cells.insert(1, interval(r))
        t.add_row(*lead, *cells, oracle)
    return t


def input_line(row: dict) -> str:
    """The footer line on the input every run shared: rows skipped per reason, objects the workload
    reused, stream anomalies normalised (none of these may pass in silence)."""
    skipped = int(row.get("bad_rows") or 0)
    reasons = [f"{k.removeprefix('bad_rows_')} {int(v)}" for k, v in row.items()
               if k.startswith("bad_rows_") and v]
    parts = [f"{skipped:,} of {int(row.get('input_rows') or 0):,} rows skipped"
             + (f" ({', '.join(reasons)})" if reasons else "")]
    if row.get("rescued_rows"):  # dataset.text_rest_of_line
        parts.append(f"{int(row['rescued_rows']):,} rows rescued (their text held the delimiter)")
    factor = row.get("object_reuse_factor")
    if row.get("objects_reused"):
        parts.append(f"workload reuses each object {factor:.2f} times ({int(row['objects_reused']):,} object events "
                     f"beyond the dataset's {int(row['dataset_objects']):,})")
    elif factor is not None:
        parts.append("no object reused")
    anomalies = [f"{k} {int(row[k])}" for k in metrics.ANOMALIES if row.get(k)]
    if anomalies:
        parts.append("stream anomalies normalised: " + ", ".join(anomalies))
    return "input: " + "; ".join(parts)


def print_comparison(rows: list[dict]) -> None:
    Console(width=None if sys.stdout.isatty() else 170).print(comparison_table(rows))
    first = rows[0] if rows else {}
    if first:
        shared = ", ".join(f"{metrics.metric(k).short} {metrics.show(k, first.get(k, 0.0), unit=True)}"
                           for k in ("time_spark_start_s", "time_data_s", "time_oracle_s"))
        print(f"time: {shared}; {metrics.metric('wall_s').short} per strategy: " + ", ".join(
            f"{r.get('variant') or r['strategy']} {metrics.show('wall_s', r.get('wall_s', 0), unit=True)}"
            for r in rows))
        print(input_line(first))
        if any(r.get("too_short") for r in rows):
            print("* the bottleneck was busy for less than measure.min_bottleneck_s: timer noise may dominate "
                  "that figure (a larger workload measures it better)")
        reps, dropped = int(first.get("repetitions") or 1), int(first.get("repetitions_discarded") or 0)
        print(f"repetitions: each measured epoch ran {reps + dropped} times, the first {dropped} not counted; "
              + (f"throughput is the median of {reps}, the interval covers it with "
                 f"{metrics.show('ci_coverage', first.get('ci_coverage'))}%" if reps > 1 else
                 "one counted: no interval (measure.repeat sets how many)"))
