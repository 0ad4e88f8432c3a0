"""Skype's buffer pieces against plain readings: the k-skyband's dominance counts, and the threshold
the cost model (Eq. 9-13) and the ratio rule pick."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.families.topk.skyband import CSKYBAND, PAIR_COST, RATIO, choose_theta, rank_order, skyband


@settings(max_examples=200, deadline=None)
@given(scores=st.lists(st.sampled_from([0.1, 0.2, 0.3, 0.5, 0.7, 0.9]), min_size=1, max_size=25),
       k=st.integers(1, 5), theta=st.sampled_from([0.0, 0.2, 0.5]))
def test_skyband_keeps_what_fewer_than_k_newer_better_messages_dominate(scores, k, theta):
    n = len(scores)
    c_msg = np.arange(n, dtype=np.int64)  # message i arrived at seq i
    c_score = np.array(scores)
    m_seq = np.arange(n, dtype=np.int64)
    order = rank_order(c_msg, c_score, n, m_seq)
    out_msg, out_score, out_dom = np.zeros(n, np.int64), np.zeros(n), np.zeros(n, np.int64)
    size = skyband(c_msg, c_score, order, theta, k, m_seq, out_msg, out_score, out_dom)
    expected = []
    for i in range(n):
        dom = sum(1 for j in range(i + 1, n) if scores[j] >= scores[i])
        if scores[i] >= theta and dom < k:
            expected.append((-scores[i], -i, dom))
    expected.sort()
    assert [(-s, -i, d) for s, i, d in expected] == list(zip(out_score[:size], out_msg[:size], out_dom[:size]))


def test_the_ratio_rule_and_the_cost_model():
    scores = np.linspace(1.0, 0.01, 100)
    assert choose_theta(scores[:3], 5, 1000, CSKYBAND, 0.0, 3, True) == 0.0  # fewer than k: everything
    assert choose_theta(scores, 5, 1000, RATIO, 0.95, 100, True) == 0.95 * scores[4]
    assert choose_theta(scores[:5], 5, 1000, RATIO, 1.0, 100, False) == scores[4]  # k found by a cut-off search
    theta = choose_theta(scores, 5, 1000, CSKYBAND, 0.0, 100, True)

    def cost(j, k=5, w=1000, scored=100, pair_cost=PAIR_COST):
        prob = j / w
        z = (2 * (j - k + 1) * j + (j - k + 1) * (j - k + 2)) / prob
        return prob * k * math.log(j / k) + pair_cost * scored / z
    best = min(range(5, 101), key=cost)
    assert theta == scores[best - 1] and 5 < best < 100  # an interior optimum: neither extreme
    # the price of a scored pair (index.topk.pair_cost): dearer re-evaluations buy a deeper buffer
    depth = {}
    for price in (75.0, 150.0, 300.0, 3000.0):
        best = min(range(5, 101), key=lambda j: cost(j, pair_cost=price))
        assert choose_theta(scores, 5, 1000, CSKYBAND, 0.0, 100, True, price) == scores[best - 1], price
        depth[price] = best
    assert depth[75.0] <= depth[150.0] <= depth[300.0] <= depth[3000.0] and depth[75.0] < depth[3000.0], depth


def test_skypes_worked_bounds_examples_2_3_and_5():
    """Skype Sec. 5.1 (weights not normalised in the examples): Eq. 2's lambda_T and Lemma 3's skip."""
    from harness.families.topk.bounds import MARGIN, text_floor

    lam = text_floor(0.7, 0.6, 0.98)  # Ex. 2: kScore 0.7, alpha 0.6, SSimUB 0.98
    assert abs(lam + MARGIN - 0.28) < 1e-12
    assert 0.1 * 1.0 < lam  # Ex. 3: wtsum(s1.w4) = 0.1 (any message weight <= 1): s1 is skipped at w4
    assert abs(text_floor(0.6, 0.5, 1.0) + MARGIN - 0.20) < 1e-12  # Ex. 5 with SSimUB = 1
    assert abs(text_floor(0.6, 0.5, 0.65) + MARGIN - 0.55) < 1e-12  # Ex. 5 with the inner + outer bound
    assert text_floor(0.0, 0.5) == -np.inf  # a subscription with fewer than k results takes everything


def test_skypes_worked_bounds_examples_4_and_6():
    """Ex. 4 (Def. 5's refined prefix) and Ex. 6 (Thm 5.2, Eq. 5), through the index's own pieces:
    a subscription block read up to the message's largest weight from the keyword on, and the text
    bound of a pair whose rarest common keyword is known. Fig. 4's weights are only in the figure
    image; Ex. 6 gives every number it uses, Ex. 4 only lambda_T."""
    from harness.core.kernels import upper_bound
    from harness.families.topk.bounds import MARGIN, text_bound, text_floor
    from harness.families.topk.subscription_index import subscription_blocks

    lam = text_floor(0.7, 0.6, 0.99)  # Ex. 4: kScore 0.7, alpha 0.6, SSimUB 0.99: lambda_T = 0.265 ("0.26")
    assert abs(lam + MARGIN - 0.265) < 1e-12
    # Def. 5 on one subscription with terms 2 (wtsum 0.3) and 5 (wtsum 0.5, Skype order: 5 first):
    # a message holding terms 1 (weight 0.9), 2 (0.4) and 5 (0.45) reads the entry of term 5 only
    # when 0.5 x (its largest weight from term 5 on, 0.45) reaches lambda_T; the message's largest
    # weight overall (0.9) would read it
    offsets, values = np.array([0, 2]), np.array([2, 5])
    wsum, w = np.array([0.3, 0.5]), np.array([0.3, 0.2])
    index = subscription_blocks(np.zeros(1), np.zeros(1), offsets, values, w, wsum, np.array([0.0, 0.3]),
                                np.array([0.7]), np.array([lam]), np.array([0.6]), 6)
    blk_off, blk_start, e_sub, e_key = index[0], index[2], index[10], index[14]
    b = blk_off[5]
    assert blk_off[6] == b + 1 and list(e_sub[blk_start[b]:blk_start[b + 1]]) == [0]
    assert upper_bound(e_key, blk_start[b], blk_start[b + 1], 0.45) == blk_start[b]  # 0.5 x 0.45 < 0.265: not read
    assert upper_bound(e_key, blk_start[b], blk_start[b + 1], 0.9) == blk_start[b + 1]  # unrefined: read
    # Ex. 6: TSim(s3[1:2], m3[1:1]) = 0.4 x 0.7 = 0.28 at their rarest common keyword w2, and Eq. 5
    # over the rest: min(wtsum(s3[3:]) 0.4 x maxwt(m3[2:]) 0.3, wtsum(m3[2:]) 0.5 x maxwt(s3[3:]) 0.3)
    bound = text_bound(0.4, 0.7, 0.4, 0.3, 0.5, 0.3)
    assert abs(bound - (0.28 + 0.12)) < 1e-12 and bound < 0.48  # s3 is skipped
    assert text_bound(0.4, 0.7, 0.4, 0.3, 0.2, 0.3) == pytest.approx(0.28 + 0.06)  # the other side of the min


def test_the_kernels_clock_is_the_monotonic_clock():
    """`monotonic_ns` (the top-k phases' clock, called inside compiled loops) reads the same clock
    as time.monotonic_ns: a reading falls between two of Python's, and time moves forward."""
    import time

    from harness.core.kernels import monotonic_ns

    buf = np.zeros(2, np.int64)
    monotonic_ns(buf)  # compiled or loaded before the readings
    before = time.monotonic_ns()
    inside = monotonic_ns(buf)
    after = time.monotonic_ns()
    assert before <= inside <= after
