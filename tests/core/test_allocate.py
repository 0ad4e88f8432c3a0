"""The one greedy kernel behind every LPT in the project, against a plain-Python statement of each
tie rule."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import allocate


def greedy_reference(order, loads, p, size_ties):
    totals, sizes, out = [0.0] * p, [0] * p, {}
    for i in order:
        key = (lambda w: (totals[w], sizes[w], w)) if size_ties else (lambda w: (totals[w], w))
        best = min(range(p), key=key)
        out[i] = best
        totals[best] += loads[i]
        sizes[best] += 1
    return [out[i] for i in range(len(loads))]


loads_st = st.lists(st.integers(0, 5), min_size=1, max_size=40).map(lambda v: np.array(v, np.float64))


@settings(max_examples=60, deadline=None)
@given(loads=loads_st, p=st.integers(1, 6))
def test_lpt_assign_and_spread_follow_their_tie_rules(loads, p):
    order = list(np.argsort(-loads, kind="mergesort"))
    assert allocate.lpt_assign(loads, p).tolist() == greedy_reference(order, loads, p, False)
    assert allocate.lpt_spread(loads, p).tolist() == greedy_reference(order, loads, p, True)


@settings(max_examples=60, deadline=None)
@given(loads=loads_st, p=st.integers(1, 5), data=st.data())
def test_greedy_per_group_restarts_at_each_group(loads, p, data):
    group = np.sort(np.array(data.draw(st.lists(st.integers(0, 3), min_size=len(loads), max_size=len(loads)))))
    got = allocate.greedy_per_group(group, loads, p).tolist()
    expect = []
    for g in np.unique(group):
        idx = np.flatnonzero(group == g)
        expect += greedy_reference(list(range(len(idx))), loads[idx], p, True)
    assert got == expect


def test_spread_leaves_no_bin_empty_while_items_remain():
    assert sorted(allocate.lpt_spread(np.zeros(4), 4).tolist()) == [0, 1, 2, 3]
    assert allocate.lpt_assign(np.zeros(4), 4).tolist() == [0, 0, 0, 0]
