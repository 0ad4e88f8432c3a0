"""The contracts of pyproject.toml's import-linter hold: no module imports from a layer above
its own (harness.core at the bottom, then datasets, harness.families, strategies, harness.engine,
harness.report, harness.measure, harness.run), the five papers' strategy packages import none of
each other, and judging (harness.report.claims, harness.report.site) imports neither
harness.measure nor harness.engine: it reads the runs table only, so `make report` and `make site`
re-judge any table without running anything."""

from __future__ import annotations

import os

from importlinter.cli import lint_imports

from harness.report.results import PROJECT_ROOT


def test_no_module_imports_from_a_layer_above_it(monkeypatch):
    monkeypatch.chdir(PROJECT_ROOT)
    assert lint_imports(config_filename=os.fspath(PROJECT_ROOT / "pyproject.toml"), no_cache=True, no_logo=True) == 0
