"""The docs name the query families as the code does (issue 52): no page uses a family's former
name (harness/core/events.py FORMER_FAMILY_NAMES) where it names a family. The decision records
(docs/decisions/, not read here) and the changelog keep the history of the rename, and the dated
record is left as it was written; every other page is read. The patterns are those a page names a family by: a table cell "<family>, <kind>", "a
<family> insert/snapshot", "family <family>", "the `<family>` family", `family=<family>`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.core.events import FORMER_FAMILY_NAMES
from harness.families import registry

ROOT = Path(__file__).resolve().parents[1]
KEPT_AS_WRITTEN = {"docs/changelog.md"}  # work logs, kept as they were written


def pages() -> list[Path]:
    found = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "benchmarks").glob("*.md"))]
    return [p for p in found if str(p.relative_to(ROOT)) not in KEPT_AS_WRITTEN]


def family_mentions(text: str, name: str) -> list[str]:
    """The phrases of `text` that use `name` as a family's name."""
    n = re.escape(name)
    patterns = (rf"\|\s*`?{n}`?,\s*(insert|snapshot)\b",  # a per-type table's "family, kind" cell
                rf"\b(a|every|each|one)\s+`?{n}`?\s+(insert|snapshot|subscription|quer(y|ies))\b",
                rf"\bfamil(y|ies)\s+`{n}`", rf"\bfamily\s*[=:]\s*`?{n}\b",
                rf"\bthe\s+`?{n}`?\s+family\b(?!'s name since)")
    return [m.group(0) for p in patterns for m in re.finditer(p, text)]


def test_the_former_names_are_former():
    assert FORMER_FAMILY_NAMES and not set(FORMER_FAMILY_NAMES) & set(registry.names())
    assert set(FORMER_FAMILY_NAMES.values()) <= set(registry.names())


@pytest.mark.parametrize("former", sorted(FORMER_FAMILY_NAMES))
def test_no_page_names_a_family_by_its_former_name(former):
    found = {str(p.relative_to(ROOT)): hits for p in pages() if (hits := family_mentions(p.read_text(), former))}
    assert not found, f"pages naming the family {FORMER_FAMILY_NAMES[former]!r} by its former name {former!r}: {found}"


def test_the_patterns_find_a_former_name_and_pass_the_current_one():
    bad = "| STQ | terms, snapshot | rectangle |\nevery terms insert (CTQ)\n`family=terms`"
    assert len(family_mentions(bad, "terms")) == 3
    good = ("| STQ | frequent_terms, snapshot | rectangle |\nevery frequent_terms insert (CTQ)\n"
            "a query's `terms` column: term ids\n`frequent_terms` (the 'terms' family's name since it was renamed)")
    assert family_mentions(good, "terms") == []
