"""`python -m harness.report.count_sizes FOLDER [--out FILE]`: what the count-mode runs under a
folder reached, one row per run from its meta.json (harness/counts/app.py writes it): the
strategy, workload and size, the events of the full stream and those counted, the object sample
and its stated relative standard errors on the measured totals, the count's and the invocation's
wall time, the process's peak resident set, the code version and the command (issue 51 part 1:
"per paper, the size reached, wall time and peak memory").

Why a command: the record's figures for the sizes reached are read off the committed tables, not
copied by hand (issue 50 part 2).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from harness.report import results

SIZE_KEYS = ("queries", "preload_objects", "window", "updates")


def _relative_se(folder: Path, column: str) -> float:
    """The stated relative standard error of a measured total (the counts' `<column>_se`)."""
    workers = pd.read_parquet(folder / "counts_workers.parquet")
    workers = workers[workers["epoch"] > 0]
    if column not in workers or f"{column}_se" not in workers or workers[column].sum() <= 0:
        return float("nan")
    return float(np.sqrt((workers[f"{column}_se"] ** 2).sum()) / workers[column].sum())


def reached(root: Path) -> pd.DataFrame:
    """One row per count run (a folder with meta.json) under `root`, by its path."""
    rows = []
    for meta_file in sorted(Path(root).rglob("meta.json")):
        folder = meta_file.parent
        meta = json.loads(meta_file.read_text())
        workload = meta.get("workload") or {}
        p = float(meta.get("object_sample", 1.0))
        rows.append({
            "run": str(folder.relative_to(root)), "strategy": meta.get("label") or meta.get("strategy"),
            "workload": workload.get("name"), "workers": meta.get("workers"),
            **{k: workload.get(k) for k in SIZE_KEYS},
            "events_full": meta.get("events_full"), "events_counted": meta.get("events_run"),
            "object_sample": p,
            "candidates_rel_se": _relative_se(folder, "candidates") if p < 1 else 0.0,
            "results_rel_se": _relative_se(folder, "results") if p < 1 else 0.0,
            "count_s": meta.get("wall_s"), "invocation_s": meta.get("invocation_s"),
            "peak_gib": float(meta.get("peak_rss_bytes", float("nan"))) / 2 ** 30,
            "code_version": meta.get("code_version"), "command": " ".join(meta.get("command") or []),
        })
    return pd.DataFrame(rows)


def markdown(frame: pd.DataFrame) -> list[str]:
    if frame.empty:
        return ["No count run (no meta.json) under the folder."]
    fmt = lambda v: "-" if v is None or (isinstance(v, float) and not np.isfinite(v)) else (  # noqa: E731
        f"{int(v):,}" if isinstance(v, (int, float)) and float(v).is_integer() else f"{v:g}")
    lines = ["| run | strategy | workload | workers | queries | preload | window | updates | events (full / counted) "
             "| sample | candidates, results: rel. s.e. | count / invocation (s) | peak (GiB) | code |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in frame.itertuples():
        pct = lambda v: f"{v:.1%}" if np.isfinite(v) else "-"  # noqa: E731
        se = "exact" if r.object_sample >= 1 else f"{pct(r.candidates_rel_se)}, {pct(r.results_rel_se)}"
        lines.append(f"| {r.run} | {r.strategy} | {r.workload} | {fmt(r.workers)} | {fmt(r.queries)} | "
                     f"{fmt(r.preload_objects)} | {fmt(r.window)} | {fmt(r.updates)} | "
                     f"{fmt(r.events_full)} / {fmt(r.events_counted)} | {r.object_sample:g} | {se} | "
                     f"{r.count_s:.0f} / {r.invocation_s:.0f} | {r.peak_gib:.2f} | {r.code_version} |")
    lines += ["", "Commands (from the repository root; `<COUNTS>` the folder written):", ""]
    lines += [f"- {r.run}: `python -m {r.command}`" for r in frame.itertuples()]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.report.count_sizes", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="a folder of count-mode runs (each a folder with meta.json, at any depth)")
    parser.add_argument("--out", default=None, help="write the Markdown here (default: print it)")
    args = parser.parse_args(argv)
    results.write_or_print("\n".join(markdown(reached(Path(args.folder)))) + "\n", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
