"""The top-k worker index: Skype's subscriber side on the messages this worker receives.

A worker holds its subscriptions (location, keywords, k, alpha) and its local window: every message
routed to it that has not expired. A message's expiry is a seq carried by the stream (the object's
`win` column: the seq of the |W|-th message after it, datasets/workloads/topk.py), so a worker
expires its messages at the right moment whether or not it receives the message that pushes them
out. Per subscription it keeps the local top-k: the k best messages of its local window that share
a keyword with it, in the order (score desc, seq desc), the newer message winning a tie (Skype
Sec. 5.1: "kScore(s) <= Score(s, m)").

The local top-k is the head of Skype's result buffer, a partial k-skyband (skyband.py). Events run
in seq order, an expiry at seq t together with the event at t (Skype's Fig. 1: e5 arrives as e1
expires): expiring messages leave the buffers whose oldest member they are, the arriving message
enters the buffers of the subscriptions it can reach, buffers left with fewer than k members are
re-evaluated against the local window (the arrival included), and a new subscription is
initialised against the window at its insertion (Skype Sec. 4). The worker emits every change of a
local top-k as rows (qid, trigger seq, message seq, oid, score, +1 enter / -1 leave); the merger
(merge.py) turns the replicas' local lists into the global entries.

An arrival reads each of its terms' subscription blocks (subscription_index.py): a block whose
cell, alphas and largest weights cannot reach its smallest theta is skipped whole (Thm 5.3); the
others are read, sorted by the message weight a subscription needs through that term (Thm 5.1 as a
sort key, Thm 5.4's early stop), only as far as the message's largest weight from that term on
reaches (Def. 5's refined prefix); each subscription read is bounded by the common keyword's
product plus Eq. 5 over the rest (Thm 5.2) and by its exact spatial similarity. Registration and
re-evaluation search the window's message index, built once per epoch (message_index.py;
docs/decisions.md, "Top-k subscriptions"). The loops run in kernels that never reallocate inside
them (`arrival_candidates`, `enter_candidates`, `expire`, `emit_changes`): numba counts references
on every pass of a loop that does.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pyarrow as pa
from numba import njit

from harness.core.events import DELETE, INSERT, OBJECT, TOPK, Events
from harness.core.kernels import monotonic_ns, upper_bound
from harness.families.base import NEVER, IndexContext, StateBundle, WorkerIndex, WorkerOutput, deletion_seqs
from harness.families.topk.scoring import normalised_weights, pair_score
from harness.families.topk.message_index import best_candidates, cell_reach, message_grid, search_scratch
from harness.families.topk.subscription_index import subscription_blocks
from harness.families.topk.skyband import CSKYBAND, DEPTH, KMAX, RATIO, better, choose_theta, grown, rank_order, skyband

# a subscription's buffer between epochs: a header row (mseq = HEADER, score = its theta), then its
# members in rank order with their dominance counters
RESULT_SCHEMA = pa.schema([("qid", pa.int64()), ("mseq", pa.int64()), ("score", pa.float64()), ("dom", pa.int32())])
HEADER = -1
MARGIN = 1e-9
# what a worker sends its merger: one row per change of a local top-k
CHANGE_FIELDS = ("qid", "trigger", "mseq", "oid", "score", "delta")


def expiry_seqs(win: np.ndarray) -> np.ndarray:
    """The objects' `win` column as int64 expiry seqs (NaN: never within the stream)."""
    out = np.full(len(win), NEVER, np.int64)
    ok = np.isfinite(win)
    out[ok] = win[ok].astype(np.int64)
    return out


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


@njit(cache=True, inline="always")
def text_bound(s_wt, m_wt, s_rest_sum, s_rest_max, m_rest_sum, m_rest_max):
    """TSim's upper bound when the pair's rarest common keyword has weights s_wt and m_wt and the
    rest of each set (the more frequent keywords, Skype order) is unseen: the keyword's product
    plus Eq. 5's TSimUB, min(wtsum(s rest) x maxwt(m rest), wtsum(m rest) x maxwt(s rest))
    (Thm 5.2)."""
    return s_wt * m_wt + min(s_rest_sum * m_rest_max, m_rest_sum * s_rest_max)


@njit(cache=True)
def buffer_oldest(b_off, b_len, a_msg):
    out = np.empty(len(b_off), np.int64)
    for s in range(len(b_off)):
        out[s] = oldest(a_msg, b_off[s], b_len[s])
    return out


@njit(cache=True)
def oldest_lists(b_old, n_msg):
    """Message -> the subscriptions whose oldest buffer member it is, as doubly linked lists (head
    per message, next and previous per subscription): an expiry visits exactly the buffers it
    leaves instead of every subscription sharing one of its keywords."""
    head = np.full(n_msg, -1, np.int64)
    nxt = np.full(len(b_old), -1, np.int64)
    prv = np.full(len(b_old), -1, np.int64)
    for s in range(len(b_old)):
        if b_old[s] >= 0:
            _link(s, b_old[s], head, nxt, prv)
    return head, nxt, prv


@njit(cache=True, inline="always")
def _link(s, m, head, nxt, prv):
    nxt[s], prv[s] = head[m], -1
    if head[m] >= 0:
        prv[head[m]] = s
    head[m] = s


@njit(cache=True)
def set_oldest(s, m, b_old, head, nxt, prv):
    """s's oldest member is now message m (-1: its buffer is empty); its list follows."""
    if b_old[s] == m:
        return
    if b_old[s] >= 0:
        if prv[s] >= 0:
            nxt[prv[s]] = nxt[s]
        else:
            head[b_old[s]] = nxt[s]
        if nxt[s] >= 0:
            prv[nxt[s]] = prv[s]
    b_old[s] = m
    if m >= 0:
        _link(s, m, head, nxt, prv)


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
def oldest(a_msg, o, n):
    """A buffer's oldest member (-1 when empty): messages are indexed in seq order, so the smallest
    index. The FIFO window expires a buffer's members oldest first, so an expiring message is in a
    buffer only if it is that buffer's oldest."""
    out = -1
    for r in range(n):
        if out < 0 or a_msg[o + r] < out:
            out = a_msg[o + r]
    return out


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


@njit(cache=True)
def _rebuild(s, t, inclusive, k, mode, ratio, kmax, window, b_off, b_cap, b_len, b_old, o_head, o_next, o_prev, theta, lam,
             a_msg, a_score, a_dom, a_used, c_msg, c_score, m_seen, stamp, m_seq, m_exp, m_x, m_y, m_off, m_val, m_w, grid, scratch,
             s_x, s_y, s_alpha, s_off, s_val, s_w, max_dist):
    """Re-evaluate s against the window at t: theta_s and its buffer (skyband.py). Returns the
    arena, the candidate scratch and the pairs scored."""
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
        th = choose_theta(ranked[:complete], k, window, mode, ratio, n, target == -np.inf)
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


@njit(cache=True, inline="always")
def _snap(s, kk, o, a_msg, a_score, touched, snap_off, snap_msg, snap_score, n_touch):
    """Keep s's top-k (its buffer's first kk members from arena offset o) as it was before this
    seq's changes, for the diff at the seq's end, in arrays with room; returns the count."""
    for u in range(kk):
        snap_msg[snap_off[n_touch] + u] = a_msg[o + u]
        snap_score[snap_off[n_touch] + u] = a_score[o + u]
    touched[n_touch] = s
    snap_off[n_touch + 1] = snap_off[n_touch] + kk
    return n_touch + 1


@njit(cache=True)
def _snapshot(s, kk, o, a_msg, a_score, touched, snap_off, snap_msg, snap_score, n_touch):
    """`_snap`, growing the arrays first; returns them and the count."""
    if n_touch + 1 >= len(touched):
        touched = grown(touched, n_touch + 2)
        snap_off = grown(snap_off, n_touch + 3)
    if snap_off[n_touch] + kk > len(snap_msg):
        snap_msg = grown(snap_msg, snap_off[n_touch] + kk)
        snap_score = grown(snap_score, snap_off[n_touch] + kk)
    n_touch = _snap(s, kk, o, a_msg, a_score, touched, snap_off, snap_msg, snap_score, n_touch)
    return touched, snap_off, snap_msg, snap_score, n_touch


@njit(cache=True)
def _overflow(s, s_off, s_val, ov_head, ov_next, ov_sub, ov_j, n_ov):
    """Post s under each of its terms in the overflow lists (its postings' order is stale)."""
    need = n_ov + s_off[s + 1] - s_off[s]
    if need > len(ov_sub):
        ov_next, ov_sub, ov_j = grown(ov_next, need), grown(ov_sub, need), grown(ov_j, need)
    for j in range(s_off[s], s_off[s + 1]):
        ov_sub[n_ov], ov_j[n_ov], ov_next[n_ov] = s, j, ov_head[s_val[j]]
        ov_head[s_val[j]] = n_ov
        n_ov += 1
    return ov_head, ov_next, ov_sub, ov_j, n_ov


SEEN, PRUNED, CANDIDATE = 0, 1, 2


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
                       max_dist, cand):
    """The live subscriptions message m may enter at t, into cand; returns their count, the pairs
    pruned one by one and the blocks skipped whole. Terms rarest first, so a subscription is met
    first at its rarest common keyword, where its text bound is loosest. Per block of the term
    (subscription_index.py): skipped whole when its cell's spatial bound and its largest weights
    cannot reach its smallest theta (Thm 5.3), else read up to the message's largest weight from
    this term on (Def. 5). The overflow holds those whose theta fell below the one they were posted
    with. Each one read: Thm 5.2's text bound (`text_bound`), then the exact spatial similarity
    with it (a skip is certain: the margin dwarfs rounding). Kept apart from run_events, whose
    growing arrays would otherwise make numba count references in this loop."""
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
            reach_s = cell_reach(blk_cell[b], geometry, mx, my, max_dist)
            reach_t = min(1.0, text_bound(blk_w[b], mw, blk_rsum[b], blk_rmax[b], m_rsum[u], m_rmax[u]))
            a_lo, a_hi = blk_alo[b], blk_ahi[b]
            if max(a_lo * reach_s + (1.0 - a_lo) * reach_t, a_hi * reach_s + (1.0 - a_hi) * reach_t) \
                    < blk_theta[b] - MARGIN:
                skipped += 1
                continue
            hi_p = upper_bound(e_key, blk_start[b], blk_start[b + 1], m_rmax[u + 1])
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
        e = ov_head[term]
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
    """Message m scored against each candidate and entered into the buffers it reaches (module
    docstring); returns the arena's use, the snapshots taken and the pairs scored. The arena and
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
            n_touch = _snap(s, min(k, b_len[s]), o, a_msg, a_score, touched, snap_off, snap_msg, snap_score, n_touch)
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
                    n_touch = _snap(s, min(s_k[s], b_len[s]), o, a_msg, a_score, touched, snap_off, snap_msg,
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


@njit(cache=True)
def snap_room(n, subs, s_k, touched, snap_off, snap_msg, snap_score, n_touch):
    """The snapshot arrays grown, once, to hold a snapshot of k for each of subs[:n]."""
    need_s = snap_off[n_touch]
    for c in range(n):
        need_s += s_k[subs[c]]
    if n_touch + n + 2 > len(touched):
        touched, snap_off = grown(touched, n_touch + n + 2), grown(snap_off, n_touch + n + 3)
    if need_s > len(snap_msg):
        snap_msg, snap_score = grown(snap_msg, need_s), grown(snap_score, need_s)
    return touched, snap_off, snap_msg, snap_score


@njit(cache=True)
def room_for(n_cand, cand, s_k, b_cap, b_len, a_msg, a_score, a_dom, a_used, touched, snap_off, snap_msg, snap_score,
             n_touch):
    """The arena and snapshot arrays grown, once, to hold every candidate's worst case: a region
    moved to the arena's end (at most max(2 cap, len + 1, 2k)) and a snapshot of k."""
    need_a = a_used
    for c in range(n_cand):
        s = cand[c]
        need_a += max(2 * b_cap[s], b_len[s] + 1, 2 * s_k[s])
    if need_a > len(a_msg):
        a_msg, a_score, a_dom = grown(a_msg, need_a), grown(a_score, need_a), grown(a_dom, need_a)
    touched, snap_off, snap_msg, snap_score = snap_room(n_cand, cand, s_k, touched, snap_off, snap_msg, snap_score,
                                                        n_touch)
    return a_msg, a_score, a_dom, touched, snap_off, snap_msg, snap_score


@njit(cache=True)
def emit_changes(t, n_touch, touched, snap_off, snap_msg, snap_score, s_k, b_off, b_len, a_msg, a_score, m_mark, mark,
                 o_slot, o_trig, o_msg, o_score, o_delta, n_out):
    """Each touched subscription's top-k against its snapshot: the members that left (-1, in the
    snapshot's order), then those that entered (+1, in rank order). Membership by a mark per
    message (two per subscription), so a diff costs O(k), not O(k^2); the output arrays have room."""
    for u in range(n_touch):
        s = touched[u]
        o = b_off[s]
        kk = min(s_k[s], b_len[s])
        lo_, hi_ = snap_off[u], snap_off[u + 1]
        mark += 1
        for v in range(kk):
            m_mark[a_msg[o + v]] = mark
        for r in range(lo_, hi_):
            if m_mark[snap_msg[r]] != mark:
                o_slot[n_out], o_trig[n_out], o_msg[n_out] = s, t, snap_msg[r]
                o_score[n_out], o_delta[n_out] = snap_score[r], -1
                n_out += 1
        mark += 1
        for r in range(lo_, hi_):
            m_mark[snap_msg[r]] = mark
        for v in range(kk):
            if m_mark[a_msg[o + v]] != mark:
                o_slot[n_out], o_trig[n_out], o_msg[n_out] = s, t, a_msg[o + v]
                o_score[n_out], o_delta[n_out] = a_score[o + v], 1
                n_out += 1
    return n_out, mark


@njit(cache=True)
def run_events(ev_seq, ev_kind, ev_ref, exp_seq, exp_msg, window0,
               m_seq, m_exp, m_x, m_y, m_off, m_val, m_w, grid, scratch,
               s_ins, s_del, s_x, s_y, s_k, s_alpha, s_off, s_val, s_w, s_wsum, s_rmax, sub_index, b_off, b_cap, b_len, b_old, theta, lam, a_msg, a_score, a_dom, a_used, mode, ratio, kmax, max_dist,
               work):
    """The epoch's events and expiries in seq order through the subscriptions' buffers (module
    docstring). ev_ref: the message index of an object, the subscription slot of an insert or
    delete. Returns the change rows (slot, trigger, message, score, delta) and their count, the
    arena, the re-evaluations, the pairs scored, offered and pruned, and the nanoseconds spent on
    arrivals and on expiries with their re-evaluations (Skype's AMP and EMP, summed)."""
    n_ev, n_exp = len(ev_seq), len(exp_seq)
    n_sub, n_msg = len(s_k), len(m_seq)
    o_slot = np.empty(1024, np.int64)
    o_trig = np.empty(1024, np.int64)
    o_msg = np.empty(1024, np.int64)
    o_score = np.empty(1024, np.float64)
    o_delta = np.empty(1024, np.int8)
    n_out = 0
    s_seen = np.full(n_sub, -1, np.int64)
    s_touch = np.full(n_sub, -1, np.int64)  # the last time a subscription's top-k was snapshotted
    s_redo = np.full(n_sub, -1, np.int64)  # the last time it was marked for re-evaluation
    m_seen = np.full(n_msg, -1, np.int64)
    m_mark = np.full(n_msg, -1, np.int64)  # the diffs' membership marks
    mark = 0
    touched = np.empty(16, np.int64)
    snap_off = np.zeros(17, np.int64)
    snap_msg = np.empty(64, np.int64)
    snap_score = np.empty(64, np.float64)
    redo = np.empty(n_sub, np.int64)  # a subscription at most once per seq (s_redo)
    c_msg = np.empty(64, np.int64)
    c_score = np.empty(64, np.float64)
    stamp = 0
    # a subscription is a candidate once per message (s_seen), so n_sub bounds them: growing it inside
    # the loop made numba count references on every pass (measured: 3x the loop's time)
    cand = np.empty(n_sub, np.int64)
    posted = lam.copy()  # the theta (as a text floor) each subscription's postings are sorted by
    ov_head = np.full(len(sub_index[0]) - 1, -1, np.int64)  # term -> overflow entries (linked)
    ov_next = np.empty(16, np.int64)
    ov_sub = np.empty(16, np.int64)
    ov_j = np.empty(16, np.int64)
    longest = 0
    for m in range(n_msg):
        longest = max(longest, m_off[m + 1] - m_off[m])
    m_rmax = np.empty(longest + 1)  # the arriving message's rest bounds per term position
    m_rsum = np.empty(longest + 1)
    n_ov = 0
    in_ov = np.zeros(n_sub, np.bool_)
    o_head, o_next, o_prev = oldest_lists(b_old, n_msg)
    leave = np.empty(n_sub, np.int64)  # the buffers an expiry leaves: at most every subscription
    reevals = 0
    scored_total = 0
    pruned = 0
    skipped = 0
    offered = 0
    live = window0  # messages in the worker's window
    # a warm-up fills the window before the subscriptions register: those arrivals skip the calls
    # below (about 8 us each with nothing to meet, 8 s for a window of 1M)
    first_ins = s_ins.min() if n_sub else NEVER
    clock = np.zeros(2, np.int64)
    t0 = 0
    arrival_ns = 0
    expiry_ns = 0
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
                n_cand, n_pruned, n_skipped = arrival_candidates(
                    m, t, stamp, m_off, m_val, m_w, m_x, m_y, m_rmax, m_rsum, sub_index, ov_head, ov_next, ov_sub, ov_j,
                    s_w, s_wsum, s_rmax, s_seen, lam, theta, s_redo, s_ins, s_del, s_x, s_y, s_alpha, max_dist, cand)
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
                touched, snap_off, snap_msg, snap_score, n_touch = _snapshot(
                    s, 0, 0, a_msg, a_score, touched, snap_off, snap_msg, snap_score, n_touch)
                a_msg, a_score, a_dom, a_used, c_msg, c_score, n_c = _rebuild(
                    s, t, kind == 3, s_k[s], mode, ratio, kmax, live, b_off, b_cap, b_len, b_old, o_head, o_next, o_prev,
                    theta, lam, a_msg,
                    a_score, a_dom, a_used, c_msg, c_score, m_seen, stamp, m_seq, m_exp, m_x, m_y, m_off, m_val, m_w,
                    grid, scratch, s_x, s_y, s_alpha, s_off, s_val, s_w, max_dist)
                scored += n_c
                if lam[s] < posted[s] and not in_ov[s]:
                    in_ov[s] = True
                    ov_head, ov_next, ov_sub, ov_j, n_ov = _overflow(s, s_off, s_val, ov_head, ov_next, ov_sub, ov_j,
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
            a_msg, a_score, a_dom, a_used, c_msg, c_score, n_c = _rebuild(
                s, t, True, s_k[s], mode, ratio, kmax, live, b_off, b_cap, b_len, b_old, o_head, o_next, o_prev, theta, lam,
                a_msg, a_score,
                a_dom, a_used, c_msg, c_score, m_seen, stamp, m_seq, m_exp, m_x, m_y, m_off, m_val, m_w, grid,
                scratch, s_x, s_y, s_alpha, s_off, s_val, s_w, max_dist)
            scored += n_c
            if lam[s] < posted[s] and not in_ov[s]:
                in_ov[s] = True
                ov_head, ov_next, ov_sub, ov_j, n_ov = _overflow(s, s_off, s_val, ov_head, ov_next, ov_sub, ov_j, n_ov)
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
    return (o_slot, o_trig, o_msg, o_score, o_delta, n_out, a_msg, a_score, a_dom, a_used, reevals, scored_total,
            offered, pruned, skipped, arrival_ns, expiry_ns)


@njit(cache=True)
def thresholds(slots, t, horizon, b_off, b_len, a_msg, a_score, m_seq, m_exp, m_x, m_y, m_off, m_val, m_w,
               grid, scratch, s_x, s_y, s_k, s_alpha, s_off, s_val, s_w, max_dist):
    """Per subscription slot: the k-th best score among the window messages at t (the epoch's last
    seq) sharing a keyword with it that stay until `horizon` (0 when fewer than k), and the pairs
    scored. The buffer holds the k best of them whenever it holds k of them (the survivors are the
    newest messages, so a survivor's dominators survive too); otherwise the window is searched."""
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


@njit(cache=True)
def kept_rows(slots, s_id, b_off, b_len, theta, a_msg, a_score, a_dom, m_seq):
    """`_kept`'s columns, slot by slot in one pass: a header row (mseq HEADER, theta, dom -1), then
    the buffer's members. Written out because a dozen numpy passes over every buffered row (5M at
    156k subscriptions, |W| = 1M) took 0.6 s of each epoch."""
    n = 0
    for s in slots:
        n += b_len[s] + 1
    qid, mseq = np.empty(n, np.int64), np.empty(n, np.int64)
    score, dom = np.empty(n), np.empty(n, np.int32)
    r = 0
    for s in slots:
        qid[r], mseq[r], score[r], dom[r] = s_id[s], HEADER, theta[s], -1
        r += 1
        o = b_off[s]
        for u in range(b_len[s]):
            qid[r], mseq[r], score[r], dom[r] = s_id[s], m_seq[a_msg[o + u]], a_score[o + u], a_dom[o + u]
            r += 1
    return qid, mseq, score, dom


def message_rows(m_seq: np.ndarray, seqs: np.ndarray) -> np.ndarray:
    """The rows of `seqs` in the ascending m_seq: through a table over the seq span when it is
    dense (a window's seqs are), else a binary search."""
    if len(m_seq) == 0 or len(seqs) == 0:
        return np.zeros(len(seqs), np.int64)
    lo, span = int(m_seq[0]), int(m_seq[-1] - m_seq[0]) + 1
    if span > 4 * len(m_seq):
        return np.searchsorted(m_seq, seqs)
    table = np.zeros(span, np.int64)
    table[m_seq - lo] = np.arange(len(m_seq))
    return table[seqs - lo]


class TopkIndex(WorkerIndex):
    """Subscriptions, the local window and each subscription's buffer (module docstring)."""

    family = "topk"

    def __init__(self, context: IndexContext, reevaluation: str = "cskyband", skyband_ratio: float = 0.95,
                 kmax: int = 60, **params):
        super().__init__(context)
        if context.term_weight is None:
            raise ValueError("the top-k index scores with the stream's term weights; build it through "
                             "family_setup(..., events=stream) so the family can derive them")
        self.idf = np.asarray(context.term_weight, np.float64)
        self.max_dist = float(context.max_dist) or 1.0
        self.mode = {"cskyband": CSKYBAND, "skyband": RATIO, "recompute": RATIO, "kmax": KMAX}[reevaluation]
        self.kmax = int(kmax)
        self.ratio = 1.0 if reevaluation == "recompute" else float(skyband_ratio)
        self.span: tuple[int, int] | None = None
        self.horizon: int | None = None
        self.fed = False  # the merger's thresholds arrived: the router may have narrowed routes
        self.leaving = RESULT_SCHEMA.empty_table()  # local top-k members of replicas dropped before the epoch
        self.subs = Events.empty()
        self.window = Events.empty()
        self.buffers = RESULT_SCHEMA.empty_table()

    def begin_epoch(self, lo: int, hi: int, horizon: int | None = None) -> None:
        self.span = (int(lo), int(hi))
        self.horizon = horizon

    def observe_feedback(self, table: pa.Table) -> None:
        """The thresholds themselves are the router's business; they only mean routes may narrow."""
        self.fed = True

    def narrowed(self) -> tuple[Events, Events] | None:
        """Every stored subscription, unchanged: routed again with the epoch's router (whose
        thresholds the feedback moved), a worker no longer on its route drops its replica."""
        return (self.subs, self.subs) if self.fed and len(self.subs) else None

    def apply_narrowing(self, drop: np.ndarray, narrow: np.ndarray) -> None:
        """Drop the replicas of `drop`; their top-k members leave the merger's union at the epoch's
        start (they cannot change the global top-k: the route kept covers it)."""
        if len(drop) == 0:
            return
        gone = np.isin(self.buffers.column("qid").to_numpy(), drop)
        self.leaving = top_rows(self.buffers.filter(pa.array(gone)), self.subs)
        self.buffers = self.buffers.filter(pa.array(~gone))
        self.subs = self.subs.take(np.flatnonzero(~np.isin(self.subs.id, drop)))

    def restore(self, state: StateBundle) -> float:
        t0 = time.process_time()
        self.subs, self.window = state.queries, state.objects
        self.buffers = state.results if state.results is not None else RESULT_SCHEMA.empty_table()
        return time.process_time() - t0

    def process(self, events: Events) -> WorkerOutput:
        t0 = time.process_time()
        lo, hi = self.span if self.span is not None else (
            int(events.seq[0]) if len(events) else 0, int(events.seq[-1]) + 1 if len(events) else 0)
        is_obj = events.kind == OBJECT
        ins = np.flatnonzero((events.kind == INSERT) & (events.family == TOPK))
        # a subscription re-sent from before the epoch is a replica the route gained (none if held)
        held = (events.seq[ins] < lo) & np.isin(events.id[ins], self.subs.id)
        ignored, ins = ins[held], ins[~held]
        msgs = Events.concat([self.window, events.take(np.flatnonzero(is_obj))])
        subs = Events.concat([self.subs, events.take(ins)])
        n_old = len(self.subs)
        s_del, orphans = deletion_seqs(subs.id, events.take(np.flatnonzero(events.kind == DELETE)))
        s_ins = np.concatenate([np.full(n_old, -1, np.int64), np.maximum(events.seq[ins], lo - 1)])
        n_terms = max(len(self.idf), int(msgs.values.max(initial=-1)) + 1, int(subs.values.max(initial=-1)) + 1)
        idf = self.idf if len(self.idf) == n_terms else np.concatenate(
            [self.idf, np.ones(n_terms - len(self.idf))])
        m_seq, m_exp = msgs.seq, expiry_seqs(msgs.win)
        m_w = normalised_weights(msgs.offsets, msgs.values, idf)
        s_w = normalised_weights(subs.offsets, subs.values, idf)
        s_k = np.maximum(subs.k.astype(np.int64), 0)
        s_alpha = subs.alpha.astype(np.float64)
        b_off, b_cap, b_len, theta, a_msg, a_score, a_dom = self._arena(subs, s_k, m_seq)
        b_old = buffer_oldest(b_off, b_len, a_msg)

        # the epoch's events: objects by message index, insertions and deletions by slot
        ref = np.full(len(events), -1, np.int64)
        ref[is_obj] = len(self.window) + np.arange(int(is_obj.sum()))
        ref[ins] = n_old + np.arange(len(ins))
        dels = np.flatnonzero(events.kind == DELETE)
        if len(dels) and len(subs):
            order = np.argsort(subs.id, kind="stable")
            at = np.minimum(np.searchsorted(subs.id[order], events.id[dels]), len(subs) - 1)
            found = subs.id[order][at] == events.id[dels]
            ref[dels[found]] = order[at[found]]
        ev_kind = np.where(is_obj, 0, np.where(events.kind == INSERT, 1, 2)).astype(np.int8)
        ev_seq = events.seq.copy()
        early = np.flatnonzero((events.kind == INSERT) & (events.seq < lo))
        ev_kind[early], ev_seq[early] = 3, lo - 1  # a new replica starts from the window as the epoch starts
        ref[ignored] = -1
        keep_ev = ref >= 0
        exp_rows = np.flatnonzero(m_exp < hi)
        exp_rows = exp_rows[np.argsort(m_exp[exp_rows], kind="stable")]
        grid = message_grid(msgs.x, msgs.y, msgs.offsets, msgs.values, m_w, n_terms)
        scratch = search_scratch(grid, int(np.diff(subs.offsets).max(initial=0)))
        lam = text_floors(theta, s_alpha)
        s_wsum = suffix_weights(subs.offsets, s_w)
        s_rmax = rest_max(subs.offsets, s_w)
        sub_index = subscription_blocks(subs.x, subs.y, subs.offsets, subs.values, s_w, s_wsum, s_rmax, theta, lam,
                                        s_alpha, n_terms)
        work_kept = np.zeros(int(keep_ev.sum()), np.int64)
        (o_slot, o_trig, o_msg, o_score, o_delta, n_out, a_msg, a_score, a_dom, _, reevals, scored, offered,
         pruned, skipped, arrival_ns, expiry_ns) = run_events(
            ev_seq[keep_ev], ev_kind[keep_ev], ref[keep_ev], m_exp[exp_rows], exp_rows, len(self.window),
            m_seq, m_exp, msgs.x, msgs.y, msgs.offsets, msgs.values, m_w, grid, scratch,
            s_ins, s_del, subs.x, subs.y, s_k, s_alpha, subs.offsets, subs.values, s_w, s_wsum, s_rmax, sub_index, b_off, b_cap, b_len, b_old, theta,
            lam, a_msg, a_score, a_dom, int(b_cap.sum()), self.mode,
            self.ratio, self.kmax, self.max_dist, work_kept)
        o_slot, o_msg = o_slot[:n_out], o_msg[:n_out]
        parts = [self._leaving_rows(lo), {"qid": subs.id[o_slot], "trigger": o_trig[:n_out], "mseq": m_seq[o_msg],
                                          "oid": msgs.id[o_msg], "score": o_score[:n_out], "delta": o_delta[:n_out]}]
        work = np.zeros(len(events), np.int64)
        work[keep_ev] = work_kept

        live = s_del == NEVER
        if self.horizon is not None:  # thresholds for the router: valid until the next epoch's end
            slots = np.flatnonzero(live)
            th, sc_n = thresholds(slots, hi - 1, self.horizon, b_off, b_len, a_msg, a_score, m_seq, m_exp, msgs.x,
                                  msgs.y, msgs.offsets, msgs.values, m_w, grid, scratch, subs.x, subs.y, s_k,
                                  s_alpha, subs.offsets, subs.values, s_w, self.max_dist)
            scored += sc_n
            n = len(slots)
            parts.append({"qid": subs.id[slots], "trigger": np.full(n, hi - 1, np.int64), "mseq": np.full(n, -1),
                          "oid": np.full(n, -1), "score": th, "delta": np.zeros(n, np.int8)})
        changes = {c: np.concatenate([np.asarray(p[c]) for p in parts]) for c in CHANGE_FIELDS}
        self.subs = subs.take(np.flatnonzero(live))
        self.window = msgs.take(np.flatnonzero(m_exp >= hi))
        self.buffers = self._kept(subs, live, b_off, b_len, theta, a_msg, a_score, a_dom, m_seq)
        counters = {"objects": int(is_obj.sum()), "inserts": int((events.seq[ins] >= lo).sum()), "deletes": len(dels),
                    "orphan_deletes": orphans, "candidates": int(scored), "results": int((o_delta[:n_out] > 0).sum()),
                    "reevaluations": int(reevals), "window": len(self.window), "arrival_pairs": int(offered),
                    "pruned_pairs": int(pruned), "skipped_blocks": int(skipped), "expiries": len(exp_rows),
                    "arrival_s": arrival_ns / 1e9, "expiry_s": expiry_ns / 1e9,
                    "buffered": int(b_len[live].sum())}
        return WorkerOutput(changes, work, counters, time.process_time() - t0)

    def _arena(self, subs: Events, s_k: np.ndarray, m_seq: np.ndarray):
        """The restored buffers in one arena: each subscription a region of twice its size (at
        least 2k), members in rank order; theta from its header row. New subscriptions get their
        region at their first re-evaluation."""
        n = len(subs)
        b_len = np.zeros(n, np.int64)
        theta = np.zeros(n)
        t = self.buffers
        qid, mseq = t.column("qid").to_numpy(), t.column("mseq").to_numpy()
        order = np.argsort(subs.id, kind="stable")
        # rows come by query: look each query up once, not each row
        heads = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]]) if len(qid) else np.zeros(0, np.int64)
        at = order[np.minimum(np.searchsorted(subs.id[order], qid[heads]), max(n - 1, 0))] if n else qid[heads]
        slot = np.repeat(at, np.diff(np.r_[heads, len(qid)]))
        head = mseq == HEADER
        theta[slot[head]] = t.column("score").to_numpy()[head]
        mem = ~head
        np.add.at(b_len, slot[mem], 1)
        b_cap = np.where(b_len > 0, np.maximum(2 * b_len, 2 * s_k), 0)
        b_off = (np.cumsum(b_cap) - b_cap).astype(np.int64)
        # room past the regions for the epoch's relocations and new subscriptions: growing a full
        # arena copies every buffer (at 156k subscriptions, 0.2 s on the first relocation of an epoch)
        size = int(b_cap.sum())
        room = size + size // 2 + DEPTH * int(s_k.max(initial=1)) * max(n - int((b_len > 0).sum()), 16)
        a_msg, a_score, a_dom = np.empty(room, np.int64), np.empty(room), np.empty(room, np.int64)
        if mem.any():  # rows are by query, in rank order
            q = slot[mem]
            first = np.r_[0, np.flatnonzero(q[1:] != q[:-1]) + 1]
            rank = np.arange(len(q)) - np.repeat(first, np.diff(np.r_[first, len(q)]))
            where = b_off[q] + rank
            a_msg[where] = message_rows(m_seq, mseq[mem])
            a_score[where] = t.column("score").to_numpy()[mem]
            a_dom[where] = t.column("dom").to_numpy()[mem]
        return b_off, b_cap, b_len, theta, a_msg, a_score, a_dom

    @staticmethod
    def _kept(subs, live, b_off, b_len, theta, a_msg, a_score, a_dom, m_seq) -> pa.Table:
        """Each live subscription's header row (theta) and buffer, by query, in rank order."""
        qid, mseq, score, dom = kept_rows(np.flatnonzero(live), subs.id, b_off, b_len, theta, a_msg, a_score, a_dom,
                                          m_seq)
        return pa.table({"qid": qid, "mseq": mseq, "score": score, "dom": dom}, schema=RESULT_SCHEMA)

    def _leaving_rows(self, lo: int) -> dict:
        """The dropped replicas' top-k members as leave rows just before the epoch (apply_narrowing)."""
        t, self.leaving = self.leaving, RESULT_SCHEMA.empty_table()
        n = t.num_rows
        return {"qid": t.column("qid").to_numpy(), "trigger": np.full(n, lo - 1, np.int64),
                "mseq": t.column("mseq").to_numpy(), "oid": np.full(n, -1, np.int64),
                "score": t.column("score").to_numpy(), "delta": np.full(n, -1, np.int8)}

    def kth_scores(self) -> np.ndarray:
        """Each held subscription's k-th score now (0 with fewer than k), in `self.subs` order."""
        tops = top_rows(self.buffers, self.subs)
        qid, score = tops.column("qid").to_numpy(), tops.column("score").to_numpy()
        ids, first, count = np.unique(qid, return_index=True, return_counts=True)  # by query, best first
        out = np.zeros(len(self.subs))
        if len(ids):
            at = np.minimum(np.searchsorted(ids, self.subs.id), len(ids) - 1)
            full = (ids[at] == self.subs.id) & (count[at] >= self.subs.k)
            out[full] = score[first[at] + count[at] - 1][full]
        return out

    def export_state(self) -> StateBundle:
        return StateBundle(queries=self.subs, objects=self.window, results=self.buffers)

    def size_bytes(self) -> int:
        return int(sum(a.nbytes for e in (self.subs, self.window) for a in (*e.cols.values(), e.offsets, e.values))
                   + self.buffers.nbytes)


def top_rows(buffers: pa.Table, subs: Events) -> pa.Table:
    """The top-k members (the first k buffer rows of each query; headers left out)."""
    qid, mseq = buffers.column("qid").to_numpy(), buffers.column("mseq").to_numpy()
    mem = np.flatnonzero(mseq != HEADER)
    if len(mem) == 0:
        return RESULT_SCHEMA.empty_table()
    q = qid[mem]
    first = np.r_[0, np.flatnonzero(q[1:] != q[:-1]) + 1]
    rank = np.arange(len(q)) - np.repeat(first, np.diff(np.r_[first, len(q)]))
    k = subs.k[np.argsort(subs.id, kind="stable")][np.searchsorted(np.sort(subs.id), q)]
    return buffers.take(pa.array(mem[rank < k]))
