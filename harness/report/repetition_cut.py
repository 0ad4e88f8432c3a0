"""`python -m harness.report.repetition_cut --results DIR --repeat N [--presets a,b] [--out FILE]`:
what fewer repetitions would have said, read off runs that were repeated more (issue 50 part 4).

A run keeps every counted repetition's throughputs and busiest-worker times (`reps_<metric>`, JSON
lists in the order they were timed; harness/measure/summary.py). A run at `measure.repeat = N`
(with `measure.discard` = 1) would have counted the first N - 1 of them, so this tool truncates
each list to those, recomputes the median, its interval and the interval's coverage as the run
would have (harness/core/repetitions.py `median_interval`), and judges every claim of the presets
on both tables. The answer to "can the repetitions be cut without losing a claim": how many claims
change verdict kind on each basis, and in particular how many go from measured to "not measured".

What it cannot see: the figures that come from the median repetition alone (latency model,
balance) are left as they are, since the runs table keeps them for that repetition only; and a
run repeated fewer times on a drifting machine is also a shorter run (a smaller share of the drift
falls inside it), which this reading cannot show. The A/A spread that widens every interval
(harness/report/claims/aa_pairs.py) is recomputed from the truncated medians, as a run would have.

Also prints each preset's measured work and what the cut saves of it: the measured epochs are
timed `repeat` times each (the warm-up epoch once), so the work falls by about (7 - N) / 7 of the
measured work (harness/report/time_budget.py reads it from `work_s`).
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import pandas as pd

from harness.core.repetitions import median_interval
from harness.report import claims as claims_mod
from harness.report import results
from harness.report.claims import BASES

REPS = "reps_"


def _reps(value) -> list[float] | None:
    if isinstance(value, str) and value.startswith("["):
        return [float(v) for v in json.loads(value)]
    return None


def truncate(table: pd.DataFrame, counted: int) -> pd.DataFrame:
    """The runs table as if each run had counted only its first `counted` repetitions: every
    `reps_<metric>` list cut to them and `<metric>`, `<metric>_ci_lo/_hi`, `repetitions` and
    `ci_coverage` recomputed from what is left. A run with no more than `counted` keeps its figures."""
    if counted < 1:
        raise ValueError(f"counted={counted!r} is invalid; allowed: an integer >= 1 (measure.repeat - measure.discard)")
    out = table.copy()
    columns = [c for c in table.columns if c.startswith(REPS) and c[len(REPS):] in table.columns]
    for col in columns:
        metric = col[len(REPS):]
        for i, value in table[col].items():
            values = _reps(value)
            if values is None or len(values) <= counted:
                continue
            med, lo, hi, coverage = median_interval(values[:counted])
            out.at[i, metric], out.at[i, f"{metric}_ci_lo"], out.at[i, f"{metric}_ci_hi"] = med, lo, hi
            out.at[i, col] = json.dumps(values[:counted])
            if "repetitions" in out:
                out.at[i, "repetitions"] = float(counted)
            if "ci_coverage" in out:
                out.at[i, "ci_coverage"] = coverage
    return out


def _kinds(result) -> dict[str, str]:
    if "any" in result.verdicts:
        return {b: result.verdicts["any"].verdict for b in BASES}
    return {b: v.verdict for b, v in result.verdicts.items()}


def compare(table: pd.DataFrame, counted: int, presets: list[str] | None = None,
            claims: list[dict] | None = None) -> pd.DataFrame:
    """One row per (claim, basis) of the chosen presets: the verdict on the table as it is and on
    the table truncated to `counted` repetitions, and whether its kind moved."""
    claims = claims_mod.load_claims() if claims is None else claims
    chosen = set(presets) if presets else set(table["experiment"].dropna().unique())
    full = claims_mod.with_derived(table)
    cut = claims_mod.with_derived(truncate(table, counted))
    rows = []
    for c in claims:
        if c["preset"] not in chosen or claims_mod.is_retired(c):
            continue
        before, after = _kinds(claims_mod.evaluate_both(c, full)), _kinds(claims_mod.evaluate_both(c, cut))
        for basis in before:
            b, a = before[basis], after.get(basis, "-")
            rows.append({"claim": c["id"], "preset": c["preset"], "basis": basis, "before": b, "after": a,
                         "moved": b.split(" (")[0] != a.split(" (")[0]})
    return pd.DataFrame(rows, columns=["claim", "preset", "basis", "before", "after", "moved"])


def work_saved(table: pd.DataFrame, repeat: int, presets: list[str] | None = None) -> pd.DataFrame:
    """Per preset: its runs' measured work (minutes, `work_s` summed) at the repetitions they ran
    and at `repeat`, scaled by repeat / (the runs' own repetitions counted + discarded)."""
    rows = table if not presets else table[table["experiment"].isin(presets)]
    ran = (pd.to_numeric(rows.get("repetitions"), errors="coerce").fillna(1.0)
           + pd.to_numeric(rows.get("repetitions_discarded"), errors="coerce").fillna(0.0))
    work = pd.to_numeric(rows.get("work_s"), errors="coerce").fillna(0.0)
    scaled = work * np.minimum(1.0, repeat / ran.clip(lower=1.0))
    frame = pd.DataFrame({"preset": rows["experiment"], "work_min": work / 60, "cut_min": scaled / 60})
    return frame.groupby("preset", sort=True).sum().reset_index()


def markdown(verdicts: pd.DataFrame, work: pd.DataFrame, repeat: int, discard: int) -> list[str]:
    moved = verdicts[verdicts["moved"]]
    lost = verdicts[(verdicts["before"] != "not measured") & (verdicts["after"] == "not measured")]
    lines = [f"# Verdicts at measure.repeat = {repeat} (discard {discard}) beside the runs as they were", "",
             f"{verdicts['claim'].nunique()} claims, {len(verdicts)} verdicts (claim x basis); "
             f"{len(moved)} change kind; {len(lost)} go from measured to not measured.", ""]
    if len(moved):
        lines += ["| claim | preset | basis | as run | at the cut |", "|---|---|---|---|---|"]
        lines += [f"| `{r.claim}` | {r.preset} | {r.basis} | {r.before} | {r.after} |" for r in moved.itertuples()]
        lines.append("")
    lines += ["| preset | measured work as run (min) | at the cut (min) |", "|---|---:|---:|"]
    lines += [f"| {r.preset} | {r.work_min:.1f} | {r.cut_min:.1f} |" for r in work.itertuples()]
    lines += [f"| **all** | **{work['work_min'].sum():.1f}** | **{work['cut_min'].sum():.1f}** |", ""]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.report.repetition_cut",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=None, help="the results folder (default: results/ or $STPS_RESULTS)")
    parser.add_argument("--repeat", type=int, required=True, help="the measure.repeat to read the runs at")
    parser.add_argument("--discard", type=int, default=1, help="measure.discard (default 1)")
    parser.add_argument("--presets", default=None, help="comma-separated presets (default: every preset with runs)")
    parser.add_argument("--out", default=None, help="write the Markdown here (default: print it)")
    args = parser.parse_args(argv)
    if args.repeat <= args.discard:
        parser.error(f"--repeat={args.repeat} is invalid; allowed: an integer > --discard ({args.discard})")
    table = results.read_runs_table(results.results_root(args.results))
    presets = args.presets.split(",") if args.presets else None
    verdicts = compare(table, args.repeat - args.discard, presets)
    text = "\n".join(markdown(verdicts, work_saved(table, args.repeat, presets), args.repeat, args.discard)) + "\n"
    results.write_or_print(text, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
