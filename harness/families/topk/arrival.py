"""An arriving message meets the subscriptions it can enter (Skype Sec. 5): the arrival phase of
the top-k worker's epoch.

The message reads each of its terms' subscription blocks (subscription_index.py), rarest term
first, so a subscription is met first at its rarest common keyword, where its text bound is
loosest: a block whose cell, alphas and largest weights cannot reach its smallest theta is skipped
whole (Thm 5.3); the others are read, sorted by the message weight a subscription needs through
that term (Thm 5.1 as a sort key, Thm 5.4's early stop), only as far as the message's largest
weight from that term on reaches (Def. 5's refined prefix); each subscription read is bounded by
the common keyword's product plus Eq. 5 over the rest (Thm 5.2) and by its exact spatial
similarity (`arrival_candidates`). The message is then scored against each candidate and entered
into the buffers it reaches (`enter_candidates`).

The two loops never reallocate: the arena and the snapshots are grown once beforehand for every
candidate's worst case (`buffers.room_for`), since a reallocation in a loop makes numba count
references on every pass of it.
"""

from __future__ import annotations

import math

from numba import njit

from harness.core.kernels import upper_bound
from harness.families.base import NEVER
from harness.families.topk.bounds import MARGIN, text_bound, text_floor
from harness.families.topk.buffers import oldest, set_oldest, snap
from harness.families.topk.message_index import cell_reach
from harness.families.topk.scoring import pair_score
from harness.families.topk.skyband import KMAX, better, grown

SEEN, PRUNED, CANDIDATE = 0, 1, 2

# how an arrival finds the subscriptions it may enter (`index.topk.method`, skype.txt l.729-737):
# igpt = Skype's individual and group pruning (this module); ipt = its individual pruning only
# (`arrival_candidates(group=False)`, l.761); ciq = Chen et al.'s index, Skype's baseline (ciq.py, l.731)
IGPT, IPT, CIQ = 0, 1, 2
METHODS = {"igpt": IGPT, "ipt": IPT, "ciq": CIQ}


@njit(cache=True, inline="always")
def consider(s, stamp, t, s_wt, m_wt, s_rest_sum, s_rest_max, m_rest_sum, m_rest_max, alpha, dx, dy, s_seen, lam,
             theta, s_redo, s_ins, s_del, max_dist):
    """Subscription s met by the message at t through a keyword with weights s_wt, m_wt (an overflow
    entry; arrival_candidates writes the same checks out for the block entries): SEEN
    (met already through a rarer keyword, or not live, or due for re-evaluation at t), PRUNED (Thm
    5.1 / 5.2's text floor, then the exact spatial similarity, at offset dx, dy, with that text
    bound: a skip is certain, the margin dwarfs rounding) or CANDIDATE."""
    if s_seen[s] == stamp:
        return SEEN
    s_seen[s] = stamp
    tub = text_bound(s_wt, m_wt, s_rest_sum, s_rest_max, m_rest_sum, m_rest_max)
    if tub < lam[s] or alpha * (1.0 - math.sqrt(dx * dx + dy * dy) / max_dist) + (1.0 - alpha) * min(
            tub, 1.0) < theta[s] - MARGIN:
        return PRUNED
    if s_redo[s] == t or not (s_ins[s] < t < s_del[s]):
        return SEEN
    return CANDIDATE


@njit(cache=True)
def arrival_candidates(m, t, stamp, m_off, m_val, m_w, m_x, m_y, m_rmax, m_rsum, sub_index, ov_head, ov_next, ov_sub,
                       ov_j, s_w, s_wsum, s_rmax, s_seen, lam, theta, s_redo, s_ins, s_del, s_x, s_y, s_alpha,
                       max_dist, cand, group=True):
    """The live subscriptions message m may enter at t, into cand; returns their count, the pairs
    pruned one by one and the blocks skipped whole. Terms rarest first, so a subscription is met
    first at its rarest common keyword, where its text bound is loosest. Per block of the term
    (subscription_index.py): skipped whole when its cell's spatial bound and its largest weights
    cannot reach its smallest theta (Thm 5.3), else read up to the message's largest weight from
    this term on (Def. 5). The overflow holds those whose theta fell below the one they were posted
    with. Each one read: Thm 5.2's text bound (`text_bound`), then the exact spatial similarity
    with it (a skip is certain: the margin dwarfs rounding). Kept apart from run_events, whose
    growing arrays would otherwise make numba count references in this loop.

    group=False is Skype's IPT (skype.txt l.761: "IPT, which only employs individual pruning
    technique"): no block is skipped whole (Thm 5.3) and every block is read to its end (no early
    termination, Thm 5.4, nor the refined prefix's cut of the sorted block), each subscription
    checked on its own with the same individual bounds against its current theta (so the overflow
    lists are not needed)."""
    (blk_off, blk_cell, blk_start, blk_theta, blk_alo, blk_ahi, blk_w, blk_rsum, blk_rmax, geometry, e_sub, e_w,
     e_rsum, e_rmax, e_key, e_x, e_y, e_alpha) = sub_index
    lo_m, n_mt = m_off[m], m_off[m + 1] - m_off[m]
    mx, my = m_x[m], m_y[m]
    m_rmax[0], m_rsum[0] = 0.0, 0.0  # [u]: over the message's u most frequent terms
    for u in range(n_mt):
        m_rmax[u + 1] = max(m_rmax[u], m_w[lo_m + u])
        m_rsum[u + 1] = m_rsum[u] + m_w[lo_m + u]
    n_cand = 0
    pruned = 0
    skipped = 0
    for q in range(m_off[m + 1] - 1, lo_m - 1, -1):
        term = m_val[q]
        u = q - lo_m
        mw = m_w[q]
        for b in range(blk_off[term], blk_off[term + 1]):
            hi_p = blk_start[b + 1]
            if group:
                reach_s = cell_reach(blk_cell[b], geometry, mx, my, max_dist)
                reach_t = min(1.0, text_bound(blk_w[b], mw, blk_rsum[b], blk_rmax[b], m_rsum[u], m_rmax[u]))
                a_lo, a_hi = blk_alo[b], blk_ahi[b]
                if max(a_lo * reach_s + (1.0 - a_lo) * reach_t, a_hi * reach_s + (1.0 - a_hi) * reach_t) \
                        < blk_theta[b] - MARGIN:
                    skipped += 1
                    continue
                hi_p = upper_bound(e_key, blk_start[b], hi_p, m_rmax[u + 1])
            # the entry's own columns in sequence, the few dynamic ones by s; `consider`'s checks written
            # out, since through the helper (inlined) this loop took half as long again at 156k subscriptions
            for p in range(blk_start[b], hi_p):
                s = e_sub[p]
                if s_seen[s] == stamp:
                    continue
                s_seen[s] = stamp
                tub = text_bound(e_w[p], mw, e_rsum[p], e_rmax[p], m_rsum[u], m_rmax[u])
                if tub < lam[s]:
                    pruned += 1
                    continue
                dx = mx - e_x[p]
                dy = my - e_y[p]
                a = e_alpha[p]
                if a * (1.0 - math.sqrt(dx * dx + dy * dy) / max_dist) + (1.0 - a) * min(tub, 1.0) < theta[s] - MARGIN:
                    pruned += 1
                    continue
                if s_redo[s] == t or not (s_ins[s] < t < s_del[s]):
                    continue
                cand[n_cand] = s
                n_cand += 1
        e = ov_head[term] if group else -1
        while e >= 0:
            s, jj = ov_sub[e], ov_j[e]
            e = ov_next[e]
            verdict = consider(s, stamp, t, s_w[jj], mw, s_wsum[jj] - s_w[jj], s_rmax[jj], m_rsum[u], m_rmax[u],
                               s_alpha[s], mx - s_x[s], my - s_y[s], s_seen, lam, theta, s_redo, s_ins, s_del, max_dist)
            pruned += verdict == PRUNED
            if verdict == CANDIDATE:
                cand[n_cand] = s
                n_cand += 1
    return n_cand, pruned, skipped


@njit(cache=True)
def enter_candidates(m, t, n_cand, cand, mode, kmax, m_seq, m_x, m_y, m_off, m_val, m_w, s_x, s_y, s_alpha, s_k,
                     s_off, s_val, s_w, theta, lam, s_touch, b_off, b_cap, b_len, b_old, o_head, o_next, o_prev,
                     a_msg, a_score, a_dom, a_used, touched, snap_off, snap_msg, snap_score, n_touch, max_dist):
    """Message m scored against each candidate (scoring.pair_score) and entered into the buffers it
    reaches (module docstring); returns the arena's use, the snapshots taken and the pairs scored. The arena and
    the snapshot arrays already have room for every candidate's worst case (`room_for`), so nothing
    here reallocates: a reallocation in this loop made numba count references on every pass."""
    scored = 0
    for c in range(n_cand):
        s = cand[c]
        sc = pair_score(s_x[s], s_y[s], s_alpha[s], s_val, s_w, s_off[s], s_off[s + 1],
                        m_x[m], m_y[m], m_val, m_w, m_off[m], m_off[m + 1], max_dist)
        scored += 1
        k = s_k[s]
        if k < 1 or sc < theta[s]:
            continue
        o = b_off[s]
        pos = b_len[s]
        while pos > 0 and better(sc, m_seq[m], a_score[o + pos - 1], m_seq[a_msg[o + pos - 1]]):
            pos -= 1
        if pos >= k and s_touch[s] != t:  # below the top-k: no snapshot needed
            pass
        elif s_touch[s] != t:
            s_touch[s] = t
            n_touch = snap(s, min(k, b_len[s]), o, a_msg, a_score, touched, snap_off, snap_msg, snap_score, n_touch)
        # the members ranked after it gain a dominator; those reaching k leave (KMAX: none)
        w = pos
        lost_oldest = False
        limit = k if mode != KMAX else NEVER
        for u in range(pos, b_len[s]):
            d = a_dom[o + u] + 1
            if d < limit:
                a_msg[o + w], a_score[o + w], a_dom[o + w] = a_msg[o + u], a_score[o + u], d
                w += 1
            elif a_msg[o + u] == b_old[s]:
                lost_oldest = True
        n_new = w + 1
        if n_new > b_cap[s]:  # to a larger region at the arena's end
            cap = max(2 * b_cap[s], n_new, 2 * k)
            for u in range(w):
                a_msg[a_used + u], a_score[a_used + u] = a_msg[o + u], a_score[o + u]
                a_dom[a_used + u] = a_dom[o + u]
            b_off[s], b_cap[s] = a_used, cap
            a_used += cap
            o = b_off[s]
        for u in range(w, pos, -1):
            a_msg[o + u], a_score[o + u], a_dom[o + u] = a_msg[o + u - 1], a_score[o + u - 1], \
                a_dom[o + u - 1]
        a_msg[o + pos], a_score[o + pos], a_dom[o + pos] = m, sc, 0
        if mode == KMAX and n_new > max(kmax, k):  # past kmax the last leaves and sets theta
            n_new -= 1
            theta[s] = a_score[o + n_new]
            lam[s] = text_floor(theta[s], s_alpha[s])
            lost_oldest = lost_oldest or a_msg[o + n_new] == b_old[s]
        b_len[s] = n_new
        if lost_oldest or n_new == 1:
            set_oldest(s, oldest(a_msg, o, n_new), b_old, o_head, o_next, o_prev)
    return a_used, n_touch, scored


@njit(cache=True)
def post_overflow(s, s_off, s_val, ov_head, ov_next, ov_sub, ov_j, n_ov):
    """Post s under each of its terms in the overflow lists (its postings' order is stale)."""
    need = n_ov + s_off[s + 1] - s_off[s]
    if need > len(ov_sub):
        ov_next, ov_sub, ov_j = grown(ov_next, need), grown(ov_sub, need), grown(ov_j, need)
    for j in range(s_off[s], s_off[s + 1]):
        ov_sub[n_ov], ov_j[n_ov], ov_next[n_ov] = s, j, ov_head[s_val[j]]
        ov_head[s_val[j]] = n_ov
        n_ov += 1
    return ov_head, ov_next, ov_sub, ov_j, n_ov
