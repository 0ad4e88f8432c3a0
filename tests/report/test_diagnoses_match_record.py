"""A diagnosis that states a verdict of a committed record states what the record's tables give:
each "Re-run <date>" line of a claim page (docs/claims/<claim-id>.md, harness/report/site/claim_pages.py)
names its claim, its verdicts on both bases and the command over the committed tables; the test
judges the claim on those tables with the current claims and compares. A stale line fails here
instead of misleading a reader."""

from __future__ import annotations

import re

import pytest

from harness.report import claims, results
from harness.report.site import claim_pages
from harness.report.results import PROJECT_ROOT

LINE = re.compile(r"> \*\*Re-run (?P<date>\d{4}-\d{2}-\d{2}):\*\* compute \*\*(?P<compute>[^*]+)\*\*, network "
                  r"\*\*(?P<network>[^*]+)\*\*.*?`python -m harness\.report\.claims (?P<id>\S+) --results (?P<tables>\S+)`")


def _stated():
    """Every re-run line of every claim page, with the page it stands on."""
    return [{**m.groupdict(), "page": path.stem} for path in sorted(claim_pages.CLAIMS_DIR.glob("*.md"))
            for m in LINE.finditer(path.read_text())]


def test_the_diagnoses_state_re_run_verdicts():
    assert len(_stated()) >= 50  # the re-run of 2026-11-29 marks every diagnosed claim of its presets
    assert all(s["id"] == s["page"] for s in _stated())  # a page states its own claim's verdicts


@pytest.mark.parametrize("tables", sorted({s["tables"] for s in _stated()}))
def test_every_stated_verdict_is_what_the_committed_tables_give(tables):
    table = results.read_runs_table((PROJECT_ROOT / tables).resolve())
    by_id = {c["id"]: c for c in claims.load_claims()}
    wrong = []
    for s in (s for s in _stated() if s["tables"] == tables):
        r = claims.evaluate_both(by_id[s["id"]], table)
        got = (r.on("compute").verdict, r.on("network").verdict)
        if got != (s["compute"], s["network"]):
            wrong.append(f"{s['id']}: stated {s['compute']} / {s['network']}, the tables give {got[0]} / {got[1]}")
    assert not wrong, "\n".join(wrong)
