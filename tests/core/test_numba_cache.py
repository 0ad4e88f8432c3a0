"""Numba cache indexes older than their source are dropped (harness/core/numba_cache.py), so a kernel
whose argument types changed compiles again instead of failing to unpickle its old index."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from harness.core.numba_cache import drop_stale_indexes

BEFORE = """
from collections import namedtuple
from numba import njit
Pair = namedtuple("Pair", ["a", "b"])

@njit(cache=True)
def total(p):
    return p.a + p.b

print(total(Pair(1, 2)))
"""
AFTER = """
from collections import namedtuple
from numba import njit
Couple = namedtuple("Couple", ["a", "b"])  # the argument's type renamed: the old index names Pair

@njit(cache=True)
def total(p):
    return p.a + p.b

print(total(Couple(1, 2)))
"""


def _run(folder, guard: bool) -> subprocess.CompletedProcess:
    pre = (f"from pathlib import Path; from harness.core.numba_cache import drop_stale_indexes; "
           f"drop_stale_indexes([Path({str(folder)!r})]); " if guard else "")
    return subprocess.run([sys.executable, "-c", pre + "import kernelmod"], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), *sys.path])}, timeout=300)


def test_a_kernel_whose_argument_type_was_renamed_compiles_again(tmp_path):
    (tmp_path / "kernelmod.py").write_text(textwrap.dedent(BEFORE))
    first = _run(tmp_path, guard=False)
    assert first.returncode == 0 and first.stdout.strip() == "3", first.stderr
    index = [p for p in (tmp_path / "__pycache__").iterdir() if p.suffix == ".nbi"]
    assert len(index) == 1  # numba cached the kernel
    (tmp_path / "kernelmod.py").write_text(textwrap.dedent(AFTER))
    later = index[0].stat().st_mtime + 5
    os.utime(tmp_path / "kernelmod.py", (later, later))  # the source changed after the index was written
    second = _run(tmp_path, guard=True)
    assert second.returncode == 0 and second.stdout.strip() == "3", second.stderr


def test_only_indexes_older_than_their_source_go(tmp_path):
    cache = tmp_path / "pkg" / "__pycache__"
    cache.mkdir(parents=True)
    for name in ("fresh", "stale"):
        (tmp_path / "pkg" / f"{name}.py").write_text("x = 1\n")
    fresh, stale = cache / "fresh.f-3.py311.nbi", cache / "stale.g-7.py311.nbi"
    data = cache / "stale.g-7.py311.1.nbc"  # numba's data files: overwritten when the kernel compiles again
    orphan = cache / "gone.h-1.py311.nbi"  # its source is not where the name says: left alone
    for path in (fresh, stale, data, orphan):
        path.write_bytes(b"index")
    os.utime(tmp_path / "pkg" / "fresh.py", (100, 100))
    os.utime(fresh, (200, 200))
    os.utime(tmp_path / "pkg" / "stale.py", (300, 300))
    os.utime(stale, (200, 200))
    assert drop_stale_indexes([tmp_path]) == 1
    assert fresh.exists() and not stale.exists() and data.exists() and orphan.exists()
    assert drop_stale_indexes([tmp_path]) == 0
