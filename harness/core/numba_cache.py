"""Numba's on-disk cache made safe across code changes: index files older than their source go.

Numba keeps each cached kernel's index beside its source (`__pycache__/<module>.<function>-<line>
.py311.nbi`) and decides whether it is stale only after unpickling it. The index names the types
of the kernel's arguments, so once a change removes or renames one (a named tuple of a family's
state, say), the unpickling fails with an AttributeError inside numba before the staleness check
runs, and every run that loads the kernel stops. Dropping the indexes whose source file changed
after they were written (its mtime is newer) leaves numba to compile those kernels again, as it
would have done for a stale index anyway; fresh ones stay. Called once when `harness` is imported
(a walk of the project's `__pycache__` folders: a few hundred stat calls).
"""

from __future__ import annotations

import os
from pathlib import Path


def drop_stale_indexes(roots: list[Path]) -> int:
    """Remove numba index files under `roots` written before their source module last changed;
    returns how many went. Another process removing the same file first is not an error."""
    dropped = 0
    for root in roots:
        for folder, dirs, _ in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            if not folder.endswith("__pycache__"):
                continue
            for entry in os.scandir(folder):
                if not entry.name.endswith(".nbi"):
                    continue
                source = Path(folder).parent / (entry.name.split(".", 1)[0] + ".py")
                try:
                    if source.stat().st_mtime > entry.stat().st_mtime:
                        os.remove(entry.path)
                        dropped += 1
                except OSError:  # no such source (numba names it otherwise) or already removed
                    continue
    return dropped
