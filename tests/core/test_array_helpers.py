"""The small array helpers the engine, mergers and strategies share, against plain readings."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from harness.core.events import csr_of, csr_take, small_ints, sorted_runs


@given(st.lists(st.integers(-3, 3)))
def test_sorted_runs_are_the_groups_of_equal_values(values):
    values = np.sort(np.array(values, np.int64))
    want, at = [], 0
    for _, group in itertools.groupby(values.tolist()):
        n = len(list(group))
        want.append((at, at + n))
        at += n
    assert sorted_runs(values) == want


@given(st.lists(st.lists(st.integers(0, 99), max_size=5), max_size=6))
def test_csr_of_keeps_each_part(parts):
    offsets, values = csr_of([np.array(p, np.int64) for p in parts])
    assert [values[offsets[i]:offsets[i + 1]].tolist() for i in range(len(parts))] == parts


@given(st.lists(st.integers(0, 70000)), st.sampled_from([1, 256, 257, 65536, 70001]))
def test_small_ints_sort_in_the_same_order(values, extra):
    bound = max(values, default=0) + extra
    a = np.array(values, np.int64)
    assert np.argsort(small_ints(a, bound), kind="stable").tolist() == np.argsort(a, kind="stable").tolist()


@given(st.integers(0, 40), st.integers(0, 40), st.integers(0, 3))
def test_a_slice_of_events_is_the_take_of_its_rows(a, b, seed):
    from tests.streams import random_stream

    ev = random_stream(seed, n_objects=20, n_queries=10)
    lo, hi = sorted((min(a, len(ev)), min(b, len(ev))))
    got, want = ev.slice(lo, hi), ev.take(np.arange(lo, hi))
    assert len(got) == hi - lo and np.array_equal(got.offsets, want.offsets) and np.array_equal(got.values, want.values)
    assert all(np.array_equal(got.cols[n], want.cols[n], equal_nan=True) for n in want.cols)


@given(st.lists(st.integers(0, 60), max_size=40), st.integers(0, 60), st.integers(0, 70))
def test_seq_positions_are_searchsorted_positions(seq, start, length):
    from harness.core.events import seq_positions

    seq = np.array(seq, np.int64)
    runs = np.arange(start, start + length, dtype=np.int64)  # consecutive: by subtraction
    assert np.array_equal(seq_positions(runs, seq), np.searchsorted(runs, seq))
    gaps = np.unique(runs * 2)  # not consecutive: the binary search
    assert np.array_equal(seq_positions(gaps, seq), np.searchsorted(gaps, seq))


@given(st.lists(st.lists(st.integers(0, 2**31 - 1), max_size=5), max_size=8), st.data())
def test_csr_take_gathers_the_rows_asked_for_in_order(rows, data):
    offsets = np.cumsum([0] + [len(r) for r in rows]).astype(np.int64)
    values = np.array([v for r in rows for v in r], np.int32)
    picked = data.draw(st.lists(st.integers(0, len(rows) - 1), max_size=10)) if rows else []
    new_offsets, got = csr_take(offsets, values, np.array(picked, np.int64))
    want = [rows[i] for i in picked]
    assert new_offsets.tolist() == np.cumsum([0] + [len(r) for r in want]).tolist()
    assert got.dtype == values.dtype and got.tolist() == [v for r in want for v in r]
