"""The decision records (docs/decisions/, issue 49 part 5): the index is generated from the records'
headers and current; every `ADR-NNNN` cited in the repository has a record; nothing cites the old
single log; no record is left pending; and `python -m tools.adr --number-pending` numbers pending
records, renames them and rewrites their citations."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tools import adr

ADR = "ADR-"  # IDs below are spelt apart so this file cites no record that does not exist
PENDING = ADR + "pending"
OLD_LOG = "docs/" + "decisions" + ".md"


def record(number: str, title: str, subsystem: str = "engine", status: str = "accepted", date: str = "2026-11-29") -> str:
    return (f"# {ADR}{number}: {title}\n\n- Status: {status}\n- Date: {date}\n- Subsystem: {subsystem}\n- Issue: 49\n"
            f"- Paper: none\n- Code: harness/engine/loop.py\n- Figures: none\n\nWhy.\n")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository of two records, an index and one source file citing the first."""
    folder = tmp_path / adr.FOLDER
    folder.mkdir(parents=True)
    (folder / "0001-one-spark-job-per-epoch.md").write_text(record("0001", "One Spark job per epoch"))
    (folder / "0002-an-older-rule.md").write_text(record("0002", "An older rule", "report", f"superseded by {ADR}0001"))
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "loop.py").write_text(f'"""The loop ({ADR}0001)."""\n')
    adr.write_index(tmp_path)
    return tmp_path


def test_the_repository_has_no_problem():
    found = adr.problems()
    assert not found, "decision records: " + "\n".join(found)


def test_every_record_has_its_fields_and_a_known_subsystem():
    recs = adr.records()
    assert len(recs) >= 100 and [r.number for r in recs] == [f"{i:04d}" for i in range(1, len(recs) + 1)]
    for r in recs:
        assert r.fields["Subsystem"] in adr.SUBSYSTEMS, (r.path.name, r.fields["Subsystem"])
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", r.fields["Date"]), (r.path.name, r.fields["Date"])
        assert r.path.name == f"{r.number}-{adr.slug(r.title)}.md" or r.path.name.startswith(f"{r.number}-")


def test_a_superseded_record_names_a_later_one():
    recs = {r.number: r for r in adr.records()}
    superseded = [r for r in recs.values() if r.fields["Status"] != "accepted"]
    assert superseded
    for r in superseded:
        later = adr.STATUS.match(r.fields["Status"]).group(2)
        assert later in recs and later > r.number, (r.path.name, r.fields["Status"])


def test_the_index_lists_every_record_by_subsystem(repo):
    text = (repo / adr.FOLDER / adr.INDEX).read_text()
    assert text.index("## engine") < text.index("## report")
    assert f"[{ADR}0001](0001-one-spark-job-per-epoch.md): One Spark job per epoch, 2026-11-29" in text
    assert f"(superseded by {ADR}0001)" in text
    assert adr.problems(repo) == []


def test_a_stale_index_an_unknown_id_and_the_old_log_are_problems(repo):
    (repo / adr.FOLDER / "0003-a-new-rule.md").write_text(record("0003", "A new rule"))
    (repo / "harness" / "cites.py").write_text(f"# see {ADR}0042 and {OLD_LOG}\n")
    found = "\n".join(adr.problems(repo))
    assert "README.md is stale" in found
    assert f"harness/cites.py:1: {ADR}0042 has no record" in found
    assert f"harness/cites.py:1: cites {OLD_LOG}" in found


def test_bad_headers_are_named(repo):
    (repo / adr.FOLDER / "0003-no-fields.md").write_text(f"# {ADR}0003: No fields\n\ntext\n")
    assert "fields ['Status', 'Date'" in adr.problems(repo)[0]
    (repo / adr.FOLDER / "0003-no-fields.md").write_text(record("0004", "Wrong number"))
    assert "the header says ADR-0004, the file name 0003" in adr.problems(repo)[0]
    (repo / adr.FOLDER / "0003-no-fields.md").write_text(record("0003", "Bad status", status="rejected"))
    assert any("Status 'rejected'" in p for p in adr.problems(repo))


def test_a_pending_record_is_a_problem_naming_the_command(repo):
    (repo / adr.FOLDER / "pending-h1-a-rule.md").write_text(record("pending", "A rule"))
    found = adr.problems(repo)
    assert found == [f"docs/decisions/pending-h1-a-rule.md: a pending record; run `{adr.NUMBER_COMMAND}`"]
    (repo / "harness" / "loop.py").write_text(f"# {PENDING}\n")
    assert any(f"cites {PENDING}" in p for p in adr.problems(repo))


def test_number_pending_numbers_renames_and_rewrites_citations(repo):
    folder = repo / adr.FOLDER
    (folder / "pending-h2-later-rule.md").write_text(record("pending", "Later rule", date="2026-11-30"))
    (folder / "pending-h1-the-first-rule.md").write_text(record("pending", "The first rule", "sstd"))
    (repo / "harness" / "rule.py").write_text("# decided in docs/decisions/pending-h1-the-first-rule.md and pending-h2-later-rule\n")
    assert adr.number_pending(repo) == [("pending-h1-the-first-rule.md", f"{ADR}0003"),
                                        ("pending-h2-later-rule.md", f"{ADR}0004")]
    assert not list(folder.glob("pending-*"))
    first = (folder / "0003-the-first-rule.md").read_text()
    assert first.startswith(f"# {ADR}0003: The first rule\n") and "- Subsystem: sstd" in first
    assert (folder / "0004-later-rule.md").read_text().startswith(f"# {ADR}0004: Later rule\n")
    assert (repo / "harness" / "rule.py").read_text() == f"# decided in {ADR}0003 and {ADR}0004\n"
    assert adr.problems(repo) == []
    assert adr.main(["--check", "--root", str(repo)]) == 0
