"""The oracle of an invocation: the centralised answer's digest every run of it is checked against.

Computed once per cached workload and kept beside it (`oracle.json`): the families' brute force
on the driver when the stream is small enough (`oracle.max_checks` objects x queries), else the
family's scale oracle on Spark (range: a tiled join), else none (the runs' `oracle_ok` is null).
`oracle.method` forces one. The run assembly's `oracle_digest` is the brute force alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from harness.core.events import INSERT, OBJECT, SNAPSHOT, Events
from harness.engine.assembly import oracle_digest as brute_digest
from harness.engine.assembly import run_families
from harness.families import registry as families


def cached_oracle(events: Events, folder: Path, cfg, spark=None, events_path: str | None = None,
                  extent=None) -> tuple[str | None, str]:
    """The centralised answer's digest and how it was found (brute, tiled or none), read from
    `folder`'s cache when its method suits `oracle.method`, else computed and cached (module
    docstring); (None, "none") when neither oracle may run."""
    path = folder / "oracle.json"
    if path.exists():
        cached = json.loads(path.read_text())
        if cfg.oracle.method in ("auto", cached.get("method", "brute")):
            return cached["digest"], cached.get("method", "brute")
    names = run_families(events, cfg.workload.family)
    family = families.get(names[0])
    n_obj = int((events.kind == OBJECT).sum())
    n_q = int(np.isin(events.kind, (INSERT, SNAPSHOT)).sum())
    # each family's brute force says what it reads (kNN: its keywords' objects, not all of them)
    fits = max(families.get(name).oracle_checks(events) for name in names) <= cfg.oracle.max_checks
    if cfg.oracle.method == "brute" or (cfg.oracle.method == "auto" and fits):
        digest, method = brute_digest(events, names), "brute"
    # the scale oracles answer one family's subscriptions only
    elif (family.scale_oracle is not None and spark is not None and len(names) == 1
          and not (events.kind == SNAPSHOT).any()):
        tiles = cfg.oracle.tiles or auto_tiles(n_obj, n_q)
        digest, _ = family.scale_oracle(spark, spark.read.parquet(events_path), extent, tiles)
        method = "tiled"
    else:
        return None, "none"
    path.write_text(json.dumps({"digest": digest, "method": method}))
    return digest, method


def auto_tiles(n_objects: int, n_queries: int) -> int:
    """Tiles per side for the scale oracle: sqrt(n_o n_q / 1e6) within [8, 512] (a tile a million
    checks; how the bounds were chosen:
    ADR-0078)."""
    return int(np.clip(np.sqrt(n_objects * max(n_queries, 1) / 1e6), 8, 512))
