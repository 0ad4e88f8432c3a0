"""One page per diagnosed claim (docs/claims/, harness/report/site/claim_pages.py): every committed page
states its claim, paper, preset, evidence code_version, causes and command, its cause links land on
a heading of its paper's catalogue, the generated index is current, and the site marks a page whose
claim's evidence is of a newer code version than the page states as stale (crafted pages over the
tiny runs table)."""

from __future__ import annotations

import re

import pytest

from harness.report import claims, site
from harness.report.site import claim_pages
from tests.report import site_tiny
from tests.report.test_site import claim_page


def test_every_committed_page_states_its_claim_preset_evidence_causes_and_command():
    pages = claim_pages.pages()
    by_id = {c["id"]: c for c in claims.load_claims()}
    assert len(pages) >= 100
    for cid, p in pages.items():
        assert cid in by_id, f"{p.path}: no claim {cid} in conf/claims.yaml"
        assert p.preset == by_id[cid]["preset"], (cid, p.preset)
        assert p.paper == by_id[cid]["paper"], (cid, p.paper)
        assert p.code_version and re.fullmatch(r"[0-9a-f]{12}", p.code_version), (cid, p.fields["Evidence"])
        assert p.evidence_date, (cid, p.fields["Evidence"])
        assert p.fields["Command"] == (f"`python -m harness.report.claims {cid} --results "
                                       f"{claim_pages.RECORD_TABLES}`"), cid
        assert p.body, cid


def test_every_cause_link_lands_on_a_heading_of_its_catalogue():
    anchors = {}
    for path in claim_pages.CLAIMS_DIR.glob("causes-*.md"):
        anchors[path.name] = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
                              for h in re.findall(r"^## (.+)$", path.read_text(), re.M)}
    linked = 0
    for p in claim_pages.pages().values():
        for label, href in p.causes:
            file, anchor = href.split("#")
            assert anchor in anchors.get(file, set()), (p.id, label, href)
            linked += 1
    assert linked >= 80


def test_the_index_is_current():
    """docs/claims/README.md is what `python -m harness.report.site.claim_pages index` writes."""
    assert (claim_pages.CLAIMS_DIR / claim_pages.INDEX).read_text() == claim_pages.index_markdown(), \
        "docs/claims/README.md is stale: run python -m harness.report.site.claim_pages index"


def test_a_page_with_a_missing_header_field_names_the_file_and_the_field(tmp_path):
    page = tmp_path / "x.md"
    page.write_text(claim_page("x", "text").replace("- Preset: `cells`\n", ""))
    with pytest.raises(ValueError, match=r"x\.md: header lacks Preset"):
        claim_pages.parse_page(page)
    page.write_text("# x\n\n- Claim: `x`\n\nno diagnosis heading\n")
    with pytest.raises(ValueError, match="no '## Diagnosis' line"):
        claim_pages.parse_page(page)


@pytest.mark.parametrize("version, date, stale", [
    ("v1", "2025-12-01 00:00", "diagnosis stale (written at v1, 2025-12-01 00:00, evidence at v2, 2026-01-01 00:00)"),
    ("v2", "2026-01-01 00:00", None),  # written against the evidence read
    ("v2", "2025-06-01 00:00", None),  # the same code version: the date alone does not make it stale
    ("v3", "2026-03-01 00:00", None),  # written against newer evidence than the table's: not stale
])
def test_staleness_compares_the_pages_evidence_with_the_runs_the_verdict_reads(tmp_path, version, date, stale):
    path = tmp_path / "ps2-grid-beats-text.md"
    path.write_text(claim_page("ps2-grid-beats-text", "why", version, date))
    assert claim_pages.evidence_of("cells", site_tiny.table()) == ("v2", "2026-01-01 00:00")
    assert claim_pages.staleness(claim_pages.parse_page(path), "v2", "2026-01-01 00:00") == stale
    assert claim_pages.staleness(claim_pages.parse_page(path), None, None) is None  # no evidence: nothing to say


def test_the_site_marks_a_diagnosis_older_than_its_claims_evidence_and_links_every_page(tmp_path):
    pages = tmp_path / "claims"
    pages.mkdir()
    (pages / "ps2-grid-beats-text.md").write_text(claim_page("ps2-grid-beats-text", "old reading", "v1",
                                                             "2025-12-01 00:00"))
    (pages / "ps2-kdtree-beats-text.md").write_text(claim_page("ps2-kdtree-beats-text", "current reading"))
    (pages / "causes-ps2stream.md").write_text("# causes\n\n## Cause P1\n\nthe cause\n")
    out = tmp_path / "site"
    site.build(site_tiny.table(), out, site_tiny.claim_list(), diagnoses_dir=pages)
    page = (out / "paper-ps2stream.html").read_text()
    old = page.split('id="ps2-grid-beats-text"')[1].split('class="claim"')[0]
    new = page.split('id="ps2-kdtree-beats-text"')[1].split('class="claim"')[0]
    assert "diagnosis stale (written at v1, 2025-12-01 00:00, evidence at v2, 2026-01-01 00:00)" in old
    assert "stale" not in new and "current reading" in new
    for cid in ("ps2-grid-beats-text", "ps2-kdtree-beats-text"):
        assert f'href="claims/{cid}.html"' in page
        assert (out / "claims" / f"{cid}.html").exists()
    assert "diagnosis stale" in (out / "claims" / "ps2-grid-beats-text.html").read_text()
    assert 'href="causes-ps2stream.html#cause-p1"' in (out / "claims" / "ps2-grid-beats-text.html").read_text()
    assert (out / "claims" / "causes-ps2stream.html").exists()
