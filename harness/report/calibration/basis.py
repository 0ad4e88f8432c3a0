"""The calibrated basis for any run: its throughput as the paper's own system would have had it,
by the paper's fitted constants applied to the run's per-worker counts.

`calibrated_throughput(runs, workers)`: per run, events / max over workers of sum_k c_k x_k(w),
x the worker's totals over the measured epochs (the record's workers table: events in, candidate
and snapshot checks, results, inserts + deletes; harness/report/calibration/vectors.py,
measure `throughput`) and c the constants of the run's paper (the paper of the claims that read
the run's preset, conf/claims.yaml, or the one the preset's name says when two papers' claims read
it; or the `paper` given, as a claim of that paper would read it). Runs whose paper has no fitted model (Tornado, DSkype: too few
absolute figures; a preset no claim reads) get NaN. The constants come from the committed table
of the newest record (docs/reproduction/<date>/calibration/constants.csv, written by
`python -m harness.report.calibration`) unless given.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from harness.report.calibration.declaration import TERMS
from harness.report.calibration.vectors import worker_terms
from harness.report.results import PROJECT_ROOT

CLAIMS_FILE = PROJECT_ROOT / "conf" / "claims.yaml"
RECORDS = PROJECT_ROOT / "docs" / "reproduction"
CONSTANTS_NAME = "constants.csv"


def newest_constants_file(root: Path = RECORDS) -> Path | None:
    """The newest record's constants table, or None when no record has one."""
    found = sorted(Path(root).glob(f"*/calibration/{CONSTANTS_NAME}"))
    return found[-1] if found else None


def load_constants(path: Path | None = None) -> pd.DataFrame:
    """The fitted constants (columns paper, term, value in seconds per count, ...); empty when
    there is no table."""
    path = newest_constants_file() if path is None else Path(path)
    if path is None or not Path(path).is_file():
        return pd.DataFrame(columns=["paper", "term", "value"])
    return pd.read_csv(path)


PREFIXES = {"ps2stream": "ps2stream", "sstd": "sstd", "tornado": "tornado", "dkmsks": "dkmsks", "dskype": "dskype",
            "skype": "dskype"}  # a preset's name -> its paper, where claims of two papers read it


def _named_paper(preset: str) -> str | None:
    name = preset[len("size_"):] if preset.startswith("size_") else preset
    return next((p for prefix, p in PREFIXES.items() if name.startswith(prefix)), None)


def preset_papers(claims_file: Path = CLAIMS_FILE) -> dict[str, str]:
    """preset (and size sweep) -> paper, from the claims that read it; a preset claims of two
    papers read (sstd_crq: SSTD's and Tornado's CRQ claims) goes to the paper its name says."""
    out: dict[str, set] = {}
    for c in yaml.safe_load(Path(claims_file).read_text()) or []:
        for preset in (c.get("preset"), c.get("sizes")):
            if preset:
                out.setdefault(preset, set()).add(c.get("paper"))
    named = {p: (next(iter(s)) if len(s) == 1 else _named_paper(p)) for p, s in out.items()}
    return {p: paper for p, paper in named.items() if paper}


def calibrated_throughput(runs: pd.DataFrame, workers: pd.DataFrame, constants: pd.DataFrame | None = None,
                          papers: dict[str, str] | None = None, paper: str | None = None) -> pd.Series:
    """Per run_id, events/s on the calibrated basis (module docstring); NaN where the run's paper
    has no fitted constants, the run has no per-worker counts or no measured events. `paper`:
    every run on that paper's constants (a claim of paper P reads its runs on P's), instead of
    each run's preset's paper."""
    constants = load_constants() if constants is None else constants
    papers = preset_papers() if papers is None else papers
    out = pd.Series(np.nan, index=pd.Index(runs["run_id"], name="run_id"), name="throughput_calibrated_eps")
    if runs.empty or workers.empty or constants.empty:
        return out
    c = (constants.pivot_table(index="paper", columns="term", values="value", aggfunc="first")
         .reindex(columns=list(TERMS)).fillna(0.0))
    terms = worker_terms(workers)
    paper_of_run = runs.drop_duplicates("run_id").set_index("run_id")["experiment"].map(papers)
    if paper is not None:
        paper_of_run = pd.Series(paper, index=paper_of_run.index)
    row_paper = terms["run_id"].map(paper_of_run)
    known = row_paper.isin(c.index).to_numpy()
    if not known.any():
        return out
    t = terms[known]
    coef = c.loc[row_paper[known]].to_numpy()
    seconds = pd.Series((t[list(TERMS)].to_numpy() * coef).sum(axis=1), index=t.index)
    busiest = seconds.groupby(t["run_id"].to_numpy()).max()
    events = runs.drop_duplicates("run_id").set_index("run_id")["events"].astype(float)
    eps = events.reindex(busiest.index) / busiest.where(busiest > 0)
    out.loc[eps.index] = eps.to_numpy()
    return out
