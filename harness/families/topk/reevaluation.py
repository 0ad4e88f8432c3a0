"""Expiries and re-evaluations: the phases of the top-k worker's epoch that keep each buffer full.

An expiring message leaves the buffers whose oldest member it is (`expire_seq`: the FIFO window
expires a buffer's members oldest first, so no other buffer holds it); a buffer left with fewer
than k members is marked for re-evaluation at the same seq, after the seq's arrival (Skype's Fig.
1: e5 arrives as e1 expires). A re-evaluation, and a new subscription's initialisation, refills a
buffer from the window (`rebuild`: the message index's search, then theta and the k-skyband as
skyband.py chooses them); a subscription whose theta fell below the one its postings were sorted
by is read from the overflow lists from then on (`refill`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.families.topk.arrival import post_overflow
from harness.families.topk.bounds import text_floor
from harness.families.topk.buffers import oldest, set_oldest, snap, snap_room
from harness.families.topk.message_index import best_candidates
from harness.families.topk.skyband import CSKYBAND, DEPTH, KMAX, choose_theta, grown, rank_order, skyband
from harness.families.topk.state import Arena, Scored


@njit(cache=True)
def rebuild(s, t, inclusive, live, stamp, ep, arena, a_used, found):
    """Re-evaluate s against the window at t (`live` messages in it): theta_s and its buffer
    (skyband.py), searched through the message index with stamp `stamp`. Returns the arena, its
    use, the search's scratch and the pairs it scored."""
    win, subs, bufs, policy = ep.win, ep.subs, ep.bufs, ep.policy
    m_seq = win.seq
    b_off, b_cap, b_len, b_old, theta, lam = bufs
    a_msg, a_score, a_dom = arena
    mode, ratio, kmax = policy.mode, policy.ratio, policy.kmax
    k = subs.k[s]
    cap = max(kmax, k)  # KMAX: the top-kmax, and the first message left out gives theta
    need, frac = (DEPTH * k, 1.0) if mode == CSKYBAND else ((cap + 1, 1.0) if mode == KMAX else (k, ratio))
    c_msg, c_score, n, target = best_candidates(s, t, inclusive, 0, need, frac, found.msg, found.score, ep.marks.m_seen,
                                                stamp, m_seq, win.exp, win.x, win.y, win.off, win.val, win.w, ep.grid,
                                                ep.scratch, subs.x, subs.y, subs.alpha, subs.off, subs.val, subs.w,
                                                policy.max_dist)
    # the candidates at or above the target (every window message that scores as much is one), ranked
    order = rank_order(c_msg, c_score, n, m_seq, target)
    ranked = c_score[order]
    complete = len(order)
    if mode == KMAX:  # admit what ranks above the first message left out (0: nothing was)
        th = ranked[cap] if complete > cap else 0.0
    else:
        th = choose_theta(ranked[:complete], k, live, mode, ratio, n, target == -np.inf, policy.pair_cost)
    theta[s] = th
    lam[s] = text_floor(th, subs.alpha[s])
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
    set_oldest(s, oldest(a_msg, o, b_len[s]), b_old, ep.lists)
    return Arena(a_msg, a_score, a_dom), a_used, Scored(c_msg, c_score), n


@njit(cache=True)
def refill(s, t, inclusive, live, stamp, ep, arena, a_used, found, overflow, n_ov):
    """`rebuild`, then s into the overflow lists if its theta fell below the one its postings were
    sorted by. Returns the arena, its use, the search's scratch, the pairs scored and the overflow
    lists with their use."""
    arena, a_used, found, n = rebuild(s, t, inclusive, live, stamp, ep, arena, a_used, found)
    marks = ep.marks
    if ep.bufs.lam[s] < marks.posted[s] and not marks.in_ov[s]:
        marks.in_ov[s] = True
        overflow, n_ov = post_overflow(s, ep.subs, overflow, n_ov)
    return arena, a_used, found, n, overflow, n_ov


@njit(cache=True)
def expire(e, t, n_leave, subs, bufs, lists, arena, snaps, n_touch, marks, n_redo):
    """Message e leaves the buffers in marks.leave[:n_leave] (those whose oldest member it is): a
    snapshot first when it was in the top-k, the subscription marked for re-evaluation when fewer
    than k remain. Arrays have room (`snap_room`; leave and redo hold every subscription)."""
    leave, s_touch, s_redo, redo = marks.leave, marks.s_touch, marks.s_redo, marks.redo
    s_ins, s_del, s_k = subs.ins, subs.dele, subs.k
    b_off, b_len, b_old, theta = bufs.off, bufs.size, bufs.old, bufs.theta
    a_msg, a_score, a_dom = arena
    for v in range(n_leave):
        s = leave[v]
        if not (s_ins[s] < t < s_del[s]):
            continue
        o = b_off[s]
        for r in range(b_len[s]):
            if a_msg[o + r] == e:
                if s_touch[s] != t and r < s_k[s]:  # the top-k before t, for the diff (below rank k
                    s_touch[s] = t  # the top-k does not change)
                    n_touch = snap(s, min(s_k[s], b_len[s]), o, arena, snaps, n_touch)
                for u in range(r, b_len[s] - 1):
                    a_msg[o + u] = a_msg[o + u + 1]
                    a_score[o + u] = a_score[o + u + 1]
                    a_dom[o + u] = a_dom[o + u + 1]
                b_len[s] -= 1
                set_oldest(s, oldest(a_msg, o, b_len[s]), b_old, lists)
                if b_len[s] < s_k[s] and theta[s] > 0.0 and s_redo[s] != t:
                    s_redo[s] = t
                    redo[n_redo] = s
                    n_redo += 1
                break
    return n_touch, n_redo


@njit(cache=True)
def expire_seq(t, j, stream, ep, arena, snaps, n_touch):
    """The expiries at seq t, from stream.exp_*[j] on: each expiring message leaves the buffers whose
    oldest member it is (their lists change as it leaves them, so they are collected first). Returns
    the next expiry, the snapshots and their count, and the subscriptions marked for re-evaluation
    (in marks.redo)."""
    exp_seq, exp_msg = stream.exp_seq, stream.exp_msg
    head, nxt = ep.lists.head, ep.lists.nxt
    leave = ep.marks.leave
    n_redo = 0
    while j < len(exp_seq) and exp_seq[j] == t:
        e = exp_msg[j]
        j += 1
        n_leave = 0
        s = head[e]
        while s >= 0:
            leave[n_leave] = s
            n_leave += 1
            s = nxt[s]
        snaps = snap_room(n_leave, leave, ep.subs.k, snaps, n_touch)
        n_touch, n_redo = expire(e, t, n_leave, ep.subs, ep.bufs, ep.lists, arena, snaps, n_touch, ep.marks, n_redo)
    return j, snaps, n_touch, n_redo
