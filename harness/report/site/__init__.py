"""`python -m harness.report.site [--results DIR] [--out DIR] [--claims FILE] [--record DIR]`
(`make site`, `make record`): the results site, static and offline, built from the runs table
only, nothing run.

    results/site/index.html              the overview: verdict counts per paper and basis, every claim
    results/site/paper-<paper>.html      a paper's figures, each with the published text and its claims
    results/site/strategy-<name>.html    every run of a strategy, where it ranks first and last, and why
    results/site/figures/<key>.svg|.csv  each figure and the numbers drawn in it
    results/site/downloads/runs.csv|.parquet   the runs table

No JavaScript, no external resource (a page opens from file:// with the network off). `--record
DIR` then copies the overview as Markdown and the figures into DIR (docs/reproduction: the dated
record of a full reproduction; harness/report/site/record.py).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import pandas as pd

from harness.report import claims as claims_mod
from harness.report import results
from harness.report.site import figures as site_figures
from harness.report.site.data import Site, assemble


def build(table: pd.DataFrame, out: Path, claims: list[dict] | None = None, runs_file: Path | None = None,
          diagnoses_dir: Path | None = None) -> Site:
    """The site under `out` (replaced), from `table`; `runs_file`: the Parquet file to offer as
    download (else `table` written as Parquet); `diagnoses_dir`: the claim pages (docs/claims/)."""
    # imported here, not at the top: `python -m harness.report.site.claim_pages` imports this
    # package first, and that module (which html imports) must not be in sys.modules before runpy
    # executes it
    from harness.report.site import claim_pages
    from harness.report.site import html as site_html

    site = assemble(table, claims)
    if out.exists():
        shutil.rmtree(out)
    (out / "downloads").mkdir(parents=True)
    # the runs table as committed: without the folder it was read from (a machine path, issue 50)
    table.drop(columns=[results.TABLES_DIR], errors="ignore").to_csv(out / "downloads" / "runs.csv", index=False)
    if runs_file is not None and runs_file.exists():
        shutil.copyfile(runs_file, out / "downloads" / "runs.parquet")
    else:
        table.drop(columns=[results.TABLES_DIR], errors="ignore").to_parquet(out / "downloads" / "runs.parquet",
                                                                              index=False)
    written = set()
    for paper in site.papers:
        for fig in paper.figures:
            if fig.key not in written:  # two papers may read one preset's figure
                site_figures.write(fig, out / "figures")
                written.add(fig.key)
    notes = claim_pages.site_notes(site.claims, table, out, diagnoses_dir)
    (out / "index.html").write_text(site_html.overview(site))
    for paper in site.papers:
        (out / site_html.paper_file(paper.paper)).write_text(site_html.paper_html(paper, site, notes))
    for strategy in site.strategies:
        (out / site_html.strategy_file(strategy.slug)).write_text(site_html.strategy_html(strategy, site))
    return site


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.report.site", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=None, help="the results folder (default: results/ or $STPS_RESULTS)")
    parser.add_argument("--out", default=None, help="the site's folder (default: <results>/site)")
    parser.add_argument("--claims", default=None, help="the claims file (default: conf/claims.yaml)")
    parser.add_argument("--diagnoses", default=None,
                        help="the claim pages' folder (default: docs/claims; one <claim-id>.md per diagnosed claim)")
    parser.add_argument("--record", default=None, metavar="DIR",
                        help="also copy the overview as Markdown, the figures and the provenance into DIR "
                             "(docs/reproduction)")
    parser.add_argument("--ran-only", action="store_true",
                        help="judge only the claims whose preset has runs in the table (the record of a partial "
                             "re-run: the other claims would read 'not measured' for want of runs, not evidence)")
    args = parser.parse_args(argv)
    root = results.results_root(args.results)
    runs_file = root / "runs.parquet"
    if not runs_file.exists():
        print(f"no runs table at {runs_file}: run an experiment first (make experiment NAME=... or make reproduce)",
              file=sys.stderr)
        return 2
    try:
        claims = claims_mod.load_claims(Path(args.claims) if args.claims else claims_mod.CLAIMS_FILE)
    except (OSError, ValueError) as exc:
        print(f"cannot read the claims: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else root / "site"
    table = results.read_runs_table(root)
    if args.ran_only:
        ran = set(table["experiment"].dropna()) if "experiment" in table else set()
        claims = [c for c in claims if c["preset"] in ran]
        print(f"--ran-only: {len(claims)} claims of the {len(ran)} presets with runs")
    site = build(table, out, claims, runs_file,
                 Path(args.diagnoses) if args.diagnoses else None)
    print(f"wrote: {out / 'index.html'} ({len(site.papers)} paper pages, {len(site.strategies)} strategy pages)")
    if args.record:
        from harness.report.site import record as site_record

        flags = "".join(f"{f} " for f in (f"--results {site_record.shown_path(root)}" if args.results else "",
                                            "--ran-only" if args.ran_only else "") if f)
        for path in site_record.record(site, out, Path(args.record), flags):
            print(f"recorded: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
