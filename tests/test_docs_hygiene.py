"""No machine path anywhere in docs/ (issue 50): a reader of the repository has none of the folders
of the machine a figure was made on, so a document names the command over committed tables, or says
"evidence not committed (run of <date> at <commit>)". Text files are read as text; Parquet tables
(the committed evidence) column by column. A path inside a fenced example is allowed only as a
placeholder (`/tmp/<dir>`)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
from harness.report.results import PROJECT_ROOT

DOCS = PROJECT_ROOT / "docs"
# a path that names a folder of some machine: /work/, /tmp/, /home/, /Users/, /root/, C:\
MACHINE_PATH = re.compile(r"(?<![\w.~-])(?:/(?:work|tmp|home|Users|root|private/var|var/folders)/"
                          r"|[A-Z]:\\\\?\w)")
# documents allowed to keep machine paths for now, with the reason (none: the decisions log, the one
# exception, became docs/decisions/ and docs/changelog.md, whose paths are fixed)
PENDING: dict[str, str] = {}
TEXT = {".md", ".txt", ".csv", ".svg", ".html", ".yaml", ".yml", ".json", ".tsv", ".py"}


def machine_paths(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every machine path outside a fenced placeholder example."""
    found, fenced = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        for m in MACHINE_PATH.finditer(line):
            if fenced and re.match(r"[^\s`'\"]*<[^>]+>", line[m.start():]):
                continue  # a placeholder example, e.g. /tmp/<dir>
            found.append((n, line.strip()))
            break
    return found


def _files(suffixes: set[str]) -> list[Path]:
    return sorted(p for p in DOCS.rglob("*") if p.is_file() and p.suffix in suffixes)


def test_the_check_finds_a_machine_path_and_spares_a_placeholder():
    assert machine_paths("runs in `/work/res-mig3`, every run")
    assert machine_paths("C:\\Users\\me\\results")
    assert machine_paths("```\ncd /home/me/results\n```")
    assert not machine_paths("```\npython -m harness --results /tmp/<dir>\n```")
    assert machine_paths("python -m harness --results /tmp/<dir>")  # a placeholder only inside a fenced example
    assert not machine_paths("the record's docs/reproduction/tmp/ and results/home/ folders")


def test_no_machine_path_in_a_document():
    offenders = []
    for path in _files(TEXT):
        rel = str(path.relative_to(PROJECT_ROOT))
        found = machine_paths(path.read_text(errors="replace"))
        if rel in PENDING:
            assert found, f"{rel} names no machine path any more: remove it from PENDING"
            continue
        offenders += [f"  {rel} l.{n}: {line[:160]}" for n, line in found]
    assert not offenders, ("machine paths in docs/ (name the command over committed tables, or write 'evidence "
                           "not committed (run of <date> at <commit>)'):\n" + "\n".join(offenders))


def test_no_machine_path_in_a_committed_table():
    bad = []
    for path in _files({".parquet"}):
        table = pd.read_parquet(path)
        for col in table.columns:
            if table[col].dtype == object:
                values = table[col].dropna().astype(str)
                hits = values[values.map(lambda v: bool(MACHINE_PATH.search(v)))]
                if len(hits):
                    bad.append(f"  {path.relative_to(PROJECT_ROOT)} column {col}: {hits.iloc[0]}")
    assert not bad, "machine paths in committed tables (harness/report/evidence.py's portable):\n" + "\n".join(bad)
