"""The harness: core -> families -> engine -> report -> run, each layer importing only those below.

Importing it first drops numba cache indexes older than their source (harness/core/numba_cache.py),
so kernels whose argument types changed compile again instead of failing to load."""

from pathlib import Path

from harness.core.numba_cache import drop_stale_indexes

_PROJECT = Path(__file__).resolve().parent.parent
drop_stale_indexes([_PROJECT / "harness", _PROJECT / "strategies", _PROJECT / "datasets"])
