"""Which cached stream a run read (issue 42): the workload cache folder's events file and its
content hash, in the run's row (metrics.json, the runs table), so a run's results can be read
against the very stream it ran (`python -m harness.export`) and two runs' streams compared."""

from __future__ import annotations

import hashlib
from pathlib import Path


def stream_identity(folder: Path) -> dict:
    """`workload_events`: the path of the cached stream's Parquet file; `workload_events_sha256`: the
    SHA-256 of its bytes, computed once per cache folder and kept beside it (`events.sha256`)."""
    path = Path(folder) / "events.parquet"
    memo = Path(folder) / "events.sha256"
    stat = path.stat()
    stamp = f"{stat.st_size}:{stat.st_mtime_ns}"
    if memo.exists():
        seen, _, digest = memo.read_text().strip().partition(" ")
        if seen == stamp:
            return {"workload_events": str(path.resolve()), "workload_events_sha256": digest}
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    memo.write_text(f"{stamp} {h.hexdigest()}\n")
    return {"workload_events": str(path.resolve()), "workload_events_sha256": h.hexdigest()}
