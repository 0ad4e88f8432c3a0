"""Where a preset's runs spend their time and copies (issue 40: the measured cause behind a verdict),
read from a runs table without running anything.

One row per cell (dataset, workload, workers, x, facet, variant): the newest ok run, with its throughput
on both bases and their repetition intervals, the headline's bottleneck resource and the seconds
each modelled resource would take (busiest worker's CPU, dispatcher CPU, links, the merge stage),
the busiest worker against the mean (time and load), and the copies an object, a query and a
stored subscription make. bandwidth_table.py shows the same runs across bandwidths; this shows
them across cells. Usage, from the repository root:

    python benchmarks/run_anatomy.py dskype_workers --runs results/runs.parquet
    python benchmarks/run_anatomy.py dskype_workers --where dataset=synthetic --columns merge_s emp_us
"""

from __future__ import annotations

import argparse

import pandas as pd

CELL = ["dataset", "workload", "workers", "x", "facet", "variant"]
COLUMNS = ["throughput_compute_eps", "throughput_compute_eps_ci_lo", "throughput_compute_eps_ci_hi",
           "throughput_network_eps", "bottleneck_resource", "resource_worker_cpu_s",
           "resource_dispatcher_cpu_s", "resource_worker_link_s", "resource_dispatcher_link_s",
           "resource_merge_s", "busy_max_mean", "load_max_mean", "obj_replication",
           "query_replication", "stored_replication", "repetitions", "too_short", "oracle_ok"]


def newest_per_cell(runs: pd.DataFrame, preset: str, where: dict[str, str] | None = None) -> pd.DataFrame:
    """The newest ok run of each cell of `preset` (every column), narrowed by `where` (column ->
    value, compared as text); also what bandwidth_table.py reads."""
    ok = runs[(runs.experiment == preset) & (runs.status == "ok")]
    for key, value in (where or {}).items():
        if key not in ok.columns:
            raise SystemExit(f"--where {key}={value}: the runs table has no column {key!r}")
        ok = ok[ok[key].astype(str) == value]
    if ok.empty:
        raise SystemExit(f"no ok run of the preset {preset!r} matches {where or {}}")
    cell = [c for c in CELL if c in ok.columns]
    return ok.sort_values("started_at").groupby(cell, as_index=False, dropna=False).last()


def table(runs: pd.DataFrame, preset: str, where: dict[str, str] | None = None,
          extra: list[str] | None = None) -> pd.DataFrame:
    """`newest_per_cell` with COLUMNS and `extra` (those the table has)."""
    ok = newest_per_cell(runs, preset, where)
    cell = [c for c in CELL if c in ok.columns]
    missing = [c for c in (extra or []) if c not in ok.columns]
    if missing:
        raise SystemExit(f"--columns: the runs table has no column {missing}")
    cols = cell + [c for c in COLUMNS + list(extra or []) if c in ok.columns]
    return ok[cols].sort_values(cell).reset_index(drop=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("preset")
    ap.add_argument("--runs", default="results/runs.parquet")
    ap.add_argument("--where", nargs="*", default=[], metavar="COLUMN=VALUE")
    ap.add_argument("--columns", nargs="*", default=[], metavar="COLUMN", help="more run columns to show")
    args = ap.parse_args()
    where = {}
    for item in args.where:
        if "=" not in item:
            raise SystemExit(f"--where {item!r}: expected COLUMN=VALUE")
        key, value = item.split("=", 1)
        where[key] = value
    out = table(pd.read_parquet(args.runs), args.preset, where, args.columns)
    with pd.option_context("display.width", 300, "display.max_columns", 60, "display.float_format", "{:,.4g}".format):
        print(out.to_string(index=False))


if __name__ == "__main__":
    main()
