"""Pairs counted where they are found: the merge shuffle only for pairs that can meet twice.

A (query, object) pair can reach the merge from two workers only if the object went to two
workers. The dispatcher knows how many copies of each object it sends, so it marks the copies that
are the only one (`SOLE`); a worker counts the pairs of its sole objects itself (their count and
hash sum, the digest's parts) and sends only the other pairs to the merge. The object is the
reference point: a pair of a sole object is found on that object's worker or nowhere, so the
per-worker parts add up to the digest of the distinct pairs with no shuffle of those pairs.

It applies to families whose merge is the distinct union of pair keys (`Merger.union_of_pairs`:
range), and only when object ids are unique in the stream (a repeated id is kept by the stream's
normalisation, and two sole copies of it could meet the same query on two workers). Space
partitioners send each object to one worker, so their whole result is counted in place.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from harness.core.events import OBJECT, Events, key_hash_sum, sorted_unique

SOLE = "sole"  # a column the dispatcher adds to the blocks: this event went to this worker only


def sole_copies(rows: np.ndarray, n_events: int) -> np.ndarray:
    """Per routed copy (rows[i] is its event): whether it is its event's only copy."""
    copies = np.bincount(rows, minlength=n_events)
    return copies[rows] == 1


def with_sole(block: pa.RecordBatch, sole: np.ndarray) -> pa.RecordBatch:
    return block.append_column(SOLE, pa.array(sole, pa.bool_()))


def sole_objects(ev: Events, sole: np.ndarray | None) -> np.ndarray | None:
    """Sorted ids of the objects in `ev` that went to this worker only (None: not marked)."""
    if sole is None:
        return None
    return np.unique(ev.id[(ev.kind == OBJECT) & sole])


def split_pairs(keys: np.ndarray, sole_ids: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(distinct keys of sole objects: final here, the other keys: for the merge)."""
    if sole_ids is None or not len(sole_ids) or not len(keys):
        return np.zeros(0, np.int64), keys
    oid = keys & np.int64(0xFFFFFFFF)
    at = np.minimum(np.searchsorted(sole_ids, oid), len(sole_ids) - 1)
    here = sole_ids[at] == oid
    return sorted_unique(keys[here]), keys[~here]


def result_blocks(indexes, ev: Events, sole: np.ndarray | None, setup, n_buckets: int, local: "LocalCount",
                  seen=None):
    """A worker's epoch through its indexes slice by slice (`WorkerSet.process_chunks`): the pairs
    of sole objects added to `local`, every other result yielded as (family code, bucket, block)
    for the merge; `seen(outputs)` sees each slice's outputs first. Both executors run this;
    `indexes.totals()` gives the work afterwards."""
    sole_ids = sole_objects(ev, sole) if setup.local_codes else None  # a slice's pairs are its own objects'
    for _, outs in indexes.process_chunks(ev, setup.chunk_events):
        if seen is not None:
            seen(outs)
        for code, out in outs.items():
            results = out.results
            if code in setup.local_codes:
                here, results = split_pairs(results, sole_ids)
                local.add(here)
            for bucket, blob in setup.mergers[code].blocks(results, n_buckets):
                yield code, bucket, blob


class LocalCount:
    """A task's running count and hash sum of the pairs it finished itself."""

    def __init__(self):
        self.count, self.hash = 0, 0

    def add(self, keys: np.ndarray) -> None:
        self.count += len(keys)
        self.hash = (self.hash + key_hash_sum(keys)) % (1 << 64)
