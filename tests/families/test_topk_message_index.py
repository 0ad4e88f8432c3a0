"""The message index's search (`best_candidates`) against a plain scan: every live window message
sharing a keyword that scores at least the returned target is among the candidates, with its
score; a target of -inf means every such message was scored. Grids of one cell, a few and many
(the tiny streams of the oracle tests fit in one cell, so the cell bounds are exercised here)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.families.topk.message_index import best_candidates, block_order, message_grid, search_scratch
from tests.families.topk_streams import plain_scores, random_stream

N_MSG, N_SUB, N_TERMS, WINDOW = 3_000, 60, 40, 1_800


@pytest.fixture(scope="module")
def stream():
    d = random_stream(N_MSG, N_SUB, N_TERMS, 11)
    d["m_exp"] = d["m_seq"] + WINDOW
    d["scores"] = [plain_scores(d, s) for s in range(N_SUB)]
    return d


@pytest.mark.parametrize("per_cell", [4.0, 60.0, 1e9])
def test_the_search_finds_every_message_reaching_its_target(stream, per_cell):
    d = stream
    grid = message_grid(d["m_x"], d["m_y"], d["m_off"], d["m_val"], d["m_w"], N_TERMS, per_cell)
    scratch = search_scratch(grid, int(np.diff(d["s_off"]).max()))
    rng = np.random.default_rng(int(per_cell) % 1000)
    m_seen = np.full(N_MSG, -1, np.int64)
    c_msg, c_score = np.empty(8, np.int64), np.empty(8)
    scored = eligible_total = 0
    finite = 0
    for s in range(N_SUB):
        scores = d["scores"][s]
        for stamp, (need, frac) in enumerate([(1, 1.0), (5, 0.95), (60, 1.0)]):
            t = int(rng.integers(WINDOW, N_MSG))
            inclusive = bool(rng.integers(2))
            min_exp = int(rng.choice([0, t + 200]))
            c_msg, c_score, n, target = best_candidates(
                s, t, inclusive, min_exp, need, frac, c_msg, c_score, m_seen, s * 3 + stamp, d["m_seq"], d["m_exp"],
                d["m_x"], d["m_y"], d["m_off"], d["m_val"], d["m_w"], grid, scratch, d["s_x"], d["s_y"], d["s_alpha"],
                d["s_off"], d["s_val"], d["s_w"], d["max_dist"])
            seq = d["m_seq"]
            live = ((seq < t) | ((seq == t) & inclusive)) & (d["m_exp"] > t) & (d["m_exp"] >= min_exp)
            eligible = np.flatnonzero(live & ~np.isnan(scores))
            got = dict(zip(c_msg[:n].tolist(), c_score[:n].tolist()))
            assert len(got) == n and set(got) <= set(eligible.tolist())
            assert all(abs(got[m] - scores[m]) < 1e-12 for m in got)
            best = np.sort(scores[eligible])[::-1]
            if target == -np.inf:
                assert set(got) == set(eligible.tolist())
            else:
                finite += 1
                assert len(best) >= need and target <= frac * best[need - 1] + 1e-12
                assert set(eligible[scores[eligible] >= target].tolist()) <= set(got)
            scored += n
            eligible_total += len(eligible)
    assert finite > N_SUB  # most searches stopped early
    if per_cell < 100:  # the cells prune: far fewer pairs scored than a scan
        assert scored < 0.5 * eligible_total


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 400), st.integers(1, 6), st.integers(1, 9), st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_block_order_is_lexsorts_order(n, n_terms, n_cells, n_weights, seed):
    """By term, cell, weight (heaviest first), ties in entry order; runs long enough for both the
    insertion sort and the merge sort (few terms and cells, few distinct weights: many ties)."""
    rng = np.random.default_rng(seed)
    term, cell = rng.integers(0, n_terms, n), rng.integers(0, n_cells, n)
    weights = rng.choice(np.linspace(0.1, 1.0, n_weights), n)
    order, o_term, o_cell = block_order(term, cell, weights, n_terms, n_cells)
    want = np.lexsort((-weights, cell, term))
    assert np.array_equal(order, want)
    assert np.array_equal(o_term, term[want]) and np.array_equal(o_cell, cell[want])
