"""The results site's content without a browser (tests/report/test_site_browser.py opens it in
one): the overview's counts are the claims engine's, every claim links to its anchor, the figures'
CSVs are the runs the claims read, the strategy pages rank, the diagnoses show, nothing external
is referenced, and `--record` writes the Markdown record."""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import yaml

from harness.report import claims, site
from harness.report.claims import report as claims_report
from harness.report.site import record as site_record
from harness.report.site.data import tally_groups
from tests.report import site_tiny


class Page(HTMLParser):
    """A page's ids, links, images and the overview's count cells."""

    def __init__(self, text: str):
        super().__init__()
        self.ids, self.links, self.counts, self._cell = set(), [], {}, None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        for key in ("href", "src"):
            if key in a:
                self.links.append(a[key])
        if tag == "td" and "data-verdict" in a:
            self._cell = (a["data-group"], a["data-basis"], a["data-verdict"])

    def handle_data(self, data):
        if self._cell:
            self.counts[self._cell] = int(data)
            self._cell = None


def _build(tmp_path: Path, diagnoses: Path | None = None):
    out = tmp_path / "site"
    return site.build(site_tiny.table(), out, site_tiny.claim_list(), diagnoses_dir=diagnoses), out


def test_the_overview_counts_are_the_claims_engines_and_every_claim_links_to_its_anchor(tmp_path):
    built, out = _build(tmp_path)
    index = Page((out / "index.html").read_text())
    expected = claims.evaluate_all(site_tiny.table(), claims=site_tiny.claim_list())
    groups = tally_groups(expected)
    assert {g[0] for g in groups} == {"ps2stream", "tornado", "sstd", "extensions"}
    for key, _, group in groups:
        for basis in claims.BASES:
            for verdict, n in claims.tally(group, basis).items():
                assert index.counts[(key, basis, verdict)] == n, (key, basis, verdict)
    assert index.counts[("ps2stream", "network", "does not hold")] == 1  # the flip
    for r in expected:
        target = f"paper-{r.claim['paper']}.html#{r.claim['id']}"
        assert target in index.links
        page = Page((out / target.split("#")[0]).read_text())
        assert r.claim["id"] in page.ids
    # every link of every page resolves to a file of the site (and its anchor, when it names one)
    for html in out.glob("*.html"):
        for link in Page(html.read_text()).links:
            assert not re.match(r"^(https?:)?//", link), f"{html.name} references {link}: the site must be offline"
            if link.startswith("data:"):
                continue
            path, _, anchor = link.partition("#")
            target = out / path if path else html
            assert target.exists(), f"{html.name}: {link}"
            if anchor:
                assert anchor in Page(target.read_text()).ids, f"{html.name}: {link}"


def test_figures_carry_the_runs_the_claims_read_and_the_runs_left_out(tmp_path):
    built, out = _build(tmp_path)
    rows, excluded, version = claims.evidence("cells", site_tiny.table())
    csv = pd.read_csv(out / "figures" / "cells-throughput_eps.csv")
    assert sorted(csv["run_id"]) == sorted(rows["run_id"]) and len(csv) == 6 and version == "v2"
    assert {"throughput_compute_eps_ci_lo", "throughput_network_eps", "config_key", "repetitions"} <= set(csv)
    page = (out / "paper-ps2stream.html").read_text()
    assert "failed (cells-kdtree-q1-8-None-2026-02-01T00:00)" in page and "older code versions" in page
    assert "q3/synthetic/8w: no usable run of the preset" in page  # the missing cell, named
    assert 'src="figures/sweep-throughput_eps.svg"' in page and "line plot over x" in page
    assert "setting: 8 workers, mu = 5M" in page
    svg = (out / "figures" / "many-throughput_eps.svg").read_text()
    assert "s21" in svg and "<svg" in svg and not re.search(r'(href|src)="(https?:)?//', svg)
    assert (out / "downloads" / "runs.csv").exists() and len(pd.read_parquet(out / "downloads" / "runs.parquet")) == 44


def test_strategy_pages_rank_within_preset_and_cell_and_say_why(tmp_path):
    built, out = _build(tmp_path)
    pages = {s.name: s for s in built.strategies}
    assert len(pages["s21"].first) == 1 and len(pages["s00"].last) == 1 and len(pages["s10"].first) == 0
    grid = pages["grid"]  # first in both cells of `cells` on compute, last on the network basis there
    cells = grid.runs[grid.runs["preset"] == "cells"]
    assert list(cells["rank_compute"]) == [1, 1] and list(cells["rank_network"]) == [3, 3]
    html = (out / f"strategy-{grid.slug}.html").read_text()
    assert "dispatcher_cpu" in html and "object replication (cell median)" in html
    assert (grid.unread, pages["kdtree"].unread, pages["rtree"].unread) == (1, 1, 0)  # older code; failed
    assert "1 other rows of the runs table name it" in html

    assert (out / f"strategy-{pages['kdt + gr'].slug}.html").exists()


def test_a_written_diagnosis_shows_under_its_claim(tmp_path):
    notes = tmp_path / "claims"
    notes.mkdir()
    (notes / "ps2-grid-beats-text.md").write_text(claim_page("ps2-grid-beats-text",
                                                             "The network model charges <grid>'s copies."))
    (notes / "causes-ps2stream.md").write_text("# causes\n\n## Cause P1\n\nits introduction\n")
    _, out = _build(tmp_path, notes)
    page = (out / "paper-ps2stream.html").read_text()
    block = page.split('id="ps2-grid-beats-text"')[1].split('class="claim"')[0]
    assert "The network model charges &lt;grid&gt;&#x27;s copies." in block
    assert "its introduction" not in block and "Claim:" not in block  # the diagnosis, not the header or the causes
    assert 'href="claims/ps2-grid-beats-text.html"' in block and (out / "claims" / "ps2-grid-beats-text.html").exists()
    assert "no diagnosis written yet" in page.split('id="ps2-kdtree-beats-text"')[1]


def claim_page(cid: str, text: str, version: str = site_tiny.VERSION, date: str = "2026-01-01 00:00") -> str:
    """A claim page as docs/claims/ holds them (harness/report/site/claim_pages.py)."""
    return (f"# {cid}\n\n- Claim: `{cid}` (conf/claims.yaml)\n- Paper: PS2Stream (`ps2stream`); causes: "
            f"[causes-ps2stream.md](causes-ps2stream.md)\n- Preset: `cells`\n- Evidence: code_version `{version}`, "
            f"last run read {date} UTC, from a test\n- Cause: [P1](causes-ps2stream.md#cause-p1)\n"
            f"- Command: `python -m harness.report.claims {cid} --results <dir>`\n\n## Diagnosis\n\n{text}\n")


def test_the_command_builds_the_site_and_records_the_overview(tmp_path, capsys):
    root = tmp_path / "results"
    root.mkdir()
    site_tiny.table().to_parquet(root / "runs.parquet", index=False)
    claims_file = tmp_path / "claims.yaml"
    claims_file.write_text(yaml.safe_dump(site_tiny.claim_list()))
    dest = tmp_path / "docs" / "reproduction"
    dest.mkdir(parents=True)
    (dest / "diagnoses.md").write_text("## ps2-grid-beats-text\n\nkept\n")
    assert site.main(["--results", str(root), "--claims", str(claims_file), "--record", str(dest)]) == 0
    assert (root / "site" / "index.html").exists()
    report = (dest / "report.md").read_text()
    results = claims.evaluate_all(site_tiny.table(), claims=site_tiny.claim_list())
    assert "\n".join(claims_report.tally_table(results)) in report
    assert "runs of code version v1, v2, started 2025-12-01 00:00 to 2026-02-01 00:00 UTC" in report
    assert not re.search(r"commit `[^`]+`|cores|\d{4}-\d\d-\d\d \d\d:\d\d UTC on ", report)  # nothing of the build
    assert "![sweep: throughput_eps](figures/sweep-throughput_eps.svg)" in report
    assert (dest / "figures" / "sweep-throughput_eps.svg").exists() and (dest / "figures" / "sweep-throughput_eps.csv").exists()
    assert (dest / "diagnoses.md").read_text() == "## ps2-grid-beats-text\n\nkept\n"  # hand-written, kept
    assert (dest / "overview.png").exists() == (site_record.chromium() is not None)
    # an unreadable claims file (a claim without a preset) is said, not a traceback
    claims_file.write_text(yaml.safe_dump([{k: v for k, v in c.items() if k != "preset"}
                                           for c in site_tiny.claim_list()]))
    assert site.main(["--results", str(root), "--claims", str(claims_file)]) == 2
    assert "cannot read the claims" in capsys.readouterr().err
    assert site.main(["--results", str(tmp_path / "none")]) == 2


def test_the_site_is_rebuilt_not_merged(tmp_path):
    _, out = _build(tmp_path)
    (out / "stale.html").write_text("old")
    _build(tmp_path)
    assert not (out / "stale.html").exists()
    shutil.rmtree(out)
