"""Range subscriptions' merger: the union of the workers' (query, object) pairs.

A pair can reach the merge from several workers (a subscription replicated over partitions that
an object also reaches twice, text routers sending an object to every owner of its terms); the
result is each distinct pair once. Range results need no state across epochs and no feedback.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa

from harness.core.events import Events, small_ints, sorted_runs, sorted_unique
from harness.families.base import MAX_BLOCK_BYTES, Merger, MergeOutput, qid_buckets


CODEC = "zstd"  # measured against lz4 and raw bytes: the shortest merge stage of the three


def pack_sorted_keys(keys: np.ndarray) -> bytes:
    """Ascending pair keys as they cross the merge shuffle: their differences (small: consecutive
    keys of a query differ in the object id only), compressed, after an 8-byte count. The pairs
    text partitioners ship are most of what their epoch jobs move (156 MB in a 32-worker
    grand_range epoch); this carries them in about a sixth of the bytes."""
    deltas = np.diff(keys, prepend=np.int64(0))
    return len(keys).to_bytes(8, "little") + pa.compress(deltas, codec=CODEC, asbytes=True)


def unpack_sorted_keys(blob: bytes) -> np.ndarray:
    n = int.from_bytes(blob[:8], "little")
    raw = pa.decompress(memoryview(blob)[8:], decompressed_size=8 * n, codec=CODEC, asbytes=True)
    return np.cumsum(np.frombuffer(raw, np.int64))


class RangeMerger(Merger):
    union_of_pairs = True

    @staticmethod
    def blocks(results: np.ndarray, n_buckets: int) -> Iterator[tuple[int, bytes]]:
        """Sorted distinct keys split by the bucket of their query id, in blocks capped in size."""
        keys = sorted_unique(results)
        bucket = qid_buckets(keys >> np.int64(32), n_buckets)
        order = np.argsort(small_ints(bucket, n_buckets), kind="stable")
        keys, bucket = keys[order], bucket[order]
        step = MAX_BLOCK_BYTES // 8
        for lo, hi in sorted_runs(bucket):
            for s in range(lo, hi, step):
                yield int(bucket[lo]), pack_sorted_keys(keys[s:min(s + step, hi)])

    def merge(self, blobs: list[bytes], queries: Events) -> MergeOutput:
        keys = [unpack_sorted_keys(b) for b in blobs]
        return MergeOutput(sorted_unique(np.concatenate(keys)) if keys else np.zeros(0, np.int64))
