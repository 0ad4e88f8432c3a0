"""The top-k worker's epoch in one compiled loop: events and expiries in seq order through the
subscriptions' buffers, and the thresholds the epoch ends with.

Each seq t runs four phases (index.py's module docstring has the semantics):
(a) the expiries at t leave the buffers (reevaluation.expire_seq);
(b) the event at t: an object arrives (arrival.arrive), a subscription is initialised against the
    window (reevaluation.refill), or a deletion empties its buffer;
(c) the buffers that fell below k are re-evaluated, the arrival at t included (reevaluation.refill);
(d) each touched subscription's top-k is diffed against its snapshot into change rows
    (buffers.emit_seq).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.kernels import monotonic_ns
from harness.families.base import NEVER
from harness.families.topk.arrival import arrive
from harness.families.topk.buffers import emit_seq, oldest_lists, set_oldest, snap_growing
from harness.families.topk.message_index import best_candidates
from harness.families.topk.reevaluation import expire_seq, refill
from harness.families.topk.state import Changes, Epoch, Marks, Overflow, Scored, Snapshots


@njit(cache=True)
def epoch_marks(n_sub, n_msg, longest, lam):
    """The epoch's marks (state.Marks), none set: every subscription's postings sorted by its
    theta as the epoch starts (`lam`)."""
    return Marks(np.full(n_sub, -1, np.int64), np.full(n_sub, -1, np.int64), np.full(n_sub, -1, np.int64), lam.copy(),
                 np.zeros(n_sub, np.bool_), np.full(n_msg, -1, np.int64), np.full(n_msg, -1, np.int64),
                 np.empty(n_sub, np.int64), np.empty(n_sub, np.int64), np.empty(n_sub, np.int64),
                 np.empty(longest + 1), np.empty(longest + 1))


@njit(cache=True)
def run_events(stream, window0, win, grid, scratch, subs, sub_index, bufs, arena, a_used, policy, work):
    """The epoch's events and expiries (`stream`) in seq order through the subscriptions' buffers,
    `window0` messages in the window as it starts (module docstring). Returns the change rows
    (state.Changes) and their count, the arena and its use, the re-evaluations, the pairs scored,
    offered and pruned, the blocks skipped, and the nanoseconds spent on arrivals and on expiries
    with their re-evaluations (Skype's AMP and EMP, summed); adds each event's work to `work`."""
    ev_seq, ev_kind, ev_ref, exp_seq = stream.seq, stream.kind, stream.ref, stream.exp_seq
    n_ev, n_exp, n_sub, n_msg = len(ev_seq), len(exp_seq), len(subs.k), len(win.seq)
    longest = 0
    for m in range(n_msg):
        longest = max(longest, win.off[m + 1] - win.off[m])
    # a subscription is a candidate once per message (s_seen), so n_sub bounds them: growing the
    # candidates inside the loop made numba count references on every pass (measured: 3x the loop's time)
    marks = epoch_marks(n_sub, n_msg, longest, bufs.lam)
    ep = Epoch(win, grid, scratch, subs, sub_index, bufs, oldest_lists(bufs.old, n_msg), marks, policy)
    changes = Changes(np.empty(1024, np.int64), np.empty(1024, np.int64), np.empty(1024, np.int64),
                      np.empty(1024, np.float64), np.empty(1024, np.int8))
    snaps = Snapshots(np.empty(16, np.int64), np.zeros(17, np.int64), np.empty(64, np.int64), np.empty(64, np.float64))
    found = Scored(np.empty(64, np.int64), np.empty(64, np.float64))
    overflow = Overflow(np.full(len(sub_index[0]) - 1, -1, np.int64), np.empty(16, np.int64), np.empty(16, np.int64),
                        np.empty(16, np.int64))
    n_out = n_ov = mark = stamp = 0
    reevals = scored_total = pruned = skipped = offered = 0
    live = window0  # messages in the worker's window
    # a warm-up fills the window before the subscriptions register: those arrivals skip the calls
    # below (about 8 us each with nothing to meet, 8 s for a window of 1M)
    first_ins = subs.ins.min() if n_sub else NEVER
    clock = np.zeros(2, np.int64)
    arrival_ns = expiry_ns = 0
    i, j = 0, 0
    while i < n_ev or j < n_exp:
        t = ev_seq[i] if i < n_ev else NEVER
        if j < n_exp and exp_seq[j] < t:
            t = exp_seq[j]
        at = i if i < n_ev else n_ev - 1  # the event the work is charged to
        scored = n_touch = n_redo = 0
        if j < n_exp and exp_seq[j] == t:  # (a)
            t0, j0 = monotonic_ns(clock), j
            j, snaps, n_touch, n_redo = expire_seq(t, j, stream, ep, arena, snaps, n_touch)
            live -= j - j0
            expiry_ns += monotonic_ns(clock) - t0
        if i < n_ev and ev_seq[i] == t:  # (b)
            kind, ref = ev_kind[i], ev_ref[i]
            if kind == 0 and t <= first_ins:  # an object before any subscription registered: none to meet
                live += 1
            elif kind == 0:  # an object: into the buffers of the subscriptions indexed under its terms
                t0 = monotonic_ns(clock)
                live += 1
                stamp += 1
                arena, a_used, snaps, n_touch, n_sc, n_pruned, n_skipped = arrive(
                    ref, t, stamp, ep, overflow, arena, a_used, snaps, n_touch)
                pruned += n_pruned
                skipped += n_skipped
                scored += n_sc
                offered += n_sc
                arrival_ns += monotonic_ns(clock) - t0
            elif kind == 1 or kind == 3:  # an insertion (3: a replica the route gained): from the window
                stamp += 1
                reevals += 1
                marks.s_touch[ref] = t  # nothing before
                snaps, n_touch = snap_growing(ref, 0, 0, arena, snaps, n_touch)
                arena, a_used, found, n_c, overflow, n_ov = refill(ref, t, kind == 3, live, stamp, ep, arena, a_used,
                                                                   found, overflow, n_ov)
                scored += n_c
            else:  # a deletion: its replicas go quietly (the merger drops the query at its delete)
                bufs.size[ref] = 0
                set_oldest(ref, -1, bufs.old, ep.lists)
            i += 1
        if n_redo:  # (c), in the expiries' time
            t0 = monotonic_ns(clock)
            for d in range(n_redo):
                stamp += 1
                reevals += 1
                arena, a_used, found, n_c, overflow, n_ov = refill(marks.redo[d], t, True, live, stamp, ep, arena,
                                                                   a_used, found, overflow, n_ov)
                scored += n_c
            expiry_ns += monotonic_ns(clock) - t0
        if n_touch:  # (d)
            changes, n_out, mark = emit_seq(t, n_touch, snaps, subs.k, bufs, arena, marks.m_mark, mark, changes,
                                            n_out)
        if at >= 0:
            work[at] += 1 + scored
        scored_total += scored
    return (changes, n_out, arena, a_used, reevals, scored_total, offered, pruned, skipped, arrival_ns,
            expiry_ns)


@njit(cache=True)
def thresholds(slots, t, horizon, win, grid, scratch, subs, bufs, arena, max_dist):
    """Per subscription slot: the k-th best score among the window messages at t (the epoch's last
    seq) sharing a keyword with it that stay until `horizon` (0 when fewer than k), and the pairs
    scored. The buffer holds the k best of them whenever it holds k of them (the survivors are the
    newest messages, so a survivor's dominators survive too); otherwise the window is searched."""
    b_off, b_len = bufs.off, bufs.size
    a_msg, a_score = arena.msg, arena.score
    s_k, m_exp = subs.k, win.exp
    m_seen = np.full(len(win.seq), -1, np.int64)
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
        c_msg, c_score, n, target = best_candidates(s, t, True, horizon, k, 1.0, c_msg, c_score, m_seen, i, win.seq,
                                                    m_exp, win.x, win.y, win.off, win.val, win.w, grid, scratch,
                                                    subs.x, subs.y, subs.alpha, subs.off, subs.val, subs.w, max_dist)
        scored += n
        if n >= k:
            out[i] = np.sort(c_score[:n])[n - k]
    return out, scored
