"""The frequent_terms family's merger: each query's (or CTQ report's) partial term counts summed over the
workers, then its top k by (count desc, term id asc); term id = frequency rank, so on a tie the
globally more frequent term wins. Exact because every object in the region was counted by exactly
one worker (harness/families/terms/index.py). A query with fewer than k distinct terms gives them all."""

from __future__ import annotations

from typing import Iterator

import numpy as np

from harness.core.events import SNAPSHOT, TERMS, Events, small_ints, sorted_runs
from harness.families import result_rows
from harness.families.base import Merger, MergeOutput, qid_buckets
from harness.families.terms import formats


def pack(qid, report, term, count) -> bytes:
    return np.stack([qid, report, term, count]).astype(np.int64).tobytes()


def unpack(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, np.int64).reshape(4, -1)


def top_terms(qid, report, term, count, k_of) -> tuple[np.ndarray, ...]:
    """Per (qid, report) the k rows of largest count (smaller term first on a tie); `k_of(qid,
    report)` gives each group's k."""
    order = np.lexsort((term, -count, report, qid))
    qid, report, term, count = qid[order], report[order], term[order], count[order]
    if len(qid) == 0:
        return qid, report, term, count
    start = np.r_[True, (qid[1:] != qid[:-1]) | (report[1:] != report[:-1])]
    first = np.flatnonzero(start)
    rank = np.arange(len(qid)) - np.repeat(first, np.diff(np.r_[first, len(qid)]))
    keep = rank < np.repeat(k_of(qid[first], report[first]), np.diff(np.r_[first, len(qid)]))
    return qid[keep], report[keep], term[keep], count[keep]


class TermsMerger(Merger):
    needs_queries = True

    @staticmethod
    def blocks(results, n_buckets: int) -> Iterator[tuple[int, bytes]]:
        if len(results) == 0:
            return
        bucket = qid_buckets(results.qid, n_buckets)
        order = np.argsort(small_ints(bucket, n_buckets), kind="stable")
        bucket = bucket[order]
        for lo, hi in sorted_runs(bucket):
            rows = order[lo:hi]
            yield int(bucket[lo]), pack(results.qid[rows], results.report[rows], results.term[rows],
                                        results.count[rows])

    def merge(self, blobs: list[bytes], queries: Events | None) -> MergeOutput:
        if not blobs:
            return MergeOutput(np.zeros(0, np.int64))
        qid, report, term, count = np.concatenate([unpack(b) for b in blobs], axis=1)
        # sum each (qid, report, term) over the workers
        order = np.lexsort((term, report, qid))
        qid, report, term, count = qid[order], report[order], term[order], count[order]
        start = np.flatnonzero(np.r_[True, (qid[1:] != qid[:-1]) | (report[1:] != report[:-1])
                                     | (term[1:] != term[:-1])])
        total = np.add.reduceat(count, start)
        qid, report, term = qid[start], report[start], term[start]
        asks = queries.take(np.flatnonzero(queries.kind == SNAPSHOT)) if queries is not None else Events.empty()
        ask_report = np.where(np.isnan(asks.step), 0, asks.step).astype(np.int64)
        ask_key = (asks.id.astype(np.int64) << 32) | ask_report
        ask_order = np.argsort(ask_key, kind="stable")

        def k_of(q, r):
            key = (q << 32) | r
            if len(ask_key) == 0:
                raise RuntimeError("terms merge: partial counts for a query the merge was not given")
            at = ask_order[np.minimum(np.searchsorted(ask_key[ask_order], key), len(ask_key) - 1)]
            if not (ask_key[at] == key).all():
                raise RuntimeError("terms merge: partial counts for a query the merge was not given")
            return np.maximum(asks.k[at].astype(np.int64), 1)

        qid, report, term, total = top_terms(qid, report, term, total, k_of)
        found = result_rows.rows(TERMS, qid, term, report=report, count=total, keys=formats.RESULTS.keys)
        return MergeOutput(found.column("key").to_numpy(), rows=found)
