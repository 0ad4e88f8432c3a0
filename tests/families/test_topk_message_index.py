"""The message index's search (`best_candidates`) against a plain scan: every live window message
sharing a keyword that scores at least the returned target is among the candidates, with its
score; a target of -inf means every such message was scored. Grids of one cell, a few and many
(the tiny streams of the oracle tests fit in one cell, so the cell bounds are exercised here)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.families.topk.message_index import best_candidates, grid_blocks, message_grid, search_scratch
from harness.families.topk.scoring import message_norms, normalised_weights, weights_and_norms
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


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 120), st.integers(1, 6), st.integers(1, 9), st.integers(1, 5), st.sampled_from(["norms", "zeros",
                                                                                                   "random"]),
       st.integers(0, 2**32 - 1))
def test_grid_blocks_hold_each_terms_entries_in_lexsorts_order(n_msg, n_terms, n_cells, n_idf, key_kind, seed):
    """A term's blocks, by cell, hold its entries in np.lexsort((-weights, cell, term))'s order
    (weight heaviest first, ties in entry order), each block one (term, cell) with its largest
    weight, whatever the messages' key (their norms: blocks come ranked but for ties of unequal
    norms; zeros or random: the insertion sort and the outright sort do the work); few terms,
    cells and idf values: long blocks, many ties."""
    rng = np.random.default_rng(seed)
    lens = rng.integers(0, n_terms + 1, n_msg)
    offsets = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    values = np.concatenate([np.sort(rng.choice(n_terms, size=k, replace=False)) for k in lens] + [
        np.zeros(0, np.int64)]).astype(np.int64)
    idf = rng.choice(np.linspace(0.5, 2.0, n_idf), n_terms)
    weights = normalised_weights(offsets, values, idf)
    cell = rng.integers(0, n_cells, n_msg)
    key = {"norms": message_norms(offsets, values, idf), "zeros": np.zeros(n_msg),
           "random": rng.random(n_msg)}[key_kind]
    term_blocks, blk_cell, blk_start, blk_end, blk_maxw, e_msg, e_w = grid_blocks(offsets, values, weights, cell, key,
                                                                                  n_terms, n_cells)
    owner = np.repeat(np.arange(n_msg), lens)
    want = np.lexsort((-weights, cell[owner], values))
    got = []
    for t in range(n_terms):
        blocks = np.arange(term_blocks[t], term_blocks[t + 1])
        assert np.all(np.diff(blk_cell[blocks]) > 0)
        for b in blocks:
            rows = np.arange(blk_start[b], blk_end[b])
            assert len(rows) and np.all(cell[e_msg[rows]] == blk_cell[b]) and blk_maxw[b] == e_w[rows].max()
            got.extend(rows.tolist())
    assert term_blocks[-1] == len(blk_cell) and sorted(got) == list(range(len(values)))  # each entry once
    assert np.array_equal(e_msg[got], owner[want]) and np.array_equal(e_w[got], weights[want])


def test_a_terms_weights_fall_along_the_norms():
    """grid_order's premise: idf / norm falls as the norm rises, for every term (ties allowed)."""
    rng = np.random.default_rng(5)
    lens = rng.integers(1, 40, 2_000)
    offsets = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    values = np.concatenate([np.sort(rng.choice(300, size=k, replace=False)) for k in lens]).astype(np.int64)
    idf = rng.uniform(0.1, 9.0, 300)
    weights, norms = normalised_weights(offsets, values, idf), message_norms(offsets, values, idf)
    owner = np.repeat(np.arange(len(lens)), lens)
    by = np.lexsort((norms[owner], values))
    same = values[by][1:] == values[by][:-1]
    assert same.any() and np.all(weights[by][1:][same] <= weights[by][:-1][same])
    assert np.array_equal(weights, idf[values] / norms[owner])
    both = weights_and_norms(offsets, values, idf)  # the index's one pass gives the same two
    assert np.array_equal(both[0], weights) and np.array_equal(both[1], norms)
