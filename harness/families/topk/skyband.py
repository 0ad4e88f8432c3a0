"""Skype's result buffer (Sec. 6): a partial k-skyband per subscription, and its re-evaluation.

A message m' dominates m (Def. 10) when it ranks at least as well (Score >= Score(m)) and is newer.
A message dominated by k others can never be in the top-k again: those k outlive it (the window is
FIFO) and outrank it. The buffer of s holds every window message with Score >= theta_s that fewer
than k messages dominate, in rank order (score desc, seq desc); its first k are the top-k as long
as it holds at least k (Theorem 6.1: then kScore >= theta_s, so every top-k member is in it).
- An arrival below theta_s changes nothing (it dominates no member). Otherwise it dominates every
  member ranked after it: their counters rise, those reaching k leave; it enters with counter 0.
- An expiry leaves the buffer and dominates nothing alive (it is the oldest). A buffer left with
  fewer than k members (and theta_s > 0) is re-evaluated against the window (Algorithm 2).
- Re-evaluation finds the window's best messages sharing a keyword in the message index
  (message_index.py, `best_candidates`), picks theta_s and keeps the k-skyband of the messages at
  or above it.
  `mode` picks theta_s:
  CSKYBAND (Skype's cSkyband): the j-th best score minimising Eq. 13, C = C_sm + C_re, over
  j = k..n: prob = j / |W| (the share of the worker's window at or above theta), Eq. 9 C_sm =
  prob k ln(|W| prob / k), Eq. 12 Z' = 2 (A - k + 1) A / prob + (A - k + 1)(A - k + 2) / prob with
  A = prob |W| = j, C_re = C_topk / Z' with C_topk the candidates this re-evaluation scored times
  `pair_cost` (index.topk.pair_cost, default PAIR_COST), in buffer operations (Skype estimates it by the average of earlier ones, in time; A20 leaves the optimiser open: here every j up to
  DEPTH x k is tried, exact over those and cheap once the scores are sorted; the search stops
  once nothing unseen can reach the DEPTH x k-th best);
  RATIO: theta_s = ratio x kScore (Skype's Skyband baseline with 0.95; 1.0 keeps only the top-k,
  which re-evaluates at every expiry of a member).
  KMAX (Yi et al., Skype's Kmax baseline, kmax = 60): no dominance pruning; the buffer is the
  top-k' of the window, k <= k' <= kmax: a re-evaluation takes the top kmax and theta_s = the score
  of the first message left out (0 when none was), an arrival at or above theta_s enters, and past
  kmax the last member leaves and its score becomes theta_s (a later arrival with that score is
  newer, so it ranks above the one that left: the comparison stays inclusive). Expiries shrink k';
  below k the buffer is re-evaluated.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


CSKYBAND, RATIO, KMAX = 0, 1, 2
DEPTH = 3  # cSkyband considers thresholds down to the (DEPTH x k)-th best score
# Eq. 13 adds buffer operations (C_sm) to re-evaluation cost (C_re); Skype prices both in time. A
# re-evaluation here is counted in pairs scored, and one pair costs about as much as this many
# buffer operations. Calibrated by measurement (ADR-0049):
# 30 (from ~0.7 us a pair against ~25 ns a buffer visit) under-priced a re-evaluation, which also
# pays the message index's per-cell work; dskype_hash and dskype_keyword on synthetic ran their
# least busy time from 75 to 300 (flat) and 30 clearly worse, with 3-9x fewer re-evaluations. The
# default of `index.topk.pair_cost`, which the ablation sweeps (conf/experiment/skype_pair_cost.yaml)
PAIR_COST = 150.0


@njit(cache=True, inline="always")
def better(score_a, seq_a, score_b, seq_b):
    return score_a > score_b or (score_a == score_b and seq_a > seq_b)


@njit(cache=True)
def grown(a, need):
    b = np.empty(max(2 * len(a), need, 16), a.dtype)
    b[: len(a)] = a
    return b


@njit(cache=True)
def rank_order(c_msg, c_score, n, m_seq, floor=-np.inf):
    """Positions of those of c_*[:n] scoring at least floor, in rank order (score desc, seq desc).
    Only those: a re-evaluation reads no further, and ranking all it scored was a quarter of a
    registration at |W| = 1M (about 2,000 scored, 60-100 kept)."""
    keep = np.empty(n, np.int64)
    n_keep = 0
    for i in range(n):
        if c_score[i] >= floor:
            keep[n_keep] = i
            n_keep += 1
    keep = keep[:n_keep]
    keep = keep[np.argsort(-m_seq[c_msg[keep]], kind="mergesort")]
    return keep[np.argsort(-c_score[keep], kind="mergesort")]


@njit(cache=True)
def choose_theta(sorted_scores, k, window, mode, ratio, scored, every, pair_cost=PAIR_COST):
    """theta_s for a re-evaluation (module docstring); sorted_scores best first, `scored` the pairs
    the re-evaluation scored, each priced `pair_cost` buffer operations; `every`: they are all the candidates (else only those down to the
    search's target, at least k), so that k or fewer of them mean theta 0 keeps everything."""
    n = len(sorted_scores)
    if every and n <= k:
        return 0.0
    if mode == RATIO:
        return ratio * sorted_scores[k - 1]
    w = max(window, n)
    c_topk = pair_cost * scored
    best, best_j = np.inf, k
    for j in range(k, n + 1):
        prob = j / w
        c_sm = prob * k * math.log(max(j / k, 1.0))
        a = float(j)
        z = (2.0 * (a - k + 1.0) * a + (a - k + 1.0) * (a - k + 2.0)) / prob
        cost = c_sm + c_topk / z
        if cost < best:
            best, best_j = cost, j
    return sorted_scores[best_j - 1]


@njit(cache=True)
def skyband(c_msg, c_score, order, theta, k, m_seq, out_msg, out_score, out_dom):
    """The k-skyband of the candidates at or above theta, in rank order, into out_*; returns its
    size. Counters: how many newer candidates rank at or above each (its dominators)."""
    n_keep = 0
    for i in range(len(order)):
        if c_score[order[i]] < theta:
            break
        n_keep += 1
    keep = order[:n_keep]
    newest = np.argsort(-m_seq[c_msg[keep]], kind="mergesort")
    seen = np.empty(n_keep)  # scores of the newer ones, descending
    n_seen = 0
    dom = np.empty(n_keep, np.int64)
    for i in newest:
        sc = c_score[keep[i]]
        lo, hi = 0, n_seen  # how many seen scores are >= sc
        while lo < hi:
            mid = (lo + hi) // 2
            if seen[mid] >= sc:
                lo = mid + 1
            else:
                hi = mid
        dom[i] = lo
        for r in range(n_seen, lo, -1):
            seen[r] = seen[r - 1]
        seen[lo] = sc
        n_seen += 1
    size = 0
    for i in range(n_keep):  # rank order kept
        if dom[i] < k:
            out_msg[size] = c_msg[keep[i]]
            out_score[size] = c_score[keep[i]]
            out_dom[size] = dom[i]
            size += 1
    return size
