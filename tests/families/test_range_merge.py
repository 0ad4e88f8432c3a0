"""The range merger's blocks: what a worker ships is exactly the distinct pairs, bucket by bucket."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.events import pair_keys
from harness.families.base import qid_buckets
from harness.families.range.merge import RangeMerger, pack_sorted_keys, unpack_sorted_keys

pairs = st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**32 - 1)), max_size=300)


@settings(max_examples=150, deadline=None)
@given(pairs, st.integers(1, 9))
def test_blocks_carry_each_distinct_pair_once_in_its_query_bucket(ps, n_buckets):
    keys = pair_keys(np.array([q for q, _ in ps], np.int64), np.array([o for _, o in ps], np.int64))
    blocks = list(RangeMerger.blocks(np.concatenate([keys, keys[::2]]), n_buckets))  # duplicates too
    got = {}
    for bucket, blob in blocks:
        part = unpack_sorted_keys(blob)
        assert (qid_buckets(part >> np.int64(32), n_buckets) == bucket).all()
        got.setdefault(bucket, []).append(part)
    merged = RangeMerger().merge([b for _, b in blocks], None).keys
    assert sorted(merged.tolist()) == sorted(set(keys.tolist()))
    assert sum(len(v) for parts in got.values() for v in parts) == len(set(keys.tolist()))


@given(st.lists(st.integers(0, 2**63 - 1), max_size=200, unique=True))
def test_packed_keys_round_trip(values):
    keys = np.sort(np.array(values, np.int64))
    assert unpack_sorted_keys(pack_sorted_keys(keys)).tolist() == keys.tolist()
