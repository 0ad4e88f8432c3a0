"""The calibrated basis (issue 51 part 3): per paper, non-negative cost constants per message,
candidate check, result and update (and migrated byte), shared by the paper's strategies, fitted
on the paper's own published absolute figures declared beforehand in conf/calibration.yaml, and
judged on the figures it did not see.

    declaration.py  conf/calibration.yaml read and checked (refuses more constants than figures)
    vectors.py      a figure's counts per window, worker and term (count-mode folders, workers tables)
    fit.py          the non-negative fit, its intervals, every figure's prediction and error
    basis.py        calibrated_throughput(runs, workers): a run's events/s on the calibrated basis
    page.py         the constants and figures tables and the Markdown page
    __main__.py     python -m harness.report.calibration --counts <dir> [--out <dir>]
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.report.calibration.basis import calibrated_throughput
from harness.report.calibration.declaration import DECLARATION_FILE, DeclarationError, PaperModel, load
from harness.report.calibration.fit import BOOTSTRAP, Fit, FitFigure, calibrate
from harness.report.calibration.vectors import block_from_folder

__all__ = ["calibrated_throughput", "calibrate_all", "DeclarationError", "load"]


def figure_folder(counts: Path, paper: str, run: str, strategy: str) -> Path:
    """Where a figure's counts are: `python -m harness.counts ... counts.out=<counts>/<paper>/<run>`
    writes one folder per strategy label."""
    return Path(counts) / paper / run / strategy


def calibrate_all(counts: Path, models: dict[str, PaperModel] | None = None, papers: list[str] | None = None,
                  bootstrap: int = BOOTSTRAP) -> tuple[list[Fit], pd.DataFrame, dict[str, list[str]]]:
    """Every calibrated paper's fit from the count folders under `counts`; the sizes counted; and,
    per paper, the count folders that are missing. A missing fit figure's folder leaves the paper
    unfitted; a missing held-out figure's leaves that figure unjudged (listed, never dropped
    silently), since the fit does not depend on it."""
    models = load(DECLARATION_FILE) if models is None else models
    fits, sizes, missing = [], [], {}
    for paper, m in models.items():
        if m.status != "calibrated" or (papers and paper not in papers):
            continue

        def there(run, s):
            return (figure_folder(counts, paper, run, s) / "counts_workers.parquet").is_file()

        def gone(figs):
            return sorted({str(figure_folder(counts, paper, f.run, s).relative_to(counts))
                           for f in figs for s in (f.strategy, f.over) if s and not there(f.run, s)})

        if gone(m.fit):
            missing[paper] = gone(m.figures)
            continue
        rows = {"fit": [], "heldout": []}
        for f in m.figures:
            if not (there(f.run, f.strategy) and (f.over is None or there(f.run, f.over))):
                continue
            block = block_from_folder(figure_folder(counts, paper, f.run, f.strategy), f.measure)
            over = block_from_folder(figure_folder(counts, paper, f.run, f.over), f.measure) if f.over else None
            rows[f.role].append(FitFigure(f, block, over))
        if gone(m.heldout):
            missing[f"{paper} (held out, not judged)"] = gone(m.heldout)
        needed = {(f.run, s) for f in m.figures for s in (f.strategy, f.over) if s and there(f.run, s)}
        for run, s in sorted(needed):
            src = block_from_folder(figure_folder(counts, paper, run, s), "throughput").source
            sizes.append({"paper": paper, "run": run, "strategy": s, "events_full": src.get("events_full") or 0,
                          "object_sample": src.get("object_sample") or 1.0, "wall_s": src.get("wall_s") or 0.0,
                          "peak_gib": (src.get("peak_rss_bytes") or 0) / 2 ** 30,
                          "queries": (src.get("workload") or {}).get("queries")})
        fits.append(calibrate(paper, m.terms, rows["fit"], rows["heldout"], bootstrap=bootstrap))
    return fits, pd.DataFrame(sizes), missing
