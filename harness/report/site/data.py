"""What the results site shows, assembled from the runs table and the claims (no HTML here:
harness/report/site/html.py renders it, site_figures.py draws it).

- figures: per preset a paper's claims read and per metric those claims compare, the runs the
  claims read (`claims.evidence`: the newest code version, the newest usable run per cell), with
  the runs left out, the claims and their provenance;
- papers: the figures of each paper in the order its claims name them;
- strategies: every run a strategy took part in (the runs each preset's claims read), its rank
  among the strategies of the same preset and cell on each basis, and the figures that explain a
  first or last place (bottleneck resource, object replication, busy max/min beside the cell's
  median).
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.report import claims as claims_mod
from harness.report import results
from harness.report.claims import BASES, CELL, ClaimResult, counted
from harness.report.claims.report import PAPER_TITLES, PAPERS

THROUGHPUT = "throughput_eps"
BASIS_COLUMN = claims_mod.BASIS_COLUMNS[THROUGHPUT]  # compute / network -> runs-table column
# what a figure's CSV and a strategy's run table carry beside the plotted figures
ID_COLUMNS = ["run_id", "variant", "strategy", *CELL, "code_version", "config_key", "started_at", "repetitions",
              "cluster"]
WHY = ["bottleneck_resource", "obj_replication", "busy_max_min"]  # what explains a rank


def slug(text: str) -> str:
    """A file-name-safe form of a label, unique per label ("kdt + gr" -> "kdt-gr-<crc>")."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-") or "x"
    return safe if safe == str(text) else f"{safe}-{zlib.crc32(str(text).encode()) % 10000:04d}"


@dataclass
class Figure:
    key: str  # file stem under figures/ and the page anchor (fig-<key>)
    preset: str
    metric: str
    data: pd.DataFrame  # one row per run read: ID_COLUMNS and the plotted columns
    columns: dict[str, tuple[str, str, str]]  # series name -> (mid, lo, hi) columns of `data`
    xaxis: str | None  # "x" or "workers" for a line plot over that axis, None: one point per cell
    claims: list[ClaimResult]
    excluded: list[str]
    version: str | None

    @property
    def title(self) -> str:
        return f"{self.preset}: {self.metric}"


@dataclass
class PaperPage:
    paper: str
    title: str
    figures: list[Figure]
    claims: list[ClaimResult]


@dataclass
class StrategyPage:
    name: str
    slug: str
    runs: pd.DataFrame  # every run read, with rank_<basis>, n_<basis> and the cell's medians
    first: pd.DataFrame  # the runs where it ranks first on some basis (two strategies or more)
    last: pd.DataFrame
    unread: int = 0  # its other rows of the runs table (failed, superseded, older code, no preset)


@dataclass
class Site:
    table: pd.DataFrame
    claims: list[ClaimResult]
    papers: list[PaperPage]
    strategies: list[StrategyPage]
    read: pd.DataFrame  # every preset's runs read, with a `preset` column
    built: dict = field(default_factory=dict)  # when, where and from which commit the site was built


def paper_claims(claim_results: list[ClaimResult], paper: str, scope: str | None = "paper") -> list[ClaimResult]:
    """A paper's claims (scope None: harness extensions included)."""
    return [r for r in claim_results if r.claim.get("paper") == paper
            and (scope is None or r.claim.get("scope", "paper") == scope)]


def tally_groups(claim_results: list[ClaimResult]) -> list[tuple[str, str, list[ClaimResult]]]:
    """(key, title, claims) per paper (its own claims) and the harness extensions, as
    claims_report.tally_table groups them (retired claims left out); empty groups left out."""
    claim_results = counted(claim_results)
    papers = list(PAPERS) + sorted({r.claim.get("paper") for r in claim_results} - set(PAPERS) - {None})
    groups = [(p, PAPER_TITLES.get(p, p), paper_claims(claim_results, p)) for p in papers]
    groups.append(("extensions", "harness extensions", [r for r in claim_results if r.claim.get("scope") == "extension"]))
    return [g for g in groups if g[2]]


def _series(metric: str, rows: pd.DataFrame) -> dict[str, tuple[str, str, str]]:
    if metric == THROUGHPUT:
        return {b: (c, f"{c}_ci_lo", f"{c}_ci_hi") for b, c in BASIS_COLUMN.items()}
    return {metric: (metric, f"{metric}_ci_lo", f"{metric}_ci_hi")}


def _xaxis(rows: pd.DataFrame) -> str | None:
    """A line plot over the swept numeric x (or the worker counts of a preset with no x)."""
    if not len(rows):
        return None
    if rows["x"].notna().any():
        xn = pd.to_numeric(rows["x"], errors="coerce")
        return "x" if xn[rows["x"].notna()].notna().all() and xn.nunique() > 1 else None
    return "workers" if pd.to_numeric(rows["workers"], errors="coerce").nunique() > 1 else None


def figure_of(preset: str, metric: str, claim_results: list[ClaimResult], table: pd.DataFrame) -> Figure:
    """The runs the preset's claims read, with the columns that draw `metric`."""
    rows, excluded, version = claims_mod.evidence(preset, table)
    series = _series(metric, rows)
    wanted = [*ID_COLUMNS, *(c for cols in series.values() for c in cols)]
    data = rows.reindex(columns=list(dict.fromkeys(wanted))).sort_values(["variant", *CELL], key=_sortable)
    return Figure(slug(f"{preset}-{metric}"), preset, metric, data.reset_index(drop=True), series, _xaxis(data),
                  claim_results, excluded, version)


def _sortable(col: pd.Series) -> pd.Series:
    num = pd.to_numeric(col, errors="coerce")
    return num.astype(float) if num.notna().sum() == col.notna().sum() else col.astype(str)


def paper_pages(claim_results: list[ClaimResult], table: pd.DataFrame) -> list[PaperPage]:
    """Per paper with claims: a figure per (preset, metric) its claims read, in the claims' order."""
    pages = []
    papers = list(PAPERS) + sorted({r.claim.get("paper") for r in claim_results} - set(PAPERS) - {None})
    for paper in papers:
        mine = paper_claims(claim_results, paper, scope=None)
        if not mine:
            continue
        keys = list(dict.fromkeys((r.claim["preset"], r.claim["check"]["metric"]) for r in mine))
        figures = [figure_of(p, m, [r for r in mine if (r.claim["preset"], r.claim["check"]["metric"]) == (p, m)],
                             table) for p, m in keys]
        pages.append(PaperPage(paper, PAPER_TITLES.get(paper, paper), figures, mine))
    return pages


def runs_read(table: pd.DataFrame) -> pd.DataFrame:
    """Every preset's runs as its claims read them, one frame with a `preset` column."""
    presets = sorted(set(table["experiment"].dropna().astype(str))) if "experiment" in table else []
    frames = [claims_mod.evidence(p, table)[0].assign(preset=p) for p in presets]
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame(columns=["preset", *ID_COLUMNS, *BASIS_COLUMN.values(), *WHY])
    read = pd.concat(frames, ignore_index=True)
    for col in (*BASIS_COLUMN.values(), *WHY, *ID_COLUMNS):
        if col not in read:
            read[col] = None
    return read


def ranked(read: pd.DataFrame) -> pd.DataFrame:
    """Each run's rank on each basis among the strategies of its preset and cell (1 = the highest
    throughput), the number ranked, and the cell's medians of the figures that explain a rank."""
    read = read.copy()
    group = read[["preset", *CELL]].astype(str).agg("|".join, axis=1) if len(read) else pd.Series(dtype=object)
    for basis, col in BASIS_COLUMN.items():
        value = pd.to_numeric(read[col], errors="coerce")
        read[f"rank_{basis}"] = value.groupby(group).rank(ascending=False, method="min")
        read[f"n_{basis}"] = value.groupby(group).transform("count")
    for col in ("obj_replication", "busy_max_min"):
        read[f"cell_median_{col}"] = pd.to_numeric(read[col], errors="coerce").groupby(group).transform("median")
    return read


def strategy_pages(read: pd.DataFrame, table: pd.DataFrame) -> list[StrategyPage]:
    read = ranked(read)
    rows = results.labelled(table)["variant"].astype(str).value_counts() if len(table) else pd.Series(dtype=int)
    pages = []
    for name, runs in read.groupby("variant", sort=True):
        runs = runs.sort_values(["preset", *CELL], key=_sortable).reset_index(drop=True)
        first = pd.Series(False, index=runs.index)
        last = pd.Series(False, index=runs.index)
        for basis in BASES:
            n, rank = runs[f"n_{basis}"], runs[f"rank_{basis}"]
            first |= (n > 1) & (rank == 1)
            last |= (n > 1) & (rank == n)
        pages.append(StrategyPage(str(name), slug(str(name)), runs, runs[first], runs[last],
                                  int(rows.get(str(name), 0)) - len(runs)))
    return pages


def provenance(rows: pd.DataFrame) -> dict:
    """Where the rows come from: code versions, config keys, clusters, dates, repetitions."""
    def values(col):
        return sorted(map(str, rows[col].dropna().unique())) if col in rows else []

    reps = pd.to_numeric(rows["repetitions"], errors="coerce").dropna() if "repetitions" in rows else pd.Series([])
    dates = values("started_at")
    return {"runs": len(rows), "code_version": values("code_version"), "config_keys": values("config_key"),
            "cluster": values("cluster"), "first": dates[0] if dates else None, "last": dates[-1] if dates else None,
            "repetitions": (int(reps.min()), int(reps.max())) if len(reps) else None}


def built(table: pd.DataFrame, claim_results: list[ClaimResult]) -> dict:
    """What the site is built from, and nothing of when, where or at which commit it is built (so
    the same tables and claims give the same bytes, a record rebuilds from its committed tables;
    issue 50): the runs table's size, code versions and run dates, and a digest of the claims judged."""
    def values(col):
        return sorted(map(str, table[col].dropna().unique())) if col in table else []

    dates = pd.to_datetime(table["started_at"], utc=True, errors="coerce").dropna() if "started_at" in table else []
    claims = json.dumps([r.claim for r in claim_results], sort_keys=True, default=str)
    return {"runs": len(table), "code_version": values("code_version"),
            "first": f"{min(dates):%Y-%m-%d %H:%M}" if len(dates) else None,
            "last": f"{max(dates):%Y-%m-%d %H:%M}" if len(dates) else None,
            "claims": len(claim_results), "claims_sha256": hashlib.sha256(claims.encode()).hexdigest()[:12]}


def built_text(b: dict) -> str:
    """The build's provenance in words (the site's footer, the record's header)."""
    dates = f", started {b['first']} to {b['last']} UTC" if b.get("first") else ""
    return (f"from the runs table alone: {b.get('runs', 0):,} runs of code version "
            f"{', '.join(b.get('code_version') or ['not recorded'])}{dates}; {b.get('claims', 0)} claims judged "
            f"(sha256 of the claims judged: {b.get('claims_sha256', 'not computed')})")


def assemble(table: pd.DataFrame, claims: list[dict] | None = None) -> Site:
    """The site's content from the runs table (claims: conf/claims.yaml's when None)."""
    claim_results = claims_mod.evaluate_all(table, claims=claims)
    read = runs_read(table)
    return Site(table, claim_results, paper_pages(claim_results, table), strategy_pages(read, table), read,
                built(table, claim_results))
