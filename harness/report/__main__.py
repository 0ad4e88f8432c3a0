"""`python -m harness.report [--results DIR]`: rebuild every preset's report
(results/plots/<preset>/report.md) and the overview of every claim (results/report.md) from the
runs table, without running anything."""

from __future__ import annotations

import argparse
import sys

from harness.report import results
from harness.report.claims import report as claims_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.report", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=None, help="the results folder (default: results/ or $STPS_RESULTS)")
    args = parser.parse_args(argv)
    root = results.results_root(args.results)
    if not (root / "runs.parquet").exists():
        print(f"no runs table at {root / 'runs.parquet'}: run an experiment first (make experiment NAME=...)",
              file=sys.stderr)
        return 2
    for path in claims_report.rebuild(root):
        print(f"wrote: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
