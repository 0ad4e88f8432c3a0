"""The small array helpers the engine, mergers and strategies share, against plain readings."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from harness.core.events import csr_of, small_ints, sorted_runs


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
