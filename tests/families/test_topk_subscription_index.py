"""The subscription index's arrival pass (`arrival_candidates`) against plain scores: every live
subscription a message reaches (its score at or above the subscription's theta) is a candidate,
at one grid cell and at many (the oracle tests' few subscriptions fit in one cell, so the cells'
spatial bounds are exercised here), and the blocks do skip subscriptions a plain scan would read."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.families.base import NEVER
from harness.families.topk.arrival import arrival_candidates
from harness.families.topk.bounds import rest_max, suffix_weights, text_floors
from harness.families.topk.scoring import normalised_weights
from harness.families.topk.subscription_index import subscription_blocks
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


def plain_blocks(x, y, offsets, values, s_w, wsum, rmax, theta, lam, alpha, n_terms, per_cell, block):
    """The blocks as two numpy lexsorts lay them out (the index's layout before it was compiled):
    entries by (term, cell, alpha group), chunks of `block` by posted theta, each chunk by key."""
    from harness.families.topk.message_index import uniform_grid
    from harness.families.topk.subscription_index import ALPHA_GROUPS, MAX_SIDE

    n = len(offsets) - 1
    geometry, cell = uniform_grid(x, y, per_cell, MAX_SIDE)
    side = int(geometry[4])
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    term = values.astype(np.int64)
    edges = np.quantile(alpha, np.linspace(0.0, 1.0, ALPHA_GROUPS + 1)[1:-1]) if n else np.zeros(0)
    a_group = np.searchsorted(edges, alpha, side="right").astype(np.int64)
    group = (term * (side * side) + cell[owner]) * ALPHA_GROUPS + a_group[owner]
    by_theta = np.lexsort((owner, -theta[owner], group))
    g_sorted = group[by_theta]
    first = np.flatnonzero(np.concatenate(([True], g_sorted[1:] != g_sorted[:-1]))) if len(g_sorted) else np.zeros(
        0, np.int64)
    rank = np.arange(len(g_sorted)) - np.repeat(first, np.diff(np.concatenate((first, [len(g_sorted)]))))
    chunk = np.empty(len(g_sorted), np.int64)
    chunk[by_theta] = rank // block
    with np.errstate(invalid="ignore", divide="ignore"):
        key = np.where(np.isfinite(lam[owner]), lam[owner] / wsum, -np.inf)
    order = np.lexsort((owner, key, chunk, group))
    g, c = group[order], chunk[order]
    starts = np.flatnonzero(np.concatenate(([True], (g[1:] != g[:-1]) | (c[1:] != c[:-1])))) if len(
        order) else np.zeros(0, np.int64)
    blk_off = np.zeros(n_terms + 1, np.int64)
    np.cumsum(np.bincount(term[order][starts], minlength=n_terms), out=blk_off[1:])
    e_sub = owner[order]
    e_w, e_rsum, e_rmax = s_w[order], (wsum - s_w)[order], rmax[order]

    def reduce(op, values_):
        return op.reduceat(values_, starts) if len(starts) else np.zeros(0)

    return (blk_off, cell[e_sub][starts], np.concatenate((starts, [len(order)])).astype(np.int64),
            reduce(np.minimum, theta[e_sub]), reduce(np.minimum, alpha[e_sub]), reduce(np.maximum, alpha[e_sub]),
            reduce(np.maximum, e_w), reduce(np.maximum, e_rsum), reduce(np.maximum, e_rmax), geometry, e_sub, e_w,
            e_rsum, e_rmax, key[order], x[e_sub], y[e_sub], alpha[e_sub])


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 400), st.integers(1, 12), st.sampled_from([1.0, 8.0, 1e9]), st.integers(1, 9),
       st.integers(0, 2**32 - 1))
def test_the_compiled_blocks_are_the_lexsorts_layout(n_sub, n_terms, per_cell, block, seed):
    """Every column of the index equals the two lexsorts' layout, with many equal thetas (0: fewer
    than k in the window, and a few repeated scores) and floors of -inf, so ties decide the order;
    groups short (sorted in place) and long (over 32 entries with few terms: sorted outright)."""
    rng = np.random.default_rng(seed)
    lens = rng.integers(1, min(n_terms, 5) + 1, n_sub)
    offsets = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
    values = np.concatenate([np.sort(rng.choice(n_terms, size=k, replace=False)) for k in lens] + [
        np.zeros(0, np.int64)]).astype(np.int64)
    idf = rng.choice([0.5, 1.0, 1.7], n_terms)
    s_w = normalised_weights(offsets, values, idf)
    wsum, rmax = suffix_weights(offsets, s_w), rest_max(offsets, s_w)
    theta = rng.choice([0.0, 0.0, 0.3, 0.55, 0.8], n_sub) * rng.choice([1.0, 1.0, 0.9], n_sub)
    alpha = rng.choice([0.1, 0.5, 0.5, 0.9], n_sub) if n_sub else np.zeros(0)
    lam = text_floors(theta, alpha)
    x, y = rng.uniform(0, 100, n_sub), rng.uniform(0, 50, n_sub)
    got = subscription_blocks(x, y, offsets, values, s_w, wsum, rmax, theta, lam, alpha, n_terms, per_cell, block)
    want = plain_blocks(x, y, offsets, values, s_w, wsum, rmax, theta, lam, alpha, n_terms, per_cell, block)
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype and np.array_equal(a, b), i
