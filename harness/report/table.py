"""The comparison table printed at the end of a run; headers and formats from the metrics registry."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from harness.report import metrics

# the default columns: both throughputs (the measured compute-only one and the network model's)
# with their intervals, what bounds the run, the measured balance and the replication; the rest of
# a run's figures are in the runs table (`table.columns=[...]` chooses others)
COLUMNS = ("throughput_compute_eps", "throughput_network_eps", "bottleneck_resource", "busy_max_min",
           "obj_replication")
# headers short enough for an 80-column terminal (the registry's labels elsewhere)
HEADERS = {"throughput_compute_eps": "compute\nev/s", "throughput_network_eps": "network\nev/s",
           "bottleneck_resource": "bound\nby", "busy_max_min": "busy\nmax/min", "obj_replication": "obj\ncopies",
           "throughput_eps": "ev/s"}
THROUGHPUTS = ("throughput_eps", "throughput_compute_eps", "throughput_network_eps")
WIDTH = 80  # the table's width when stdout is not a terminal (a log)


def compact(v) -> str:
    """A rate in three significant digits: 1.07M, 540k, 812."""
    if v is None or v != v:
        return "-"
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g}{suffix}"
    return f"{v:.3g}"


def idle_workers(r: dict) -> bool:
    """A run in which fewer workers received events than were requested."""
    used = r.get("partitions_actual")
    return r.get("status") == "ok" and used is not None and used < r["workers"]


def workers_used(r: dict) -> str:
    """"454/1000" when fewer workers received events than were requested, else the worker count."""
    return f"{int(r['partitions_actual'])}/{r['workers']}" if idle_workers(r) else str(r.get("workers", ""))


def with_interval(r: dict, col: str) -> str:
    """A throughput with its interval as a relative half-width ("1.07M ±3%"), or "(model)" when the
    interval has no width: the network model's output for a link-bound run, not a measurement."""
    text = compact(r.get(col)) + ("*" if r.get("too_short") else "")
    lo, hi, mid = r.get(f"{col}_ci_lo"), r.get(f"{col}_ci_hi"), r.get(col)
    if (r.get("repetitions") or 0) < 2 or lo is None or hi is None or not mid:
        return text
    if hi == lo:
        return text + " model"
    return text + f" ±{100 * (hi - lo) / 2 / mid:.0f}%"


def comparison_table(rows: list[dict], columns: list[str] | tuple[str, ...] = ()) -> Table:
    """One row per successful run, the strategy's name never cut (a failed run's error and an
    oracle mismatch are printed under the table: `status_lines`); a "used" column only when some
    run left workers idle (it explains an infinite max/min)."""
    columns = tuple(columns) or COLUMNS
    t = Table(title="strategies compared (events/s over the busiest resource's time; \u00b1: the repetitions' "
                    "interval; model: the network model's zero-width output)", title_justify="left",
              box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    rows = [r for r in rows if r.get("status") == "ok"]
    names = [(r.get("variant") or r.get("strategy") or "") + ("!" if r.get("oracle_ok") is False else "")
             for r in rows]
    t.add_column("strategy", no_wrap=True, min_width=max(map(len, names), default=8))
    idle = any(idle_workers(r) for r in rows)
    if idle:
        t.add_column("used", justify="right")
    for col in columns:
        t.add_column(HEADERS.get(col, metrics.label(col)), justify="right", no_wrap=True)
    for name, r in zip(names, rows):
        lead = [name, workers_used(r)] if idle else [name]
        cells = [with_interval(r, col) if col in THROUGHPUTS else
                 str(r.get(col)).replace("dispatcher", "disp").replace("_", " ")
                 if col == "bottleneck_resource" and r.get(col) else
                 metrics.show(col, r.get(col)) for col in columns]
        t.add_row(*lead, *cells)
    return t


def status_lines(rows: list[dict]) -> list[str]:
    """What the table leaves out: the oracle's verdict over the runs, and each failed run's error
    on one line."""
    ok = [r for r in rows if r.get("status") == "ok"]
    wrong = [r.get("variant") or r["strategy"] for r in ok if r.get("oracle_ok") is False]
    checked = sum(1 for r in ok if r.get("oracle_ok") is not None)
    lines = [f"oracle: {checked - len(wrong)} of {len(ok)} runs equal it"
             + (f"; MISMATCH (marked !): {', '.join(wrong)}" if wrong else "")
             + (f"; {len(ok) - checked} not checked" if checked < len(ok) else "")]
    for r in rows:
        if r.get("status") != "ok":
            lines.append(f"failed: {r.get('variant') or r['strategy']}: {' '.join(str(r.get('error')).split())}")
    return lines


def _shown_path(path) -> str:
    """A path as a user would type it: relative to the working directory when inside it."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path(os.getcwd()).resolve()))
    except ValueError:
        return str(p)


def where_lines(rows: list[dict], runs_table, keep_pairs: bool) -> list[str]:
    """Where the runs' results are and the one command that exports them as readable rows (issue
    52): the runs table with a row per run (its run_id), each run's folder, and
    `python -m harness.export` on a run's folder (runs that kept their results: keep_pairs=true)."""
    if not rows:
        return []
    dirs = [r["run_dir"] for r in rows if r.get("run_dir")]
    if not dirs:
        return []
    one = len(dirs) == 1
    folder = _shown_path(dirs[0]) if one else _shown_path(Path(dirs[0]).parent) + "/<run_id>"
    ids = ", ".join(f"{r.get('variant') or r['strategy']} {r['run_id']}" for r in rows if r.get("run_id"))
    lines = [f"results: the runs table {_shown_path(runs_table)} (a row per run, by run_id: {ids}); "
             f"run folder{'' if one else 's'}: {folder}"]
    export = f"python -m harness.export {folder}"
    if keep_pairs:
        lines.append(f"readable rows: {export} (one CSV per query family, in its export/ folder)")
    else:
        lines.append(f"readable rows: run again with keep_pairs=true (it keeps every result), then {export}")
    return lines


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
    if row.get("rescuable_rows"):  # issue 52: the option that would keep them
        parts.append(f"dataset.text_rest_of_line=true would read {int(row['rescuable_rows']):,} of the "
                     "field_count_mismatch rows whole (their text, the last field, holds the delimiter)")
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


def _say(text: str) -> None:
    """A footer line, wrapped to the table's width in a log (a terminal wraps it itself)."""
    print(text if sys.stdout.isatty() else textwrap.fill(text, WIDTH, subsequent_indent="  "))


def print_comparison(rows: list[dict], columns: list[str] | tuple[str, ...] = ()) -> None:
    Console(width=None if sys.stdout.isatty() else WIDTH).print(comparison_table(rows, columns))
    for line in status_lines(rows):
        _say(line)
    first = rows[0] if rows else {}
    if first:
        shared = ", ".join(f"{metrics.metric(k).short} {metrics.show(k, first.get(k, 0.0), unit=True)}"
                           for k in ("time_spark_start_s", "time_data_s", "time_oracle_s"))
        _say(f"time: {shared}; {metrics.metric('wall_s').short} per strategy: " + ", ".join(
            f"{r.get('variant') or r['strategy']} {metrics.show('wall_s', r.get('wall_s', 0), unit=True)}"
            for r in rows))
        _say(input_line(first))
        if any(r.get("too_short") for r in rows):
            _say("* the bottleneck was busy for less than measure.min_bottleneck_s: timer noise may dominate "
                  "that figure (a larger workload measures it better)")
        reps, dropped = int(first.get("repetitions") or 1), int(first.get("repetitions_discarded") or 0)
        _say(f"repetitions: each measured epoch ran {reps + dropped} times, the first {dropped} not counted; "
              + (f"throughput is the median of {reps}, the interval covers it with "
                 f"{metrics.show('ci_coverage', first.get('ci_coverage'))}%" if reps > 1 else
                 "one counted: no interval (measure.repeat sets how many)"))
