"""Range subscriptions' merger: the union of the workers' (query, object) pairs.

A pair can reach the merge from several workers (a subscription replicated over partitions that
an object also reaches twice, text routers sending an object to every owner of its terms); the
result is each distinct pair once. Range results need no state across epochs and no feedback.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from harness.core.events import Events, sorted_unique
from harness.families.base import MAX_BLOCK_BYTES, Merger, MergeOutput, qid_buckets


class RangeMerger(Merger):
    union_of_pairs = True

    @staticmethod
    def blocks(results: np.ndarray, n_buckets: int) -> Iterator[tuple[int, bytes]]:
        """Sorted distinct keys split by the bucket of their query id, in blocks capped in size."""
        keys = sorted_unique(results)
        bucket = qid_buckets(keys >> np.int64(32), n_buckets)
        order = np.argsort(bucket, kind="stable")
        keys, bucket = keys[order], bucket[order]
        step = MAX_BLOCK_BYTES // 8
        for b in np.unique(bucket):
            lo, hi = np.searchsorted(bucket, [b, b + 1])
            for s in range(lo, hi, step):
                yield int(b), keys[s:min(s + step, hi)].tobytes()

    def merge(self, blobs: list[bytes], queries: Events) -> MergeOutput:
        keys = [np.frombuffer(b, np.int64) for b in blobs]
        return MergeOutput(sorted_unique(np.concatenate(keys)) if keys else np.zeros(0, np.int64))
