"""The top-k worker's epoch in one compiled loop: events and expiries in seq order through the
subscriptions' buffers, and the thresholds the epoch ends with.

Each seq t runs four steps (index.py's module docstring has the semantics): (a) the expiries at t
leave the buffers whose oldest member they are (reevaluation.expire); (b) the event at t: an
object arrives (arrival.arrival_candidates, then arrival.enter_candidates), a subscription is
initialised against the window (reevaluation.rebuild), or a deletion empties its buffer; (c) the
buffers that fell below k are re-evaluated, the arrival at t included (reevaluation.rebuild); (d)
each touched subscription's top-k is diffed against its snapshot into change rows
(buffers.emit_changes).

The loop takes the epoch's state as named tuples (state.py) and unpacks them once; it calls the
kernels of each step with the arrays themselves. A step run as a kernel of its own, or a kernel
taking the tuples, passes every array of them on each call (numba hands a tuple argument over as
one argument per array, and counts a reference to each): on every seq that made the small top-k
epochs measurably slower (ADR-0078).

Numba's cache checks a kernel's own module only: the loop's cached code keeps the kernels it calls
from other modules (scoring.pair_score through arrival.py and message_index.py, say) as they were
compiled. A change to one of them edits this module too (and the modules between), so that a
checkout holding the old cache compiles the loop again.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.kernels import monotonic_ns
from harness.families.base import NEVER
from harness.families.topk.arrival import CIQ, IGPT, IPT, arrival_candidates, enter_candidates, post_overflow
from harness.families.topk.buffers import emit_changes, oldest_lists, room_for, set_oldest, snap_growing, snap_room
from harness.families.topk.ciq import ciq_candidates
from harness.families.topk.message_index import best_candidates
from harness.families.topk.reevaluation import expire, rebuild
from harness.families.topk.skyband import grown
from harness.families.topk.state import Arena, Changes


@njit(cache=True)
def epoch_scratch(m_off, n_sub, lam, n_terms):
    """The loop's work space, allocated once per epoch: the change rows; per subscription the stamp
    of the last message that met it, the last seq its top-k was snapshotted and the last it was
    marked for re-evaluation; per message its search stamp and its diff mark; the snapshots; the
    seq's re-evaluations; a search's candidates; an arrival's candidates (a subscription is one at
    most once per message, so n_sub bounds them: growing them in the loop made numba count
    references on every pass of it); the theta (as a text floor) each subscription's postings are
    sorted by; the overflow lists (term -> entries); the arriving message's Eq. 5 bounds per term
    position; which subscriptions are in the overflow; the buffers an expiry leaves."""
    n_msg = len(m_off) - 1
    longest = 0
    for m in range(n_msg):
        longest = max(longest, m_off[m + 1] - m_off[m])
    return (np.empty(1024, np.int64), np.empty(1024, np.int64), np.empty(1024, np.int64), np.empty(1024, np.float64),
            np.empty(1024, np.int8), np.full(n_sub, -1, np.int64), np.full(n_sub, -1, np.int64),
            np.full(n_sub, -1, np.int64), np.full(n_msg, -1, np.int64), np.full(n_msg, -1, np.int64),
            np.empty(16, np.int64), np.zeros(17, np.int64), np.empty(64, np.int64), np.empty(64, np.float64),
            np.empty(n_sub, np.int64), np.empty(64, np.int64), np.empty(64, np.float64), np.empty(n_sub, np.int64),
            lam.copy(), np.full(n_terms, -1, np.int64), np.empty(16, np.int64), np.empty(16, np.int64),
            np.empty(16, np.int64), np.empty(longest + 1), np.empty(longest + 1), np.zeros(n_sub, np.bool_),
            np.empty(n_sub, np.int64))


@njit(cache=True)
def run_events(stream, window0, win, grid, scratch, subs, sub_index, ciq, bufs, arena, a_used, policy, work):
    """The epoch's events and expiries (`stream`) in seq order through the subscriptions' buffers,
    `window0` messages in the window as it starts (module docstring). Returns the change rows
    (state.Changes) and their count, the arena and its use, the re-evaluations, the pairs scored,
    offered and pruned, the blocks skipped, and the nanoseconds spent on arrivals and on expiries
    with their re-evaluations (Skype's AMP and EMP, summed); adds each event's work to `work`.
    An arrival finds its candidates as `policy.method` says: IGPT and IPT in the subscription
    blocks (`sub_index`, arrival.py), CIQ in its inverted files (`ciq`, ciq.py)."""
    ev_seq, ev_kind, ev_ref, exp_seq, exp_msg = stream
    m_seq, m_exp, m_x, m_y, m_off, m_val, m_w = win
    s_ins, s_del, s_x, s_y, s_k, s_alpha, s_off, s_val, s_w, s_wsum, s_rmax = subs
    b_off, b_cap, b_len, b_old, theta, lam = bufs
    a_msg, a_score, a_dom = arena
    mode, ratio, kmax, pair_cost, max_dist, method = policy
    n_ev, n_exp = len(ev_seq), len(exp_seq)
    n_sub, n_msg = len(s_k), len(m_seq)
    (o_slot, o_trig, o_msg, o_score, o_delta, s_seen, s_touch, s_redo, m_seen, m_mark, touched, snap_off, snap_msg,
     snap_score, redo, c_msg, c_score, cand, posted, ov_head, ov_next, ov_sub, ov_j, m_rmax, m_rsum, in_ov,
     leave) = epoch_scratch(m_off, n_sub, lam, len(sub_index[0]) - 1)
    n_out = mark = stamp = n_ov = 0
    o_head, o_next, o_prev = oldest_lists(b_old, n_msg)
    reevals = scored_total = pruned = skipped = offered = 0
    live = window0  # messages in the worker's window
    # a warm-up fills the window before the subscriptions register: those arrivals skip the calls
    # below (about 8 us each with nothing to meet, 8 s for a window of 1M)
    first_ins = s_ins.min() if n_sub else NEVER
    clock = np.zeros(2, np.int64)
    t0 = arrival_ns = expiry_ns = 0
    i, j = 0, 0
    while i < n_ev or j < n_exp:
        t = ev_seq[i] if i < n_ev else NEVER
        if j < n_exp and exp_seq[j] < t:
            t = exp_seq[j]
        at = i if i < n_ev else n_ev - 1  # the event the work is charged to
        scored = 0
        n_touch = 0
        n_redo = 0
        # (a) expiries at t leave the buffers; a top-k member's leaving changes the top-k
        expiring = j < n_exp and exp_seq[j] == t
        if expiring:
            t0 = monotonic_ns(clock)
        while j < n_exp and exp_seq[j] == t:
            e = exp_msg[j]
            j += 1
            live -= 1
            n_leave = 0  # the buffers whose oldest member e is (their lists change as they leave)
            s = o_head[e]
            while s >= 0:
                leave[n_leave] = s
                n_leave += 1
                s = o_next[s]
            touched, snap_off, snap_msg, snap_score = snap_room(n_leave, leave, s_k, touched, snap_off, snap_msg,
                                                                snap_score, n_touch)
            n_touch, n_redo = expire(e, t, n_leave, leave, s_ins, s_del, s_k, theta, s_touch, s_redo, b_off, b_len,
                                     b_old, o_head, o_next, o_prev, a_msg, a_score, a_dom, touched, snap_off,
                                     snap_msg, snap_score, n_touch, redo, n_redo)
        if expiring:
            expiry_ns += monotonic_ns(clock) - t0
        # (b) the event at t
        if i < n_ev and ev_seq[i] == t:
            kind = ev_kind[i]
            ref = ev_ref[i]
            if kind == 0 and t <= first_ins:  # an object before any subscription registered: none to meet
                live += 1
            elif kind == 0:  # an object: into the buffers of the subscriptions indexed under its terms
                t0 = monotonic_ns(clock)
                m = ref
                live += 1
                stamp += 1
                if method == CIQ:
                    n_cand, n_pruned = ciq_candidates(m, t, m_off, m_val, m_w, m_x, m_y, ciq, theta, s_redo, s_ins,
                                                      s_del, s_alpha, cand)
                    n_skipped = 0
                else:
                    n_cand, n_pruned, n_skipped = arrival_candidates(
                        m, t, stamp, m_off, m_val, m_w, m_x, m_y, m_rmax, m_rsum, sub_index, ov_head, ov_next, ov_sub,
                        ov_j, s_w, s_wsum, s_rmax, s_seen, lam, theta, s_redo, s_ins, s_del, s_x, s_y, s_alpha,
                        max_dist, cand, method != IPT)
                pruned += n_pruned
                skipped += n_skipped
                a_msg, a_score, a_dom, touched, snap_off, snap_msg, snap_score = room_for(
                    n_cand, cand, s_k, b_cap, b_len, a_msg, a_score, a_dom, a_used, touched, snap_off, snap_msg,
                    snap_score, n_touch)
                a_used, n_touch, n_sc = enter_candidates(
                    m, t, n_cand, cand, mode, kmax, m_seq, m_x, m_y, m_off, m_val, m_w, s_x, s_y, s_alpha, s_k, s_off,
                    s_val, s_w, theta, lam, s_touch, b_off, b_cap, b_len, b_old, o_head, o_next, o_prev, a_msg, a_score,
                    a_dom, a_used, touched, snap_off, snap_msg, snap_score, n_touch, max_dist)
                scored += n_sc
                offered += n_sc
                arrival_ns += monotonic_ns(clock) - t0
            elif kind == 1 or kind == 3:  # an insertion (3: a replica the route gained): from the window
                s = ref
                stamp += 1
                reevals += 1
                s_touch[s] = t  # nothing before
                touched, snap_off, snap_msg, snap_score, n_touch = snap_growing(
                    s, 0, 0, a_msg, a_score, touched, snap_off, snap_msg, snap_score, n_touch)
                a_msg, a_score, a_dom, a_used, c_msg, c_score, n_c = rebuild(
                    s, t, kind == 3, s_k[s], mode, ratio, kmax, pair_cost, live, b_off, b_cap, b_len, b_old, o_head, o_next, o_prev,
                    theta, lam, a_msg,
                    a_score, a_dom, a_used, c_msg, c_score, m_seen, stamp, m_seq, m_exp, m_x, m_y, m_off, m_val, m_w,
                    grid, scratch, s_x, s_y, s_alpha, s_off, s_val, s_w, max_dist)
                scored += n_c
                if method == IGPT and lam[s] < posted[s] and not in_ov[s]:  # IPT, CIQ: theta read live
                    in_ov[s] = True
                    ov_head, ov_next, ov_sub, ov_j, n_ov = post_overflow(s, s_off, s_val, ov_head, ov_next, ov_sub, ov_j,
                                                                    n_ov)
            else:  # a deletion: its replicas go quietly (the merger drops the query at its delete)
                b_len[ref] = 0
                set_oldest(ref, -1, b_old, o_head, o_next, o_prev)
            i += 1
        # (c) re-evaluate the buffers that fell below k, the arrival at t included (expiry time)
        if n_redo:
            t0 = monotonic_ns(clock)
        for d in range(n_redo):
            s = redo[d]
            stamp += 1
            reevals += 1
            a_msg, a_score, a_dom, a_used, c_msg, c_score, n_c = rebuild(
                s, t, True, s_k[s], mode, ratio, kmax, pair_cost, live, b_off, b_cap, b_len, b_old, o_head, o_next, o_prev, theta, lam,
                a_msg, a_score,
                a_dom, a_used, c_msg, c_score, m_seen, stamp, m_seq, m_exp, m_x, m_y, m_off, m_val, m_w, grid,
                scratch, s_x, s_y, s_alpha, s_off, s_val, s_w, max_dist)
            scored += n_c
            if method == IGPT and lam[s] < posted[s] and not in_ov[s]:  # IPT, CIQ: theta read live
                in_ov[s] = True
                ov_head, ov_next, ov_sub, ov_j, n_ov = post_overflow(s, s_off, s_val, ov_head, ov_next, ov_sub, ov_j, n_ov)
        if n_redo:
            expiry_ns += monotonic_ns(clock) - t0
        # (d) each touched subscription's top-k against its snapshot: who left, who entered
        if n_touch:
            need = n_out
            for u in range(n_touch):
                need += snap_off[u + 1] - snap_off[u] + min(s_k[touched[u]], b_len[touched[u]])
            if need > len(o_slot):
                o_slot, o_trig, o_msg = grown(o_slot, need), grown(o_trig, need), grown(o_msg, need)
                o_score, o_delta = grown(o_score, need), grown(o_delta, need)
            n_out, mark = emit_changes(t, n_touch, touched, snap_off, snap_msg, snap_score, s_k, b_off, b_len, a_msg,
                                       a_score, m_mark, mark, o_slot, o_trig, o_msg, o_score, o_delta, n_out)
        if at >= 0:
            work[at] += 1 + scored
        scored_total += scored
    return (Changes(o_slot, o_trig, o_msg, o_score, o_delta), n_out, Arena(a_msg, a_score, a_dom), a_used, reevals,
            scored_total, offered, pruned, skipped, arrival_ns, expiry_ns)


@njit(cache=True)
def thresholds(slots, t, horizon, win, grid, scratch, subs, bufs, arena, max_dist):
    """Per subscription slot: the k-th best score among the window messages at t (the epoch's last
    seq) sharing a keyword with it that stay until `horizon` (0 when fewer than k), and the pairs
    scored. The buffer holds the k best of them whenever it holds k of them (the survivors are the
    newest messages, so a survivor's dominators survive too); otherwise the window is searched."""
    m_seq, m_exp, m_x, m_y, m_off, m_val, m_w = win
    _, _, s_x, s_y, s_k, s_alpha, s_off, s_val, s_w, _, _ = subs
    b_off, b_len, a_msg, a_score = bufs.off, bufs.size, arena.msg, arena.score
    m_seen = np.full(len(m_seq), -1, np.int64)
    c_msg = np.empty(64, np.int64)
    c_score = np.empty(64, np.float64)
    out = np.zeros(len(slots))
    scored = 0
    for i in range(len(slots)):
        s = slots[i]
        k = s_k[s]
        if k < 1:
            continue
        found = 0
        for r in range(b_len[s]):
            if m_exp[a_msg[b_off[s] + r]] >= horizon:
                found += 1
                if found == k:
                    out[i] = a_score[b_off[s] + r]
                    break
        if found == k:
            continue
        c_msg, c_score, n, target = best_candidates(s, t, True, horizon, k, 1.0, c_msg, c_score, m_seen, i, m_seq,
                                                    m_exp, m_x, m_y, m_off, m_val, m_w, grid, scratch,
                                                    s_x, s_y, s_alpha, s_off, s_val, s_w, max_dist)
        scored += n
        if n >= k:
            out[i] = np.sort(c_score[:n])[n - k]
    return out, scored


