"""One-off (issue 50 part 3): split docs/reproduction/diagnoses.md into docs/claims/<claim-id>.md
(a header, then the section as written) and docs/claims/causes-<paper>.md (each paper's preamble
and every `**Cause ...` block, wherever it stood), then check that every non-empty line of the old
file is in some new file (links re-pointed from docs/reproduction/ to docs/claims/ aside).

Run once from the repository root: PYTHONPATH=. python split_diagnoses.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd

from harness.report import claim_pages, claims as claims_mod, results
from harness.report.claims_report import PAPER_TITLES
from harness.report.site_data import slug

ROOT = Path(".")
OLD = ROOT / "docs/reproduction/diagnoses.md"
OUT = ROOT / "docs/claims"
TABLES = ROOT / claim_pages.RECORD_TABLES
FIG28 = ROOT / "docs/reproduction/figures"
PAPER_OF_TITLE = {v: k for k, v in PAPER_TITLES.items()}
CAUSE_START = re.compile(r"^\*\*Cause (?P<label>[A-Z]\d?)\b")
BOLD_START = re.compile(r"^\*\*(?P<text>[^*]+)\*\*")
LINK = re.compile(r"\]\((?!https?:|#|/)(?P<target>[^)]+)\)")


def relink(line: str) -> str:
    """A link relative to docs/reproduction/ made relative to docs/claims/."""
    return LINK.sub(lambda m: f"](../reproduction/{m['target']})", line)


def anchor(label: str) -> str:
    return "cause-" + label.lower()


def heading_of(line: str) -> str | None:
    """The catalogue heading a bold paragraph opens: "Cause P3" (anchor cause-p3) or its bold words."""
    m = CAUSE_START.match(line)
    if m:
        return f"Cause {m['label']}"
    m = BOLD_START.match(line)
    if m and "How to read" not in m["text"]:
        return m["text"].strip().rstrip(".:")
    return None


def parse(text: str):
    """intro lines; per paper: preamble/catalogue lines and {claim id: lines} in order."""
    intro, papers, paper, claim, in_cause = [], {}, None, None, False
    prev_blank = True
    for line in text.splitlines()[1:]:
        if line.startswith("# "):
            paper = PAPER_OF_TITLE[line[2:].strip()]
            papers[paper] = {"title": line[2:].strip(), "causes": ["## Reading the diagnoses of this paper", ""],
                             "claims": {}}
            claim, in_cause = None, False
        elif line.startswith("## "):
            claim, in_cause = line[3:].split()[0], False
            papers[paper]["claims"][claim] = []
        elif paper is None:
            intro.append(line)
        elif claim is None or in_cause or (prev_blank and CAUSE_START.match(line)):
            if claim is not None and not in_cause:
                in_cause = True  # a cause block inside a claim's section: to the catalogue, to the next heading
            head = heading_of(line) if prev_blank else None
            if head:
                papers[paper]["causes"] += [f"## {head}", ""]
            papers[paper]["causes"].append(line)
        else:
            papers[paper]["claims"][claim].append(line)
        prev_blank = not line.strip()
    return intro, papers


def labels_in(text: str, labels: list[str]) -> list[str]:
    found = []
    for m in re.finditer(r"(?<![\w-])[Cc]auses?\s+((?:[A-Z]\d?(?![\w-]))(?:(?:,\s*|\s+and\s+|\s*/\s*)[A-Z]\d?(?![\w-]))*)",
                         text):
        found += re.findall(r"[A-Z]\d?", m[1])
    for lab in labels:
        if len(lab) == 2 and re.search(rf"(?<![\w-]){lab}(?![\w-])", text):
            found.append(lab)
    return [lab for lab in labels if lab in found]


def evidence(preset: str, metric: str, table: pd.DataFrame) -> str:
    version, date = claim_pages.evidence_of(preset, table)
    if version is not None:
        return (f"code_version `{version}`, last run read {date} UTC, from the 2026-11-29 record "
                f"({claim_pages.RECORD_TABLES}/runs.parquet)")
    files = [FIG28 / f"{slug(f'{preset}-{metric}')}.csv"] + sorted(FIG28.glob(f"{preset}-*.csv"))
    for f in files:
        if f.exists():
            rows = pd.read_csv(f)
            if len(rows) and "code_version" in rows:
                rows = rows.sort_values("started_at")
                version = rows["code_version"].iloc[-1]
                date = max(d for d in map(claim_pages.stamp, rows[rows["code_version"] == version]["started_at"]) if d)
                return (f"code_version `{version}`, last run read {date} UTC, from the 2026-11-28 record "
                        f"(docs/reproduction/figures/{f.name}; its runs tables were not committed, and the "
                        f"command below finds no run of `{preset}` in the 2026-11-29 tables)")
    return "no run of this preset in either record"


def main() -> int:
    text = OLD.read_text()
    intro, papers = parse(text)
    table = results.read_runs_table(TABLES)
    by_id = {c["id"]: c for c in claims_mod.load_claims()}
    OUT.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for paper, p in papers.items():
        catalogue = claim_pages.CAUSES.format(paper=paper)
        labels = [m["label"] for m in map(CAUSE_START.match, p["causes"]) if m]
        dup = {lab for lab in labels if labels.count(lab) > 1}
        if dup:
            print(f"{paper}: cause labels stated twice: {dup}", file=sys.stderr)
            return 1
        body = "\n".join(relink(x) for x in p["causes"]).strip()
        path = OUT / catalogue
        path.write_text(f"# {p['title']}: causes\n\nThe causes that recur in the diagnoses of {p['title']}'s "
                        f"claims (one page per claim: [README.md](README.md)).\n\n{body}\n")
        written.append(path)
        for cid, lines in p["claims"].items():
            c = by_id.get(cid)
            if c is None:
                print(f"{cid}: not in conf/claims.yaml", file=sys.stderr)
                return 1
            if c["paper"] != paper:
                print(f"{cid}: under {paper} in diagnoses.md, paper {c['paper']} in conf/claims.yaml", file=sys.stderr)
            diag = "\n".join(relink(x) for x in lines).strip()
            named = labels_in(diag, labels)
            cause = ", ".join(f"[{lab}]({catalogue}#{anchor(lab)})" for lab in named) or \
                f"none named (the paper's causes: [{catalogue}]({catalogue}))"
            head = [f"# {cid}", "",
                    f"- Claim: `{cid}` (conf/claims.yaml)",
                    f"- Paper: {PAPER_TITLES.get(paper, paper)} (`{paper}`); causes: [{catalogue}]({catalogue})",
                    f"- Preset: `{c['preset']}`",
                    f"- Evidence: {evidence(c['preset'], c['check']['metric'], table)}",
                    f"- Cause: {cause}",
                    f"- Command: `python -m harness.report.claim {cid} --results {claim_pages.RECORD_TABLES}`",
                    "", claim_pages.DIAGNOSIS_HEADING, ""]
            path = OUT / f"{cid}.md"
            path.write_text("\n".join(head) + "\n" + diag + "\n")
            written.append(path)
    # nothing lost: every non-empty line of the old file (but its headings) is in some new file
    new = "\n".join(p.read_text() for p in written)
    new_lines = set(new.splitlines())
    lost = [x for x in text.splitlines()[1:] if x.strip() and not x.startswith(("# ", "## "))
            and relink(x) not in new_lines]
    intro_kept = "\n".join(x for x in intro if x.strip())
    print(f"wrote {len(written)} files; intro (to the index, reworded): {intro_kept!r}")
    print(f"lines lost: {len(lost)}")
    for x in lost:
        print("  ", x)
    return 1 if any(x not in intro for x in lost) else 0  # the intro goes, reworded, to the index


if __name__ == "__main__":
    sys.exit(main())
