"""The record rebuilds byte for byte from its committed tables (issue 50): the site and report.md of
docs/reproduction/2026-11-29/ built from docs/reproduction/2026-11-29/tables alone give the committed
report.md and figures/, and a second build in another process (another hash seed) gives the same
bytes for every file of the site. Nothing of when, where or at which commit a build runs enters
it (harness/report/site/data.py's `built`). overview.png is left out: it is a headless browser's
screenshot, not the build's output.

When it fails after a change to the claims or the judging code, the record is stale: rebuild it
with `python -m harness.report.site --results docs/reproduction/2026-11-29/tables --ran-only
--record docs/reproduction/2026-11-29` and commit the result."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.report import claims as claims_mod
from harness.report import results, site
from harness.report.site import record as site_record
from harness.report.results import PROJECT_ROOT

RECORD = PROJECT_ROOT / "docs" / "reproduction" / "2026-11-29"
TABLES = RECORD / "tables"
FLAGS = f"--results {site_record.shown_path(TABLES)} --ran-only "
REBUILD = f"python -m harness.report.site {FLAGS}--record {site_record.shown_path(RECORD)}"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The site of the committed tables, built in this process as `--ran-only` builds it."""
    table = results.read_runs_table(TABLES)
    ran = set(table["experiment"].dropna())
    claims = [c for c in claims_mod.load_claims() if c["preset"] in ran]
    out = tmp_path_factory.mktemp("a") / "site"
    return site.build(table, out, claims, TABLES / "runs.parquet"), out


def test_the_committed_record_is_what_its_tables_give(built):
    got, out = built
    report = "\n".join(site_record.markdown(got, RECORD, FLAGS)) + "\n"
    assert report == (RECORD / "report.md").read_text(), f"docs/reproduction/2026-11-29/report.md is stale: {REBUILD}"
    figures = _files(out / "figures")
    committed = _files(RECORD / "figures")
    assert sorted(figures) == sorted(committed), f"figures differ in name: {REBUILD}"
    differ = [name for name in figures if figures[name] != committed[name]]
    assert not differ, f"figures differ in bytes ({', '.join(differ[:5])}): {REBUILD}"


def test_a_second_build_in_another_process_gives_the_same_bytes(built, tmp_path):
    _, out = built
    again = tmp_path / "b" / "site"
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(PROJECT_ROOT)}
    done = subprocess.run([sys.executable, "-m", "harness.report.site", "--results", str(TABLES), "--out", str(again),
                           "--ran-only"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    first, second = _files(out), _files(again)
    assert sorted(first) == sorted(second)
    differ = [name for name in first if first[name] != second[name]]
    assert not differ, f"two builds of the same tables differ in {len(differ)} files: {differ[:8]}"
    leaks = [name for name, data in first.items() if str(PROJECT_ROOT).encode() in data]
    assert not leaks, f"the site names the folder it was built in: {leaks[:8]}"  # another clone would differ
