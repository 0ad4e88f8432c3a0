"""The subscription index's arrival pass (`arrival_candidates`) against plain scores: every live
subscription a message reaches (its score at or above the subscription's theta) is a candidate,
at one grid cell and at many (the oracle tests' few subscriptions fit in one cell, so the cells'
spatial bounds are exercised here), and the blocks do skip subscriptions a plain scan would read."""

from __future__ import annotations

import numpy as np
import pytest

from harness.families.base import NEVER
from harness.families.topk.arrival import arrival_candidates
from tests.families.topk_streams import built_index, scored_stream

N_MSG, N_SUB, N_TERMS = 200, 500, 30


@pytest.fixture(scope="module")
def stream():
    return scored_stream(N_MSG, N_SUB, N_TERMS)


@pytest.mark.parametrize("per_cell", [1e9, 8.0])
def test_every_subscription_a_message_reaches_is_a_candidate(stream, per_cell):
    d = stream
    index, theta, alpha, lam, wsum, rmax = built_index(d, N_TERMS, per_cell=per_cell)
    longest = int(np.diff(d["m_off"]).max())
    m_rmax, m_rsum = np.empty(longest + 1), np.empty(longest + 1)
    s_seen = np.full(N_SUB, -1, np.int64)
    cand = np.empty(N_SUB, np.int64)
    none = np.full(N_TERMS, -1, np.int64)
    empty = np.zeros(0, np.int64)
    s_ins, s_del = np.full(N_SUB, -1, np.int64), np.full(N_SUB, NEVER, np.int64)
    read = reached_total = skipped_total = 0
    for m in range(N_MSG):
        n, pruned, skipped = arrival_candidates(
            m, m, m, d["m_off"], d["m_val"], d["m_w"], d["m_x"], d["m_y"], m_rmax, m_rsum, index, none, empty, empty,
            empty, d["s_w"], wsum, rmax, s_seen, lam, theta, np.full(N_SUB, -1, np.int64), s_ins, s_del, d["s_x"],
            d["s_y"], alpha, d["max_dist"], cand)
        got = set(cand[:n].tolist())
        scores = d["scores"][:, m]
        reached = set(np.flatnonzero(~np.isnan(scores) & (scores >= theta)).tolist())
        assert reached <= got, (m, sorted(reached - got))
        assert got <= set(np.flatnonzero(~np.isnan(scores)).tolist())  # candidates share a keyword
        read += n + pruned
        reached_total += len(reached)
        skipped_total += skipped
    sharing = int((~np.isnan(d["scores"])).sum())
    assert reached_total > N_MSG  # the thresholds leave work to do
    if per_cell < 100:  # many cells: whole blocks are skipped, and fewer subscriptions read one by one
        assert skipped_total > 0 and read < 0.5 * sharing
