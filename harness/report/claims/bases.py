"""Derived bases (issue 51 part 4): throughput figures computed from the runs rather than measured,
on which the throughput claims are judged too, beside the compute and network bases.

A derived basis is a name and a function (runs, workers, root) -> per run (indexed by run_id) a
throughput in events/s: a Series (a point, shown as a model output) or a DataFrame with columns
`value`, `lo`, `hi` (its band) and optionally `note` (one line saying where the figure comes from);
NaN or no row where the basis has no figure for a run (its paper has no model, no count run at
the paper's size). `attach` adds each basis's column, `throughput_<name>_eps` (with `_ci_lo`,
`_ci_hi`), to the runs table the claims read, only when some run has a figure: without one the
table, and so every report, is what it was. A claim is judged on a derived basis only when some run
it reads has the basis's figure (harness/report/claims/__init__.py, `evaluate_both`); elsewhere it
shows no column for that basis at all.

Registered:

- `projected` (harness/report/projection.py): the per-operation costs of this machine, fitted per
  strategy on the table's timed runs, times the counts of a count-mode run of the claim's cell at
  the paper's size. A claim that holds here and not on compute follows from the paper's scale.
- `calibrated` (issue 51 part 3, harness/report/calibration/): the constants each paper's declared
  figures fitted (conf/calibration.yaml) times each run's own per-worker counts.

A claim that holds on a derived basis and does not hold on compute is listed as that basis's
finding (`FINDINGS`, claims.findings): for the calibrated basis "the paper's result follows from
its system's per-message cost".
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from harness.report import calibration, projection
from harness.report.results import TABLES_DIR

BasisFn = Callable[[pd.DataFrame, pd.DataFrame, "Path | None"], "pd.Series | pd.DataFrame"]


@dataclass(frozen=True)
class DerivedBasis:
    name: str
    fn: BasisFn
    title: str  # what the basis is, for the reports' notes
    finding: str  # what a claim holding here and not on compute says
    # whether the basis can have a figure for these runs at all (cheap: skips reading the workers
    # tables when not); None: always asked
    applies: Callable[[pd.DataFrame, "Path | None"], bool] | None = None
    # whether the basis may judge a claim (its model speaks for the claim's paper); None: every claim
    claims: Callable[[dict], bool] | None = None


REGISTRY: dict[str, DerivedBasis] = {}


def register(name: str, fn: BasisFn, title: str, finding: str, applies=None, claims=None) -> None:
    if not name.isidentifier() or name in ("compute", "network", "any"):
        raise ValueError(f"derived basis name {name!r} is invalid; allowed: an identifier other than compute, "
                         "network and any")
    REGISTRY[name] = DerivedBasis(name, fn, title, finding, applies, claims)


register("projected", projection.projected_throughput,
         "this machine's per-operation costs (fitted per strategy on the timed runs) times the counts of a "
         "count-mode run of the same cell at the paper's size (harness/report/projection.py)",
         "the paper's result follows from its scale (this machine's costs, the paper's counts)",
         applies=lambda runs, root: bool(projection.count_folders(root)))
@lru_cache(maxsize=4)
def _fitted_papers(path: Path | None, mtime_ns: int) -> frozenset:
    """The papers of a constants table, read once per version of the file (every claim asks)."""
    fitted = calibration.basis.load_constants(path)
    return frozenset(fitted["paper"]) if "paper" in fitted else frozenset()


def _calibrated_paper(claim: dict) -> bool:
    """A claim of a paper whose constants were fitted: the calibrated basis speaks for that paper's
    system only (a Tornado claim on an SSTD preset's runs would read SSTD's constants)."""
    path = calibration.basis.newest_constants_file()
    return path is not None and claim.get("paper") in _fitted_papers(path, path.stat().st_mtime_ns)


register("calibrated", lambda runs, workers, root: calibration.calibrated_throughput(runs, workers),
         "a cost model per paper fitted on the paper's published figures (conf/calibration.yaml, "
         "harness/report/calibration/) applied to each run's per-worker counts",
         "the paper's result follows from its system's per-message cost", claims=_calibrated_paper)


def judges(name: str, claim: dict) -> bool:
    """Whether the derived basis `name` may judge `claim` (see DerivedBasis.claims)."""
    basis = REGISTRY[name]
    return basis.claims is None or bool(basis.claims(claim))


def column(name: str) -> str:
    """The runs-table column a derived basis fills."""
    return f"throughput_{name}_eps"


def present(table: pd.DataFrame) -> list[str]:
    """The derived bases whose column the table has, in the registry's order."""
    return [n for n in REGISTRY if column(n) in table]


def root_of(runs: pd.DataFrame) -> Path | None:
    """The results folder (or record tables) the runs were read from: a record's `tables_dir`, else
    the parent of the runs' folders (<root>/runs/<run_id>)."""
    if TABLES_DIR in runs and runs[TABLES_DIR].notna().any():
        return Path(str(runs[TABLES_DIR].dropna().iloc[0]))
    dirs = runs["run_dir"].dropna() if "run_dir" in runs else pd.Series(dtype=object)
    dirs = [d for d in dirs if isinstance(d, str) and d]
    return Path(dirs[0]).parent.parent if dirs else None


def _frame(out, name: str) -> pd.DataFrame:
    """A basis function's answer as value, lo, hi, note by run_id."""
    if isinstance(out, pd.Series):
        out = pd.DataFrame({"value": out})
    if not isinstance(out, pd.DataFrame) or "value" not in out:
        raise ValueError(f"derived basis {name!r} returned {type(out).__name__}; allowed: a Series of events/s by "
                         "run_id, or a DataFrame with value (and lo, hi, note)")
    out = out.copy()
    for c in ("lo", "hi"):
        if c not in out:
            out[c] = out["value"]
    if "note" not in out:
        out["note"] = None
    out["value"] = pd.to_numeric(out["value"], errors="coerce")
    return out[np.isfinite(out["value"]) & (out["value"] > 0)]


def attach(runs: pd.DataFrame, workers: pd.DataFrame | None = None, root: Path | None = None,
           bases: list[str] | None = None) -> pd.DataFrame:
    """The runs table with each derived basis's column where some run has a figure (the table itself,
    unchanged, when none has). `workers` (every run's workers table with run_id) and `root` are read
    from where the runs were read when not given."""
    if not len(runs) or "run_id" not in runs:
        return runs
    root = root if root is not None else root_of(runs)
    added = {}
    for name in bases if bases is not None else list(REGISTRY):
        if name not in REGISTRY:
            raise ValueError(f"derived basis {name!r} is unknown; allowed: {', '.join(REGISTRY)}")
        basis = REGISTRY[name]
        if basis.applies is not None and not basis.applies(runs, root):
            continue
        if workers is None:
            workers = projection.workers_table(root, runs) if root is not None else pd.DataFrame()
        got = _frame(basis.fn(runs, workers, root), name)
        got = got[got.index.isin(runs["run_id"])]
        if len(got):
            added[name] = got
    if not added:
        return runs
    runs = runs.copy()
    for name, got in added.items():
        col = column(name)
        runs[col] = runs["run_id"].map(got["value"])
        runs[f"{col}_ci_lo"] = runs["run_id"].map(got["lo"])
        runs[f"{col}_ci_hi"] = runs["run_id"].map(got["hi"])
        runs[f"{col}_note"] = runs["run_id"].map(got["note"])
    return runs


def has_figures(table: pd.DataFrame, name: str, run_ids: list) -> bool:
    """Whether some of the runs `run_ids` has the basis's figure."""
    col = column(name)
    if col not in table or not run_ids or "run_id" not in table:
        return False
    v = pd.to_numeric(table.loc[table["run_id"].isin(run_ids), col], errors="coerce")
    return bool(np.isfinite(v).any())


def notes(table: pd.DataFrame, name: str, run_ids: list, limit: int = 3) -> list[str]:
    """The distinct notes of the basis's figures for the runs `run_ids` (where each comes from)."""
    col = f"{column(name)}_note"
    if col not in table:
        return []
    seen = [n for n in table.loc[table["run_id"].isin(run_ids), col].dropna().astype(str).unique() if n]
    return seen[:limit] + ([f"... and {len(seen) - limit} more"] if len(seen) > limit else [])

