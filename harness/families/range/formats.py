"""The range family's formats: its event-file query types (CRQ, SRQ) and its results in plain
form (pairs, exported as crq / srq)."""

from __future__ import annotations

from datasets.workloads.file_types import RECTANGLE, QueryType, left_empty, ordered_rectangle
from harness.core.events import INSERT, SNAPSHOT
from harness.families.result_rows import pair_results

_NO_WINDOW = left_empty("win", "step", why=" (only a CTQ insert has one)")
LOOK_BACK = {"tau": " (seconds: the snapshot's look-back)"}

FILE_TYPES = {
    # a continuous range query: its rectangle; a tau is its lifetime (deleted at ts + tau)
    INSERT: QueryType("range insert (CRQ)", needs=RECTANGLE, checks=(ordered_rectangle, _NO_WINDOW), lifetime=True),
    # SSTD's SRQ: its rectangle and its look-back tau
    SNAPSHOT: QueryType("range snapshot (SRQ)", needs=(*RECTANGLE, "tau"), checks=(ordered_rectangle, _NO_WINDOW),
                        hints=LOOK_BACK),
}

RESULTS = pair_results("crq", "srq")
