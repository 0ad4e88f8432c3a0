"""Expiries and re-evaluations: the kernels of the top-k worker's epoch that keep each buffer full.

An expiring message leaves the buffers whose oldest member it is (`expire`: the FIFO window
expires a buffer's members oldest first, so no other buffer holds it); a buffer left with fewer
than k members is marked for re-evaluation at the same seq, after the seq's arrival (Skype's Fig.
1: e5 arrives as e1 expires). A re-evaluation, and a new subscription's initialisation, refills a
buffer from the window (`rebuild`: the message index's search, then theta and the k-skyband as
skyband.py chooses them).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.families.topk.bounds import text_floor
from harness.families.topk.buffers import oldest, set_oldest, snap
from harness.families.topk.message_index import best_candidates
from harness.families.topk.skyband import CSKYBAND, DEPTH, KMAX, choose_theta, grown, rank_order, skyband


@njit(cache=True)
def rebuild(s, t, inclusive, k, mode, ratio, kmax, pair_cost, window, b_off, b_cap, b_len, b_old, o_head, o_next, o_prev, theta,
            lam, a_msg, a_score, a_dom, a_used, c_msg, c_score, m_seen, stamp, m_seq, m_exp, m_x, m_y, m_off, m_val, m_w,
            grid, scratch, s_x, s_y, s_alpha, s_off, s_val, s_w, max_dist):
    """Re-evaluate s against the window at t: theta_s and its buffer (skyband.py), from the message
    index's search (message_index.best_candidates). Returns the arena, the candidate scratch and the
    pairs scored."""
    cap = max(kmax, k)  # KMAX: the top-kmax, and the first message left out gives theta
    need, frac = (DEPTH * k, 1.0) if mode == CSKYBAND else ((cap + 1, 1.0) if mode == KMAX else (k, ratio))
    c_msg, c_score, n, target = best_candidates(s, t, inclusive, 0, need, frac, c_msg, c_score, m_seen, stamp, m_seq,
                                                m_exp, m_x, m_y, m_off, m_val, m_w, grid, scratch,
                                                s_x, s_y, s_alpha, s_off, s_val, s_w, max_dist)
    # the candidates at or above the target (every window message that scores as much is one), ranked
    order = rank_order(c_msg, c_score, n, m_seq, target)
    ranked = c_score[order]
    complete = len(order)
    if mode == KMAX:  # admit what ranks above the first message left out (0: nothing was)
        th = ranked[cap] if complete > cap else 0.0
    else:
        th = choose_theta(ranked[:complete], k, window, mode, ratio, n, target == -np.inf, pair_cost)
    theta[s] = th
    lam[s] = text_floor(th, s_alpha[s])
    if n > b_cap[s]:  # a new region at the arena's end
        need = a_used + n
        if need > len(a_msg):
            a_msg, a_score, a_dom = grown(a_msg, need), grown(a_score, need), grown(a_dom, need)
        b_off[s], b_cap[s] = a_used, n
        a_used = need
    o = b_off[s]
    if mode == KMAX:  # a rank prefix of the window: no dominance pruning
        b_len[s] = min(complete, cap)
        for u in range(b_len[s]):
            a_msg[o + u], a_score[o + u], a_dom[o + u] = c_msg[order[u]], ranked[u], 0
    else:
        b_len[s] = skyband(c_msg, c_score, order, th, k, m_seq, a_msg[o:o + b_cap[s]], a_score[o:o + b_cap[s]],
                           a_dom[o:o + b_cap[s]])
    set_oldest(s, oldest(a_msg, o, b_len[s]), b_old, o_head, o_next, o_prev)
    return a_msg, a_score, a_dom, a_used, c_msg, c_score, n


@njit(cache=True)
def expire(e, t, n_leave, leave, s_ins, s_del, s_k, theta, s_touch, s_redo, b_off, b_len, b_old, o_head, o_next,
           o_prev, a_msg, a_score, a_dom, touched, snap_off, snap_msg, snap_score, n_touch, redo, n_redo):
    """Message e leaves the buffers in leave[:n_leave] (those whose oldest member it is): a
    snapshot first when it was in the top-k, the subscription marked for re-evaluation when fewer
    than k remain. Arrays have room (`snap_room`; leave and redo hold every subscription)."""
    for v in range(n_leave):
        s = leave[v]
        if not (s_ins[s] < t < s_del[s]):
            continue
        o = b_off[s]
        for r in range(b_len[s]):
            if a_msg[o + r] == e:
                if s_touch[s] != t and r < s_k[s]:  # the top-k before t, for the diff (below rank k
                    s_touch[s] = t  # the top-k does not change)
                    n_touch = snap(s, min(s_k[s], b_len[s]), o, a_msg, a_score, touched, snap_off, snap_msg,
                                    snap_score, n_touch)
                for u in range(r, b_len[s] - 1):
                    a_msg[o + u] = a_msg[o + u + 1]
                    a_score[o + u] = a_score[o + u + 1]
                    a_dom[o + u] = a_dom[o + u + 1]
                b_len[s] -= 1
                set_oldest(s, oldest(a_msg, o, b_len[s]), b_old, o_head, o_next, o_prev)
                if b_len[s] < s_k[s] and theta[s] > 0.0 and s_redo[s] != t:
                    s_redo[s] = t
                    redo[n_redo] = s
                    n_redo += 1
                break
    return n_touch, n_redo
