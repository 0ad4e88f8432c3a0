"""One merge bucket of one family for one epoch: restore the merger's state, merge, export.

Shared by the Spark merge stage and the in-process executor, so both combine partial results
with the same code; the merger's CPU time is measured here (the `merge_s` metric).
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
    busy_s: float


def merge_bucket(merger_cls: type[Merger], state: pa.Table | None, blobs: list[bytes],
                 queries: Events | None) -> BucketResult:
    t0 = time.process_time()
    merger = merger_cls()
    if merger_cls.stateful:
        merger.restore(state)
    out = merger.merge(blobs, queries if queries is not None else Events.empty())
    new_state = merger.export_state() if merger_cls.stateful else None
    return BucketResult(out.keys, out.feedback, new_state, time.process_time() - t0)


def query_rows(ev: Events, codes: set[int]) -> np.ndarray:
    """Rows of the query events of the given families (what their mergers read)."""
    return np.flatnonzero(np.isin(ev.family, list(codes)) & (ev.kind != OBJECT))
