"""Random top-k streams for the index tests: clustered messages with Zipf terms, subscriptions
anywhere, the weights the index scores with, and every score written out term by term (the tests'
plain answers, sharing no code with the index's kernels)."""

from __future__ import annotations

import math

import numpy as np

from harness.families.topk.bounds import rest_max, suffix_weights, text_floors
from harness.families.topk.scoring import normalised_weights, term_idf
from harness.families.topk.subscription_index import subscription_blocks


def csr(rng, n, lo, hi, p):
    rows = [np.sort(rng.choice(len(p), size=rng.integers(lo, hi + 1), replace=False, p=p)) for _ in range(n)]
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    return offsets, np.concatenate(rows).astype(np.int32)


def random_stream(n_msg: int, n_sub: int, n_terms: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    zipf = 1.0 / np.arange(1, n_terms + 1)
    p = zipf / zipf.sum()
    centres = rng.uniform(0, 100, size=(6, 2))
    xy = centres[rng.integers(0, 6, n_msg)] + rng.normal(scale=6.0, size=(n_msg, 2))
    m_off, m_val = csr(rng, n_msg, 1, 6, p)
    s_off, s_val = csr(rng, n_sub, 1, 4, p)
    idf = term_idf(np.bincount(m_val, minlength=n_terms).astype(np.float64), n_msg)
    return dict(m_x=xy[:, 0], m_y=xy[:, 1], m_off=m_off, m_val=m_val, m_w=normalised_weights(m_off, m_val, idf),
                s_x=rng.uniform(0, 100, n_sub), s_y=rng.uniform(0, 100, n_sub), s_alpha=rng.uniform(0.01, 0.99, n_sub),
                s_off=s_off, s_val=s_val, s_w=normalised_weights(s_off, s_val, idf),
                max_dist=math.hypot(np.ptp(xy[:, 0]), np.ptp(xy[:, 1])), m_seq=np.arange(n_msg, dtype=np.int64))


def plain_scores(d: dict, s: int) -> np.ndarray:
    """Every message's score for subscription s (NaN: no common keyword), written out term by term."""
    lo_s, hi_s = d["s_off"][s], d["s_off"][s + 1]
    mine = dict(zip(d["s_val"][lo_s:hi_s].tolist(), d["s_w"][lo_s:hi_s]))
    out = np.full(len(d["m_off"]) - 1, np.nan)
    for m in range(len(out)):
        lo, hi = d["m_off"][m], d["m_off"][m + 1]
        common = [mine[t] * w for t, w in zip(d["m_val"][lo:hi].tolist(), d["m_w"][lo:hi]) if t in mine]
        if common:
            ssim = 1.0 - math.hypot(d["m_x"][m] - d["s_x"][s], d["m_y"][m] - d["s_y"][s]) / d["max_dist"]
            out[m] = d["s_alpha"][s] * ssim + (1.0 - d["s_alpha"][s]) * sum(common)
    return out


def scored_stream(n_msg: int, n_sub: int, n_terms: int, seed: int = 5) -> dict:
    """`random_stream` with every (subscription, message) plain score and thresholds as buffers
    leave them: mostly near each subscription's good scores, some 0."""
    d = random_stream(n_msg, n_sub, n_terms, seed)
    d["scores"] = np.array([plain_scores(d, s) for s in range(n_sub)])  # (subscription, message)
    rng = np.random.default_rng(seed + 1)
    best = np.nanmax(np.where(np.isnan(d["scores"]), -np.inf, d["scores"]), axis=1)
    d["theta"] = np.where(rng.random(n_sub) < 0.1, 0.0, np.clip(best, 0, None) * rng.uniform(0.6, 1.0, n_sub))
    return d



def built_index(d: dict, n_terms: int, per_cell: float, block: int = 16) -> tuple:
    """The subscription index over `scored_stream`'s subscriptions at their thresholds, with what
    the arrival kernel reads beside it: (index, theta, alpha, lam, wsum, rmax)."""
    theta, alpha = d["theta"].copy(), d["s_alpha"]
    lam = text_floors(theta, alpha)
    wsum, rmax = suffix_weights(d["s_off"], d["s_w"]), rest_max(d["s_off"], d["s_w"])
    index = subscription_blocks(d["s_x"], d["s_y"], d["s_off"], d["s_val"], d["s_w"], wsum, rmax, theta, lam, alpha,
                                n_terms, per_cell=per_cell, block=block)
    return index, theta, alpha, lam, wsum, rmax
