"""One page per diagnosed claim (docs/claims/<claim-id>.md) and a cause catalogue per paper
(docs/claims/causes-<paper>.md): reading them, their index, and what the results site shows of them.

A claim page opens with a header block, then its diagnosis:

    # <claim-id>

    - Claim: `<claim-id>` (conf/claims.yaml)
    - Paper: <title> (`<paper>`); causes: [causes-<paper>.md](causes-<paper>.md)
    - Preset: `<preset>`
    - Evidence: code_version `<version>`, last run read <YYYY-MM-DD HH:MM> UTC, from <which record>
    - Cause: [P2](causes-ps2stream.md#cause-p2), ... (or "none named")
    - Command: `python -m harness.report.claims <claim-id> --results docs/reproduction/2026-11-29/tables`

    ## Diagnosis

    <the diagnosis, as written>

Why a page per claim: a diagnosis is written against the evidence of one code version; stating
that version beside it lets the site mark a diagnosis whose claim's evidence has moved on as stale
("diagnosis stale (written at X, evidence at Y)") instead of showing an old reading as current.

`python -m harness.report.site.claim_pages index [--check]` writes (or checks) docs/claims/README.md,
the index of the pages, generated from their headers alone.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

import pandas as pd

from harness.report import claims as claims_mod
from harness.report.claims.report import PAPER_TITLES, PAPERS
from harness.report.results import PROJECT_ROOT

CLAIMS_DIR = PROJECT_ROOT / "docs" / "claims"
RECORD_TABLES = "docs/reproduction/2026-11-29/tables"  # the committed evidence the pages' commands read
INDEX = "README.md"
CAUSES = "causes-{paper}.md"
DIAGNOSIS_HEADING = "## Diagnosis"

_FIELD = re.compile(r"^- (?P<key>[A-Z][A-Za-z ]*): (?P<value>.*)$")
_VERSION = re.compile(r"code_version `(?P<v>[^`]+)`")
_DATE = re.compile(r"last run read (?P<d>\d{4}-\d{2}-\d{2} \d{2}:\d{2}) UTC")
_CAUSE_LINK = re.compile(r"\[(?P<label>[^\]]+)\]\((?P<file>causes-[a-z0-9_]+\.md)#(?P<anchor>[a-z0-9-]+)\)")


@dataclass
class ClaimPage:
    """A claim page's header and diagnosis (`fields`: every `- Key: value` line of the header)."""

    id: str
    path: Path
    fields: dict[str, str]
    body: str
    code_version: str | None = None
    evidence_date: str | None = None  # "YYYY-MM-DD HH:MM" (UTC), the newest run the diagnosis's evidence read
    causes: list[tuple[str, str]] = field(default_factory=list)  # (label, "causes-<paper>.md#cause-x")

    @property
    def preset(self) -> str | None:
        m = re.search(r"`([^`]+)`", self.fields.get("Preset", ""))
        return m.group(1) if m else None

    @property
    def paper(self) -> str | None:
        m = re.search(r"\(`([a-z0-9_]+)`\)", self.fields.get("Paper", ""))
        return m.group(1) if m else None


def parse_page(path: Path) -> ClaimPage:
    """A claim page; a ValueError naming the file and what is missing when its header is not the
    documented one (a page the site could not date would never be marked stale)."""
    lines = Path(path).read_text().splitlines()
    if not lines or not lines[0].startswith("# "):
        raise ValueError(f"{path}: the first line must be '# <claim-id>'; found {lines[:1]!r}")
    cid = lines[0][2:].strip()
    if DIAGNOSIS_HEADING not in lines:
        raise ValueError(f"{path}: no '{DIAGNOSIS_HEADING}' line; allowed: the header block, then "
                         f"'{DIAGNOSIS_HEADING}', then the diagnosis")
    cut = lines.index(DIAGNOSIS_HEADING)
    fields = {m["key"]: m["value"] for m in map(_FIELD.match, lines[1:cut]) if m}
    missing = [k for k in ("Claim", "Paper", "Preset", "Evidence", "Cause", "Command") if k not in fields]
    if missing:
        raise ValueError(f"{path}: header lacks {', '.join(missing)}; allowed: the fields of "
                         f"harness/report/site/claim_pages.py's docstring")
    version, date = _VERSION.search(fields["Evidence"]), _DATE.search(fields["Evidence"])
    causes = [(m["label"], f"{m['file']}#{m['anchor']}") for m in _CAUSE_LINK.finditer(fields["Cause"])]
    return ClaimPage(cid, Path(path), fields, "\n".join(lines[cut + 1:]).strip(),
                     version["v"] if version else None, date["d"] if date else None, causes)


def pages(directory: Path | None = None) -> dict[str, ClaimPage]:
    """Every claim page of `directory` (docs/claims/) by claim id; the index and the cause
    catalogues are not claim pages."""
    directory = CLAIMS_DIR if directory is None else Path(directory)
    if not directory.is_dir():
        return {}
    out = {}
    for path in sorted(directory.glob("*.md")):
        if path.name == INDEX or path.name.startswith("causes-"):
            continue
        page = parse_page(path)
        if page.id != path.stem:
            raise ValueError(f"{path}: its heading names claim {page.id!r}; allowed: the file's name, {path.stem!r}")
        out[page.id] = page
    return out


def diagnoses(directory: Path | None = None) -> dict[str, str]:
    """The diagnoses by claim id (each page's text after its header)."""
    return {cid: p.body for cid, p in pages(directory).items()}


# ------------------------------------------------------------------------------------------ evidence


def stamp(started_at) -> str | None:
    """A run's start as the pages write it: "YYYY-MM-DD HH:MM" (UTC)."""
    t = pd.to_datetime(started_at, utc=True, errors="coerce")
    return None if pd.isna(t) else f"{t:%Y-%m-%d %H:%M}"


def evidence_of(preset: str, table: pd.DataFrame) -> tuple[str | None, str | None]:
    """The code version a claim of `preset` reads in `table` (claims.evidence: the preset's newest
    code version) and the start of the newest run read (or of the newest run of that version when
    none is usable); (None, None) when the table has no run of the preset."""
    if "experiment" not in table or not (table["experiment"] == preset).any():
        return None, None
    rows, _, version = claims_mod.evidence(preset, table)
    if not len(rows):
        mine = table[table["experiment"] == preset]
        rows = mine[mine["code_version"] == version] if version is not None and "code_version" in mine else mine
    dates = [d for d in map(stamp, rows["started_at"]) if d] if "started_at" in rows else []
    return (None if version is None else str(version)), (max(dates) if dates else None)


def staleness(page: ClaimPage, version: str | None, date: str | None) -> str | None:
    """"diagnosis stale (written at X, evidence at Y)" when the claim's evidence (`version`, its
    newest run `date`) is of another code version than the page states and newer than the page's
    date (or the page states none); None when current, or when there is no evidence to compare."""
    if version is None or page.code_version == version:
        return None
    if page.evidence_date is not None and date is not None and date <= page.evidence_date:
        return None  # the evidence is older than the diagnosis: not a stale diagnosis
    written = (page.code_version or "no code_version stated") + (f", {page.evidence_date}" if page.evidence_date else "")
    now = version + (f", {date}" if date else "")
    return f"diagnosis stale (written at {written}, evidence at {now})"


# ------------------------------------------------------------------------------------------ the site


@dataclass
class Note:
    """What the site shows under a claim: its page (linked), the staleness mark, the diagnosis."""

    page: ClaimPage
    stale: str | None
    href: str

    def html(self) -> str:
        mark = f'<p class="stale"><strong>{escape(self.stale)}</strong></p>' if self.stale else ""
        return (mark + f'<p>diagnosis page: <a href="{escape(self.href)}">{escape(self.page.id)}</a> '
                f"(docs/claims/{escape(self.page.path.name)}; evidence: {escape(self.page.fields['Evidence'])})</p>"
                f'<div class="diag">{escape(self.page.body)}</div>')


def note_html(note: Note | str | None) -> str:
    """A claim's diagnosis as the site shows it (a plain string: shown escaped, as written)."""
    if note is None:
        return "<p><em>no diagnosis written yet</em></p>"
    return note.html() if isinstance(note, Note) else f'<div class="diag">{escape(note)}</div>'


def site_notes(claim_results, table: pd.DataFrame, out: Path, directory: Path | None = None) -> dict[str, Note]:
    """Per diagnosed claim of `claim_results`: its Note, the page copied as HTML to
    `out`/claims/<id>.html (with the paper's cause catalogue beside it), and the staleness of the
    page against the runs the claim's verdict reads in `table`."""
    directory = CLAIMS_DIR if directory is None else Path(directory)
    found = pages(directory)
    by_preset: dict[str, tuple[str | None, str | None]] = {}
    notes: dict[str, Note] = {}
    for r in claim_results:
        page = found.get(r.claim["id"])
        if page is None:
            continue
        preset = r.claim["preset"]
        if preset not in by_preset:
            by_preset[preset] = evidence_of(preset, table)
        notes[page.id] = Note(page, staleness(page, *by_preset[preset]), f"claims/{page.id}.html")
    if notes:
        (out / "claims").mkdir(parents=True, exist_ok=True)
        for note in notes.values():
            (out / "claims" / f"{note.page.id}.html").write_text(_text_page(note.page.path, note.stale))
        for path in sorted(directory.glob("causes-*.md")):
            (out / "claims" / f"{path.stem}.html").write_text(_text_page(path))
    return notes


def anchor(heading: str) -> str:
    """A heading's anchor as GitHub makes it ("Cause P3" -> "cause-p3")."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-")


def _text_page(path: Path, stale: str | None = None) -> str:
    """A Markdown page of docs/claims/ as a self-contained HTML page (its text, escaped; its links
    to the cause catalogues point at their HTML copies)."""
    text = escape(path.read_text())
    text = re.sub(r"^## (.+)$", lambda m: f'<a id="{anchor(m[1])}"></a>{m[0]}', text, flags=re.M)
    text = re.sub(r"\((causes-[a-z0-9_]+)\.md(#[a-z0-9-]+)?\)",
                  lambda m: f'(<a href="{m[1]}.html{m[2] or ""}">{m[1]}.md{m[2] or ""}</a>)', text)
    mark = f"<p><strong>{escape(stale)}</strong></p>" if stale else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\">"
            f"<title>{escape(path.stem)}</title></head><body>{mark}<p>docs/claims/{escape(path.name)}; "
            f'<a href="../index.html">the site</a></p><pre style="white-space:pre-wrap">{text}</pre></body></html>\n')


# ------------------------------------------------------------------------------------------ the index


def index_markdown(directory: Path | None = None) -> str:
    """docs/claims/README.md: the diagnosed claims per paper, each with its preset, evidence and
    causes, from the pages' headers alone (nothing judged, so it is regenerated in a blink)."""
    directory = CLAIMS_DIR if directory is None else Path(directory)
    found = pages(directory)
    lines = ["# Diagnosed claims", "",
             "For every claim that does not hold or holds partly at the default sizes: the measured cause, the "
             "command that shows it, and whether the claim would hold at the paper's setting. \"Not reproduced at "
             "this size\" is written only with the size sweep behind it.", "",
             "One page per diagnosed claim (`<claim-id>.md`): a header with the claim's paper, preset, the "
             "`code_version` of the evidence the diagnosis was written against, its causes and the command that "
             "re-derives its verdict from the committed tables; then the diagnosis. The causes that recur are "
             "stated once per paper in `causes-<paper>.md`. The results site (`make site`) shows each page under "
             "its claim and marks it stale when the claim's evidence is of a newer code version than the page "
             "states. This index is generated: `python -m harness.report.site.claim_pages index` "
             "(a test fails when it is stale).", ""]
    papers = list(PAPERS) + sorted({p.paper for p in found.values() if p.paper} - set(PAPERS))
    for paper in papers:
        mine = [p for p in found.values() if p.paper == paper]
        catalogue = CAUSES.format(paper=paper)
        if not mine and not (directory / catalogue).exists():
            continue
        lines += [f"## {PAPER_TITLES.get(paper, paper)}", ""]
        if (directory / catalogue).exists():
            lines += [f"Causes: [{catalogue}]({catalogue}).", ""]
        if mine:
            lines += ["| claim | preset | evidence code_version | last run read (UTC) | causes |",
                      "|---|---|---|---|---|"]
            for p in mine:
                causes = ", ".join(f"[{label}]({href})" for label, href in p.causes) or "none named"
                lines.append(f"| [{p.id}]({p.path.name}) | `{p.preset}` | `{p.code_version or 'not stated'}` | "
                             f"{p.evidence_date or 'not stated'} | {causes} |")
            lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.report.site.claim_pages", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["index"], help="index: write docs/claims/README.md from the pages")
    parser.add_argument("--check", action="store_true", help="only check that the index is current (exit 1 if not)")
    parser.add_argument("--dir", default=None, help="the pages' folder (default: docs/claims)")
    args = parser.parse_args(argv)
    directory = Path(args.dir) if args.dir else CLAIMS_DIR
    try:
        text = index_markdown(directory)
    except ValueError as exc:
        print(f"cannot read the claim pages: {exc}", file=sys.stderr)
        return 2
    path = directory / INDEX
    if args.check:
        current = path.exists() and path.read_text() == text
        print(f"{path}: {'current' if current else 'stale; run python -m harness.report.site.claim_pages index'}")
        return 0 if current else 1
    path.write_text(text)
    print(f"wrote: {path} ({len(pages(directory))} claim pages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
