"""Skype's score (Eq. 1) as the worker index computes it: weights, normalisation, one pair's score.

Score(s, m) = alpha * SSim + (1 - alpha) * TSim, SSim = 1 - EDist / MaxDist, TSim = the cosine of the
tf-idf vectors over the common keywords. Decisions (ADR-0045):

- tf = 1 (objects and subscriptions are distinct term sets); idf(t) = ln(1 + (N + 1) / (df(t) + 1))
  over the stream's N objects (smoothed: a term in every object keeps a weight > 0, a subscription
  term no object holds does not divide by zero), rounded to a multiple of 2^-20 so that a libm that
  differs in the last bit of a logarithm cannot change a score;
- each set's weights are L2-normalised, summing squares in ascending term order;
- TSim sums the products over the common terms in ascending term order, then the score is formed in
  the order written above; every sum runs in that one order, so a score is the same double wherever
  it is computed (ties are real ties and the tie rule, newer message first, decides them);
- MaxDist = the diagonal of the bounding box of the stream's objects and top-k subscriptions.

The oracle (oracle.py) computes the same numbers with code of its own.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from harness.core.events import OBJECT, TOPK, Events
from harness.core.kernels import lower_bound

QUANTUM = 2.0 ** 20  # idf values are multiples of 1 / QUANTUM


@njit(cache=True)
def term_idf(df: np.ndarray, n_docs: int) -> np.ndarray:
    out = np.empty(len(df), np.float64)
    for t in range(len(df)):
        raw = math.log(1.0 + (n_docs + 1.0) / (df[t] + 1.0))
        out[t] = math.floor(raw * QUANTUM + 0.5) / QUANTUM
    return out


@njit(cache=True)
def normalised_weights(offsets: np.ndarray, values: np.ndarray, idf: np.ndarray) -> np.ndarray:
    """Per CSR entry, its term's idf divided by the L2 norm of its set."""
    return weights_and_norms(offsets, values, idf)[0]


@njit(cache=True)
def message_norms(offsets: np.ndarray, values: np.ndarray, idf: np.ndarray) -> np.ndarray:
    """Per CSR row, the L2 norm `normalised_weights` divides by (the same sum, in the same order):
    a row's weights are idf / norm, so along ascending norms every term's weight falls (the message
    grid's order, message_index.grid_blocks)."""
    return weights_and_norms(offsets, values, idf)[1]


@njit(cache=True)
def weights_and_norms(offsets: np.ndarray, values: np.ndarray, idf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`normalised_weights` and each row's norm in one pass (the worker's window takes both)."""
    out = np.empty(len(values), np.float64)
    norms = np.empty(len(offsets) - 1, np.float64)
    for r in range(len(offsets) - 1):
        total = 0.0
        for j in range(offsets[r], offsets[r + 1]):
            w = idf[values[j]]
            total += w * w
        norm = math.sqrt(total)
        norms[r] = norm
        for j in range(offsets[r], offsets[r + 1]):
            out[j] = idf[values[j]] / norm if norm > 0.0 else 0.0
    return out, norms


@njit(cache=True, inline="always")
def searched_dot(short_val, short_w, a_lo, a_hi, long_val, long_w, b_lo, b_hi):
    """The sum of the weight products of the terms two ascending lists share, each term of the short
    one searched in the rest of the long one: the common terms in ascending order, as a walk of both
    sums them (a product's two factors commute exactly), so the same double (`pair_score`)."""
    total = 0.0
    j = b_lo
    for i in range(a_lo, a_hi):
        j = lower_bound(long_val, j, b_hi, short_val[i])
        if j == b_hi:
            break
        if long_val[j] == short_val[i]:
            total += short_w[i] * long_w[j]
            j += 1
    return total


@njit(cache=True, inline="always")
def pair_score(sx, sy, alpha, s_val, s_w, s_lo, s_hi, mx, my, m_val, m_w, m_lo, m_hi, max_dist):
    """Eq. 1 for one (subscription, message): both term lists ascending. The common terms are
    summed in ascending order whichever way they are found: a walk of both lists, or, when one is
    over four times the other and eight more (a subscription's 1-5 keywords against a message's 30-44 on
    synthetic_long; not a synthetic message's few, where the walk is as quick), each term of the
    shorter one searched in the rest of the longer."""
    dx = mx - sx
    dy = my - sy
    ssim = 1.0 - math.sqrt(dx * dx + dy * dy) / max_dist
    tsim = 0.0
    n_s, n_m = s_hi - s_lo, m_hi - m_lo
    if n_m > 4 * n_s + 8:
        tsim = searched_dot(s_val, s_w, s_lo, s_hi, m_val, m_w, m_lo, m_hi)
    elif n_s > 4 * n_m + 8:
        tsim = searched_dot(m_val, m_w, m_lo, m_hi, s_val, s_w, s_lo, s_hi)
    else:
        i, j = s_lo, m_lo
        while i < s_hi and j < m_hi:
            a, b = s_val[i], m_val[j]
            if a == b:
                tsim += s_w[i] * m_w[j]
                i += 1
                j += 1
            elif a < b:
                i += 1
            else:
                j += 1
    return alpha * ssim + (1.0 - alpha) * tsim



def stream_weights(events: Events) -> tuple[np.ndarray, float]:
    """(idf per term id, MaxDist) of a stream: what every worker of a run scores with."""
    is_obj = events.kind == OBJECT
    lens = np.diff(events.offsets)
    owner_obj = np.repeat(is_obj, lens)
    n_terms = int(events.values.max()) + 1 if len(events.values) else 1
    df = np.bincount(events.values[owner_obj], minlength=n_terms).astype(np.float64)
    idf = term_idf(df, int(is_obj.sum()))
    used = is_obj | ((events.family == TOPK) & (events.kind != OBJECT))
    if not used.any():
        return idf, 1.0
    x, y = events.x[used], events.y[used]
    dx, dy = float(x.max() - x.min()), float(y.max() - y.min())
    diag = math.sqrt(dx * dx + dy * dy)
    return idf, diag if diag > 0.0 else 1.0
