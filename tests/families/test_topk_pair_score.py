"""scoring.pair_score against a plain walk of both term lists: the same double for every pair,
whether the lists are alike in length (walked) or one is far longer than the other (each term of
the shorter searched in the longer), since the common terms are summed in ascending order either
way (scoring.py: a score is the same double wherever it is computed)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.families.topk.scoring import pair_score


def walked(sx, sy, alpha, s_val, s_w, mx, my, m_val, m_w, max_dist):
    ssim = 1.0 - math.sqrt((mx - sx) ** 2 + (my - sy) ** 2) / max_dist
    tsim, i, j = 0.0, 0, 0
    while i < len(s_val) and j < len(m_val):
        if s_val[i] == m_val[j]:
            tsim += float(s_w[i]) * float(m_w[j])
            i, j = i + 1, j + 1
        elif s_val[i] < m_val[j]:
            i += 1
        else:
            j += 1
    return alpha * ssim + (1.0 - alpha) * tsim


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 6), st.integers(0, 60), st.integers(1, 80), st.booleans(), st.integers(0, 2**32 - 1))
def test_pair_score_is_the_walks_double(n_s, n_m, n_terms, swap, seed):
    rng = np.random.default_rng(seed)
    if swap:  # the message the shorter list
        n_s, n_m = n_m, n_s
    s_val = np.sort(rng.choice(n_terms, size=min(n_s, n_terms), replace=False)).astype(np.int64)
    m_val = np.sort(rng.choice(n_terms, size=min(n_m, n_terms), replace=False)).astype(np.int64)
    s_w, m_w = rng.random(len(s_val)), rng.random(len(m_val))
    sx, sy, mx, my, alpha = *rng.uniform(0, 10, 4), float(rng.uniform(0.01, 0.99))
    pad = 3  # the lists inside longer arrays, as the kernels pass them
    s_arr = np.concatenate((np.full(pad, -1), s_val, np.full(pad, n_terms + 5)))
    m_arr = np.concatenate((np.full(pad, -1), m_val, np.full(pad, n_terms + 5)))
    s_warr, m_warr = np.concatenate((np.ones(pad), s_w, np.ones(pad))), np.concatenate((np.ones(pad), m_w, np.ones(pad)))
    got = pair_score(sx, sy, alpha, s_arr, s_warr, pad, pad + len(s_val), mx, my, m_arr, m_warr, pad,
                     pad + len(m_val), 20.0)
    assert got == walked(sx, sy, alpha, s_val, s_w, mx, my, m_val, m_w, 20.0)
