"""`python -m harness.report.same_config --results DIR [--within 0.10]`: every configuration that
two or more presets measured, and how far apart their throughputs are.

Issue 48 asks that one configuration measured in two presets read within 10% on a quiet machine
(two presets once measured the same DSkype configuration at 193k and 95.6k events/s). What counts
as one configuration, by what the runs table holds: the runs' `measurement_key` at the same code
(harness/run/record.py: the whole configuration but the preset's identity; runs made since it
exists); else the same event stream (`workload_events_sha256`) at the same code, strategy, workers
and dispatchers; else the strategy on the same dataset, workload, workers, dispatchers, x and
number of measured events. Its spread is max/min - 1 of the runs' throughput on each basis.
Prints one line per configuration and the count within `--within`; reads the runs
table only (a results folder or a record's committed tables)."""

from __future__ import annotations

import argparse

import pandas as pd

from harness.report import results

KEY = ("variant", "adjust", "dataset", "workload", "workers", "dispatchers", "x", "events")
# the stream's digest is a better key than x, which may be another knob in another preset
# (|W| = 20,000 in one, |S| = 20,000 in another), but not a full one (k or the epochs' size may
# differ on one stream); and only at the same code: a change between two presets' runs (a faster
# merger, a new network charge) is no disagreement
STREAM_KEY = ("variant", "adjust", "workers", "dispatchers", "workload_events_sha256", "code_version")
MEASUREMENT_KEY = ("measurement_key", "code_version")
BASES = {"compute": "throughput_compute_eps", "network": "throughput_network_eps"}


def spreads(table: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration measured by two or more presets: the presets and, per basis, the
    spread max/min - 1 of the runs' throughput (ok runs that agreed with their oracle; A/A repeats
    left out, since they measure one preset twice)."""
    rows = table.copy()
    if "status" in rows:
        rows = rows[rows["status"] == "ok"]
    if "oracle_ok" in rows:
        rows = rows[rows["oracle_ok"].astype(object).map(lambda v: v is not False)]
    if "aa_role" in rows:
        rows = rows[rows["aa_role"].astype(object).map(lambda v: v != "a2")]
    by_measurement = "measurement_key" in rows and rows["measurement_key"].notna().all()
    by_stream = "workload_events_sha256" in rows and rows["workload_events_sha256"].notna().all()
    key = MEASUREMENT_KEY if by_measurement else STREAM_KEY if by_stream else KEY
    keys = [k for k in key if k in rows]
    rows["_key"] = rows[keys].astype(str).agg("|".join, axis=1)
    keys = [k for k in dict.fromkeys([*KEY, *keys]) if k in rows]
    out = []
    for _, g in rows.groupby("_key", sort=True):
        if g["experiment"].nunique() < 2:
            continue
        rec = {k: g[k].iloc[0] for k in keys}
        rec["presets"] = ", ".join(sorted(g["experiment"].astype(str).unique()))
        for basis, col in BASES.items():
            v = pd.to_numeric(g.get(col), errors="coerce").dropna() if col in g else pd.Series(dtype=float)
            rec[basis] = float(v.max() / v.min() - 1) if len(v) >= 2 and v.min() > 0 else float("nan")
        out.append(rec)
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.report.same_config", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=None, help="a results folder or a record's tables (default: results/)")
    parser.add_argument("--within", type=float, default=0.10, help="the spread a configuration should stay within")
    args = parser.parse_args(argv)
    if not args.within > 0:
        parser.error(f"--within={args.within!r} is invalid; allowed: a share > 0 (0.10 = 10%)")
    found = spreads(results.read_runs_table(results.results_root(args.results)))
    if found.empty:
        print("no configuration was measured by two presets")
        return 0
    for _, r in found.iterrows():
        at = f" at x={r['x']}" if "x" in r and pd.notna(r["x"]) else ""
        print(f"{r['variant']} {r['dataset']}/{r['workload']}/{r['workers']}w{at} ({r['presets']}): "
              f"compute {r['compute']:+.1%}, network {r['network']:+.1%}")
    for basis in BASES:
        ok = int((found[basis] <= args.within).sum())
        print(f"{basis}: {ok} of {len(found)} configurations within {args.within:.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
