"""The calibration declaration (conf/calibration.yaml), read and checked before anything is fitted.

Per paper: the model's terms (a subset of TERMS, decided from the paper's text and written down
with the reason), the count-mode runs the figures are compared with, and the figures themselves,
each with its role (fit or held out), measure, published value, unit and the paper's line; or a
`too_few_figures` entry with the reason. A model with more terms than fit figures is refused
(issue 51 part 3: "a model with more free constants than fitted figures is refused"), as are an
unknown term, measure, role or unit, a figure without a line, a ratio used for fitting (only an
absolute figure fixes a constant's scale) and a figure naming a run that is not declared. Every
error names the paper, the figure, the field, its value and what is allowed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from harness.report.results import PROJECT_ROOT

DECLARATION_FILE = PROJECT_ROOT / "conf" / "calibration.yaml"
PAPERS = ("ps2stream", "sstd", "tornado", "dkmsks", "dskype")
STATUSES = ("calibrated", "too_few_figures")
TERMS = ("messages", "candidates", "results", "updates", "migration")
ROLES = ("fit", "heldout")
# measure -> the unit its published value is in
MEASURES = {"throughput": "tuples/s", "latency": "ms", "knn_update": "ms", "insertion": "ms", "deletion": "ms",
            "spread": "ms", "throughput_ratio": "ratio"}
HELDOUT_ONLY = ("spread", "throughput_ratio")  # not linear in the constants, or not absolute
LINE = re.compile(r"^[a-z0-9-]+\.txt l\.\d+(-\d+)?$")
FIGURE_FIELDS = ("id", "role", "measure", "value", "unit", "line", "run", "strategy")


class DeclarationError(ValueError):
    """A declaration that cannot be fitted as written (the message names field, value, allowed)."""


@dataclass(frozen=True)
class Figure:
    id: str
    role: str  # fit | heldout
    measure: str  # a key of MEASURES
    value: float  # as published, in `unit`
    unit: str
    line: str  # "paper.txt l.N"
    run: str  # a key of the paper's runs
    strategy: str  # the count folder's label (the runs table's variant)
    over: str | None = None  # throughput_ratio: the denominator's strategy


@dataclass(frozen=True)
class Run:
    name: str
    overrides: str  # `python -m harness.counts <overrides> counts.out=<COUNTS>/<name>`
    gap: str = ""  # the distance from the paper's setting, in words


@dataclass(frozen=True)
class PaperModel:
    paper: str
    status: str
    terms: tuple[str, ...] = ()
    why: str = ""
    reason: str = ""  # too_few_figures: why
    paper_size: str = ""
    runs: dict[str, Run] = field(default_factory=dict)
    figures: tuple[Figure, ...] = ()

    @property
    def fit(self) -> tuple[Figure, ...]:
        return tuple(f for f in self.figures if f.role == "fit")

    @property
    def heldout(self) -> tuple[Figure, ...]:
        return tuple(f for f in self.figures if f.role == "heldout")


def _bad(where: str, name: str, value, allowed: str) -> DeclarationError:
    return DeclarationError(f"calibration {where}: {name}={value!r} is invalid; allowed: {allowed}")


def parse(doc) -> dict[str, PaperModel]:
    """The declaration's models by paper, from the YAML document (a mapping with a `calibration:`
    key, or that key's value); a DeclarationError at the first thing that cannot be fitted."""
    if isinstance(doc, dict) and "calibration" in doc:
        doc = doc["calibration"]
    if not isinstance(doc, dict) or not doc:
        raise _bad("file", "calibration", doc, f"a mapping from paper ({', '.join(PAPERS)}) to its model")
    return {paper: _paper(paper, body) for paper, body in doc.items()}


def _paper(paper: str, body) -> PaperModel:
    if paper not in PAPERS:
        raise _bad("file", "paper", paper, ", ".join(PAPERS))
    if not isinstance(body, dict):
        raise _bad(paper, "entry", body, "a mapping with status, terms, runs and figures")
    status = body.get("status")
    if status not in STATUSES:
        raise _bad(paper, "status", status, ", ".join(STATUSES))
    if status == "too_few_figures":
        reason = body.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise _bad(paper, "reason", reason, "the reason, as text, why the paper's figures cannot calibrate a model")
        return PaperModel(paper, status, reason=reason.strip())
    terms = body.get("terms")
    if not isinstance(terms, list) or not terms:
        raise _bad(paper, "terms", terms, f"a non-empty list of {', '.join(TERMS)}")
    for t in terms:
        if t not in TERMS:
            raise _bad(paper, "terms", t, ", ".join(TERMS))
    if len(set(terms)) != len(terms):
        raise _bad(paper, "terms", terms, "each term once")
    why = body.get("why")
    if not isinstance(why, str) or not why.strip():
        raise _bad(paper, "why", why, "the reason, from the paper's text, for the terms chosen")
    runs_body = body.get("runs")
    if not isinstance(runs_body, dict) or not runs_body:
        raise _bad(paper, "runs", runs_body, "a mapping from a run name to {overrides, gap}")
    runs = {}
    for name, r in runs_body.items():
        if not isinstance(r, dict) or not isinstance(r.get("overrides"), str) or not r["overrides"].strip():
            raise _bad(f"{paper} run {name}", "overrides", (r or {}).get("overrides") if isinstance(r, dict) else r,
                       "the count mode's overrides, as text")
        runs[str(name)] = Run(str(name), r["overrides"].strip(), str(r.get("gap", "")))
    figures = body.get("figures")
    if not isinstance(figures, list) or not figures:
        raise _bad(paper, "figures", figures, "a non-empty list of figures")
    parsed = tuple(_figure(paper, i, f, runs) for i, f in enumerate(figures))
    ids = [f.id for f in parsed]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise _bad(paper, "figure id", dup[0], "ids unique within a paper")
    model = PaperModel(paper, status, tuple(terms), why.strip(), "", str(body.get("paper_size", "")), runs, parsed)
    if not model.heldout:
        raise _bad(paper, "figures", f"{len(model.fit)} fit, 0 held out", "at least one held-out figure to judge "
                   "the model on")
    if len(model.terms) > len(model.fit):
        raise DeclarationError(
            f"calibration {paper}: terms={list(model.terms)!r} is refused: {len(model.terms)} free constants for "
            f"{len(model.fit)} fit figure(s); allowed: at most as many terms as fit figures ({len(model.fit)})")
    return model


def _figure(paper: str, i: int, f, runs: dict[str, Run]) -> Figure:
    where = f"{paper} figure #{i}"
    if not isinstance(f, dict):
        raise _bad(where, "figure", f, "a mapping with " + ", ".join(FIGURE_FIELDS))
    where = f"{paper} figure {f.get('id', '#' + str(i))!r}"
    for k in FIGURE_FIELDS:
        if f.get(k) in (None, ""):
            raise _bad(where, k, f.get(k), {"line": "the paper's line, as 'paper.txt l.N'"}.get(k, "a value"))
    if f["role"] not in ROLES:
        raise _bad(where, "role", f["role"], ", ".join(ROLES))
    if f["measure"] not in MEASURES:
        raise _bad(where, "measure", f["measure"], ", ".join(MEASURES))
    if f["unit"] != MEASURES[f["measure"]]:
        raise _bad(where, "unit", f["unit"], f"{MEASURES[f['measure']]!r} for measure {f['measure']}")
    if not LINE.match(str(f["line"])):
        raise _bad(where, "line", f["line"], "the paper's line, as 'paper.txt l.N' or 'paper.txt l.N-M'")
    value = f["value"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise _bad(where, "value", value, "the published figure, a number > 0")
    if f["run"] not in runs:
        raise _bad(where, "run", f["run"], ", ".join(runs))
    if f["role"] == "fit" and f["measure"] in HELDOUT_ONLY:
        raise _bad(where, "role", "fit", f"heldout for measure {f['measure']} (not an absolute figure linear in the "
                   "constants)")
    over = f.get("over")
    if (f["measure"] == "throughput_ratio") != (over is not None):
        raise _bad(where, "over", over, "the denominator's strategy for throughput_ratio, and only there")
    return Figure(str(f["id"]), f["role"], f["measure"], float(value), f["unit"], str(f["line"]), str(f["run"]),
                  str(f["strategy"]), None if over is None else str(over))


def load(path: Path = DECLARATION_FILE) -> dict[str, PaperModel]:
    return parse(yaml.safe_load(Path(path).read_text()))
