"""Where a batch of presets spent its wall time, from the rows its runs wrote: the answer to "why
does `make reproduce` take this long" that says which cost to cut (issue 39).

Each run row carries its own driver time (`wall_s`: fit, measured work, Spark overhead, summary),
its logging time, and its share of its invocation's Spark start, data preparation and oracle
(`time_invocation_share_s`, the three `time_*_s` divided by the invocation's runs). Summed over a
preset's runs, those shares give each invocation cost once; what the preset's process took beyond
all of it is process start (Python, Hydra, the JVM), figures and reports.
"""

from __future__ import annotations

import pandas as pd

INVOCATION = ("time_spark_start_s", "time_data_s", "time_oracle_s")
COLUMNS = ("spark start", "data", "oracle", "fit", "measured work", "per-run overhead", "process and reports")


def _sum(rows: pd.DataFrame, column: str) -> float:
    return float(pd.to_numeric(rows[column], errors="coerce").fillna(0.0).sum()) if column in rows else 0.0


def preset_budget(rows: pd.DataFrame, preset_s: float) -> dict[str, float]:
    """Seconds per cost (COLUMNS) of one preset whose process took `preset_s`, from its runs' rows.
    The measured work counts every repetition; the per-run overhead is the rest of each run's
    driver time (Spark jobs' scheduling, summary, logging)."""
    parts = rows[list(INVOCATION)].apply(pd.to_numeric, errors="coerce").fillna(0.0) \
        if set(INVOCATION) <= set(rows) else pd.DataFrame(0.0, index=rows.index, columns=list(INVOCATION))
    share = pd.to_numeric(rows.get("time_invocation_share_s", pd.Series(0.0, index=rows.index)),
                          errors="coerce").fillna(0.0)
    total = parts.sum(axis=1).where(lambda s: s > 0)
    # a run's share of each invocation cost: its share of their sum, split as the invocation spent it
    invocation = {c: float((parts[c] / total * share).fillna(0.0).sum()) for c in INVOCATION}
    fit, work = _sum(rows, "build_s"), _sum(rows, "work_s")
    per_run = _sum(rows, "wall_s") + _sum(rows, "logging_s") - fit - work
    accounted = sum(invocation.values()) + fit + work + per_run
    return {"spark start": invocation["time_spark_start_s"], "data": invocation["time_data_s"],
            "oracle": invocation["time_oracle_s"], "fit": fit, "measured work": work, "per-run overhead": per_run,
            "process and reports": max(0.0, preset_s - accounted)}


def budget_table(table: pd.DataFrame, presets: list[tuple[str, float]], version: str | None = None) -> list[str]:
    """Markdown: per preset (name, process seconds) the seconds of each cost and their shares over
    the batch, read from the preset's rows (of `version` when given)."""
    if version is not None and "code_version" in table:
        table = table[table["code_version"] == version]
    lines = ["| preset | runs | " + " | ".join(COLUMNS) + " |", "|---|---:|" + "---:|" * len(COLUMNS)]
    totals = dict.fromkeys(COLUMNS, 0.0)
    for preset, seconds in presets:
        rows = table[table["experiment"] == preset] if "experiment" in table else table.iloc[:0]
        budget = preset_budget(rows, seconds)
        for k, v in budget.items():
            totals[k] += v
        lines.append(f"| {preset} | {len(rows)} | " + " | ".join(f"{budget[c]:.0f}" for c in COLUMNS) + " |")
    whole = sum(totals.values()) or 1.0
    lines.append("| **all** (share) | | " + " | ".join(f"**{totals[c]:.0f}** ({totals[c] / whole:.0%})"
                                               for c in COLUMNS) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    """`python -m harness.report.time_budget [--results DIR]`: the table for the presets of the last
    `make reproduce` (results/reproduce/durations.json holds each preset's process seconds)."""
    import argparse
    import json

    from harness.report import results

    parser = argparse.ArgumentParser(prog="python -m harness.report.time_budget", description=main.__doc__)
    parser.add_argument("--results", default=None, help="the results folder (default: results/ or $STPS_RESULTS)")
    root = results.results_root(parser.parse_args(argv).results)
    durations = root / "reproduce" / "durations.json"
    if not durations.exists():
        raise SystemExit(f"{durations} does not exist: run make reproduce first")
    table = results.read_runs_table(root)
    version = table["code_version"].dropna().iloc[-1] if "code_version" in table and len(table) else None
    print("\n".join(budget_table(table, list(json.loads(durations.read_text()).items()), version)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
