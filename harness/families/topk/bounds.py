"""Skype's text bounds (Sec. 5) as the top-k worker uses them to skip pairs without scoring them.

Keywords are in Skype order (rarest first: term id = frequency rank, so ascending ids). For a pair
met through its rarest common keyword, the rest of each set is unseen: its text similarity is at
most that keyword's product plus Eq. 5's bound over the rest (`text_bound`, Thm 5.2). A
subscription needs a text similarity of at least lambda_T (Eq. 2, `text_floor`) to reach its
theta. Every bound keeps MARGIN, far above rounding, so a pair is skipped only when it surely
falls short.
"""

from __future__ import annotations

import numpy as np
from numba import njit

MARGIN = 1e-9


@njit(cache=True)
def rest_max(offsets: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per CSR entry, the largest weight of its set's terms after it in Skype order (every smaller
    id's; 0 for the last): Eq. 5's maxwt of the unseen keywords."""
    out = np.empty(len(weights))
    for r in range(len(offsets) - 1):
        top = 0.0
        for j in range(offsets[r], offsets[r + 1]):
            out[j] = top
            top = max(top, weights[j])
    return out


@njit(cache=True)
def suffix_weights(offsets: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per CSR entry, Skype's wtsum (Eq. 3): the weights of its set's terms from it on in Skype
    order (rarest first, so: its own and every smaller id's), an upper bound of the text similarity
    of any message whose rarest keyword in common is this one."""
    out = np.empty(len(weights))
    for r in range(len(offsets) - 1):
        total = 0.0
        for j in range(offsets[r], offsets[r + 1]):
            total += weights[j]
            out[j] = total
    return out


@njit(cache=True, inline="always")
def text_bound(s_wt, m_wt, s_rest_sum, s_rest_max, m_rest_sum, m_rest_max):
    """TSim's upper bound when the pair's rarest common keyword has weights s_wt and m_wt and the
    rest of each set (the more frequent keywords, Skype order) is unseen: the keyword's product
    plus Eq. 5's TSimUB, min(wtsum(s rest) x maxwt(m rest), wtsum(m rest) x maxwt(s rest))
    (Thm 5.2)."""
    return s_wt * m_wt + min(s_rest_sum * m_rest_max, m_rest_sum * s_rest_max)


@njit(cache=True, inline="always")
def text_floor(theta, alpha, ssim_ub=1.0):
    """Skype's lambda_T (Eq. 2): the text similarity a message needs to reach theta when its
    spatial similarity is at most ssim_ub (1 here: no spatial bound is kept), less a margin far
    above rounding (a pair is skipped only when it is surely below theta); -inf when every message
    qualifies."""
    if theta <= 0.0:
        return -np.inf
    return theta / (1.0 - alpha) - alpha / (1.0 - alpha) * ssim_ub - MARGIN


@njit(cache=True)
def text_floors(theta, alpha):
    out = np.empty(len(theta))
    for s in range(len(theta)):
        out[s] = text_floor(theta[s], alpha[s])
    return out
