"""Range subscriptions' merger: the union of the workers' (query, object) pairs.

A pair can reach the merge from several workers (a subscription replicated over partitions that
an object also reaches twice, text routers sending an object to every owner of its terms); the
result is each distinct pair once. Range results need no state across epochs and no feedback.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa

from harness.core.events import Events, sorted_unique
from harness.families.base import MAX_BLOCK_BYTES, Merger, MergeOutput, qid_buckets


CODEC = "zstd"  # measured against lz4 and raw bytes: the shortest merge stage of the three


def pack_sorted_keys(keys: np.ndarray) -> bytes:
    """Ascending pair keys as they cross the merge shuffle: their differences (small: consecutive
    keys of a query differ in the object id only) byte-plane by byte-plane, compressed, after an
    8-byte count. The pairs text partitioners ship are most of what their epoch jobs move (156 MB
    in a 32-worker grand_range epoch). The planes put the differences' always-zero high bytes
    together: against compressing the differences as they are, a third of the packing time, half
    of the unpacking time and 15% fewer bytes (docs/changelog.md, issue 19, sixth part)."""
    deltas = np.diff(keys, prepend=np.int64(0))
    planes = np.ascontiguousarray(deltas.view(np.uint8).reshape(-1, 8).T)
    return len(keys).to_bytes(8, "little") + pa.compress(planes, codec=CODEC, asbytes=True)


def unpack_sorted_keys(blob: bytes) -> np.ndarray:
    n = int.from_bytes(blob[:8], "little")
    raw = pa.decompress(memoryview(blob)[8:], decompressed_size=8 * n, codec=CODEC, asbytes=True)
    deltas = np.ascontiguousarray(np.frombuffer(raw, np.uint8).reshape(8, n).T).view(np.int64).reshape(n)
    return np.cumsum(deltas)


class RangeMerger(Merger):
    union_of_pairs = True

    @staticmethod
    def blocks(results: np.ndarray, n_buckets: int) -> Iterator[tuple[int, bytes]]:
        """Sorted distinct keys split by the bucket of their query id, in blocks capped in size."""
        keys = sorted_unique(results)
        qids = keys >> np.int64(32)
        starts = np.flatnonzero(np.r_[True, qids[1:] != qids[:-1]]) if len(keys) else np.zeros(0, np.int64)
        # a bucket per query, not per pair (hashing every pair was a tenth of a worker's packing),
        # and a mask per bucket instead of a stable argsort and two gathers (half the time)
        run_bucket = qid_buckets(qids[starts], n_buckets)
        bucket = np.repeat(run_bucket, np.diff(np.r_[starts, len(keys)]))
        step = MAX_BLOCK_BYTES // 8
        for b in np.unique(run_bucket).tolist():
            part = keys[bucket == b]
            for s in range(0, len(part), step):
                yield b, pack_sorted_keys(part[s:s + step])

    def merge(self, blobs: list[bytes], queries: Events) -> MergeOutput:
        keys = [unpack_sorted_keys(b) for b in blobs]
        return MergeOutput(sorted_unique(np.concatenate(keys)) if keys else np.zeros(0, np.int64))
