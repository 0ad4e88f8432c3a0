"""One merge bucket of one family for one epoch: restore the merger's state, merge, export.

Shared by the Spark merge stage and the in-process executor, so both combine partial results
with the same code; the merger's CPU time is measured here (the `merge_s` metric), once per
repetition (measure.repeat: the bucket is merged that many times from the same state, inside the
task, as the workers repeat theirs: harness/engine/worker_epoch.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from harness.core.events import OBJECT, Events
from harness.families.base import Merger


@dataclass
class BucketResult:
    keys: np.ndarray
    feedback: pa.Table | None
    state: pa.Table | None
    busy_s: list[float]  # the merger's CPU time in each repetition
    rows: pa.Table | None = None  # the plain rows of hashed keys (MergeOutput.rows)
    exits: pa.Table | None = None  # top-k exits (MergeOutput.exits)


def merge_bucket(merger_cls: type[Merger], state: pa.Table | None, blobs: list[bytes],
                 queries: Events | None, repeat: int = 1) -> BucketResult:
    """The first repetition's merge; every later one must give the same keys (else: not deterministic)."""
    queries = queries if queries is not None else Events.empty()
    first, busy = None, []
    for r in range(repeat):
        t0 = time.process_time()
        merger = merger_cls()
        if merger_cls.stateful:
            merger.restore(state)
        out = merger.merge(blobs, queries)
        new_state = merger.export_state() if merger_cls.stateful else None
        busy.append(time.process_time() - t0)
        if r == 0:
            first = BucketResult(out.keys, out.feedback, new_state, busy, out.rows, out.exits)
        elif not np.array_equal(out.keys, first.keys):
            raise RuntimeError(f"merge: repetition {r + 1} gave {len(out.keys)} keys, the first {len(first.keys)} "
                               "(or other ones): the run is not deterministic")
    return first


def plain_rows(merger_cls: type[Merger], code: int, res: BucketResult) -> pa.Table:
    """The bucket's results in plain form (harness/families/result_rows.py): its merger's rows, or
    the pairs its keys pack."""
    from harness.families import result_rows

    return res.rows if res.rows is not None else result_rows.pair_rows(code, res.keys)


def query_rows(ev: Events, codes: set[int]) -> np.ndarray:
    """Rows of the query events of the given families (what their mergers read)."""
    return np.flatnonzero(np.isin(ev.family, list(codes)) & (ev.kind != OBJECT))
