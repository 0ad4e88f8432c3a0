"""A module of this repository as it was at a commit, imported beside today's: the baseline of the
A/B benchmarks that compare a fast path with the code it replaced (ADR-0083: the baseline is the
code at a commit, not a copy kept in a benchmark file), and the paired rounds that time the two."""

from __future__ import annotations

import importlib.util
import subprocess
import tempfile
from pathlib import Path

import numpy as np

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


def abba_rounds(rounds: int, baseline, current, same, what: str) -> list[float]:
    """The baseline against this checkout in `rounds` paired rounds, ABBA then BAAB (a linear drift
    of the machine's speed cancels within a round): `baseline()` and `current()` each return
    (seconds, output); the two sides' first outputs of a round must be `same` (SystemExit naming
    `what` otherwise). Prints each round's mean times and ratio and the median; returns the ratios
    (baseline seconds over this checkout's)."""
    ratios = []
    for r in range(rounds):
        got = {"b": [], "c": []}
        for who in ("b", "c", "c", "b") if r % 2 == 0 else ("c", "b", "b", "c"):
            got[who].append((baseline if who == "b" else current)())
        if not same(got["b"][0][1], got["c"][0][1]):
            raise SystemExit(f"round {r + 1}: the two sides' {what} differ")
        base_s, cur_s = (float(np.mean([t for t, _ in got[w]])) for w in ("b", "c"))
        ratios.append(base_s / cur_s)
        print(f"round {r + 1}: baseline {base_s:.3f} s, this checkout {cur_s:.3f} s, x{ratios[-1]:.2f}", flush=True)
    print(f"median x{np.median(ratios):.2f} over {rounds} rounds ({what} equal in every round)")
    return ratios
