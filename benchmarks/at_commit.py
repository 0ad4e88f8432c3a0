"""A module of this repository as it was at a commit, imported beside today's: the baseline of the
A/B benchmarks that compare a fast path with the code it replaced (ADR-0083: the baseline is the
code at a commit, not a copy kept in a benchmark file)."""

from __future__ import annotations

import importlib.util
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_at(commit: str, path: str):
    """The module at `path` (relative to the repository) as it was at `commit`, imported from a
    temporary file under a name of its own, so today's module is left as it is."""
    source = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, check=True, capture_output=True,
                            text=True).stdout
    file = Path(tempfile.mkdtemp()) / f"{Path(path).stem}_{commit}.py"
    file.write_text(source)
    spec = importlib.util.spec_from_file_location(file.stem, file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
