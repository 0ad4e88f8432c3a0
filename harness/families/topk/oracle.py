"""Brute-force top-k over a sliding window, sharing no code with the index or the merger.

Per subscription, its whole life is replayed: at its registration its top-k is the k best window
messages sharing a keyword with it; then at every seq where one of its candidates (a message
sharing a keyword) arrives or expires, the live candidates are kept in rank order (score desc, seq
desc) and every member of the new first k that was not in the old one is an entry with that seq as
trigger. The window is read from the subscriptions: count-based, their `win` (|W|): message i
leaves when message i + |W| arrives; time-based, their `tau` (T seconds): message i leaves when the
first message with ts >= ts_i + T arrives (the objects' expiry column is not read). Scores follow
Skype's Eq. 1 with the weights of scoring.py's docstring (smoothed idf rounded to 2^-20,
L2-normalised sets, sums in ascending term order), written out again here; the replay is compiled
only because a Python loop over every (subscription, message) takes minutes at test-run sizes, and
the subscriptions are split over the cores (`in_chunks`, threads; the replay releases the GIL). The
loop over the subscriptions is compiled too (`_entries`): gathering each one's candidates with
np.unique over its terms' whole lists was 40% of the oracle's time at 20,000 subscriptions (issue 50).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from harness.core.events import DELETE, INSERT, OBJECT, TOPK, Events
from harness.families.chunks import in_chunks
from harness.families.topk.keys import entry_keys

INF = np.iinfo(np.int64).max


def _idf_table(events: Events, is_obj: np.ndarray) -> np.ndarray:
    n_terms = int(events.values.max()) + 1 if len(events.values) else 1
    lens = np.diff(events.offsets)
    df = np.bincount(events.values[np.repeat(is_obj, lens)], minlength=n_terms)
    n_docs = int(is_obj.sum())
    return np.array([math.floor(math.log(1.0 + (n_docs + 1.0) / (float(d) + 1.0)) * 2.0 ** 20 + 0.5) / 2.0 ** 20
                     for d in df.tolist()])


@njit(cache=True)
def _unit_vectors(offsets, values, idf):
    out = np.empty(len(values))
    for r in range(len(offsets) - 1):
        total = 0.0
        for j in range(offsets[r], offsets[r + 1]):
            total += idf[values[j]] * idf[values[j]]
        norm = math.sqrt(total)
        for j in range(offsets[r], offsets[r + 1]):
            out[j] = idf[values[j]] / norm if norm > 0.0 else 0.0
    return out


@njit(cache=True, inline="always")
def _ranks_above(a, b, score, o_seq, cand):
    """Candidate a ranks above b: a higher score, or the same and the newer message."""
    return score[a] > score[b] or (score[a] == score[b] and o_seq[cand[a]] > o_seq[cand[b]])


@njit(cache=True)
def _refill(top, n_top, k, alive, in_top, by_rank, head, c_exp, t):
    """Append the best live candidates outside the top until it holds k (or no candidate is left),
    reading the candidates in rank order (`by_rank`): the top holds the best of the live ones, so
    the first live one outside it is the next best. Those at the front that have left the window
    (dead, expired by t) never come back and are passed for good; returns (size, new head)."""
    while head < len(by_rank) and not alive[by_rank[head]] and c_exp[by_rank[head]] <= t:
        head += 1
    p = head
    while n_top < k and p < len(by_rank):
        c = by_rank[p]
        if alive[c] and not in_top[c]:
            top[n_top] = c
            in_top[c] = True
            n_top += 1
        p += 1
    return n_top, head


@njit(cache=True)
def _scores(cand, qx, qy, alpha, q_terms, q_w, o_x, o_y, o_off, o_val, o_w, max_dist):
    """Each candidate message's score for the subscription at (qx, qy) with weighted terms q_terms,
    q_w: alpha x its spatial similarity + (1 - alpha) x the cosine of the two term vectors."""
    n = len(cand)
    score = np.empty(n)
    for c in range(n):
        o = cand[c]
        ddx = o_x[o] - qx
        ddy = o_y[o] - qy
        ssim = 1.0 - math.sqrt(ddx * ddx + ddy * ddy) / max_dist
        tsim = 0.0  # both term lists ascend: walk them together, summing in ascending term order
        a, b = 0, o_off[o]
        while a < len(q_terms) and b < o_off[o + 1]:
            if q_terms[a] == o_val[b]:
                tsim += q_w[a] * o_w[b]
                a += 1
                b += 1
            elif q_terms[a] < o_val[b]:
                a += 1
            else:
                b += 1
        score[c] = alpha * ssim + (1.0 - alpha) * tsim
    return score


@njit(cache=True)
def _timeline(cand, o_seq, o_exp, start, end):
    """The candidates' arrivals (c) and expiries (-1 - c) strictly inside the life (start, end), and
    their order by time, an expiry before an arrival at the same seq: (times, events, count, order)."""
    n = len(cand)
    ev_t = np.empty(2 * n, np.int64)
    ev_c = np.empty(2 * n, np.int64)
    m = 0
    for c in range(n):
        for what in range(2):
            t = o_exp[cand[c]] if what == 0 else o_seq[cand[c]]
            if start < t < end:
                ev_t[m] = t
                ev_c[m] = c if what == 1 else -1 - c
                m += 1
    order = np.argsort(ev_t[:m] * 2 + (ev_c[:m] >= 0), kind="mergesort")
    return ev_t, ev_c, m, order


@njit(cache=True, nogil=True)
def _replay(start, end, k, qx, qy, alpha, q_terms, q_w, cand, o_seq, o_exp, o_x, o_y, o_off, o_val, o_w, max_dist):
    """Entries (candidate, trigger seq) of one subscription live over (start, end). The top-k is
    kept in rank order beside a flag per candidate for the live window: an expiry leaves it and the
    best live candidate outside it (the first in the candidates' rank order) fills the place at
    once (before the seq's arrival, which then competes with that one), an arrival enters it by
    rank (pushing the k-th out, still live). After each seq's changes the members not in the top-k
    before are its entries."""
    n = len(cand)
    score = _scores(cand, qx, qy, alpha, q_terms, q_w, o_x, o_y, o_off, o_val, o_w, max_dist)
    ev_t, ev_c, m, order = _timeline(cand, o_seq, o_exp, start, end)
    alive = np.zeros(n, np.bool_)
    in_top = np.zeros(n, np.bool_)
    c_exp = np.empty(n, np.int64)
    for c in range(n):  # the window at the registration
        c_exp[c] = o_exp[cand[c]]
        alive[c] = o_seq[cand[c]] < start and c_exp[c] > start
    # every candidate in rank order: score descending, then the newer first (cand ascends in seq,
    # so a stable sort of the reversed scores puts the higher index first among equals)
    by_rank = n - 1 - np.argsort(-score[::-1], kind="mergesort")
    top = np.empty(k + 1, np.int64)  # rank order; one spare for an arrival before the k-th leaves
    n_top, head = _refill(top, 0, k, alive, in_top, by_rank, 0, c_exp, start)
    was = np.zeros(n, np.bool_)  # in the top-k before this seq
    prev = np.empty(k, np.int64)
    out_c = np.empty(k * (m + 1), np.int64)
    out_t = np.empty(len(out_c), np.int64)
    n_out = 0
    for p in range(n_top):  # the registration's entries
        out_c[n_out], out_t[n_out] = top[p], start
        n_out += 1
    e = 0
    while e < m:
        t = ev_t[order[e]]
        n_prev = n_top
        for p in range(n_top):
            prev[p] = top[p]
            was[top[p]] = True
        changed = False
        while e < m and ev_t[order[e]] == t:
            c = ev_c[order[e]]
            e += 1
            if c < 0:  # an expiry
                c = -1 - c
                alive[c] = False
                if in_top[c]:
                    p = 0
                    while top[p] != c:
                        p += 1
                    for r in range(p, n_top - 1):
                        top[r] = top[r + 1]
                    n_top -= 1
                    in_top[c] = False
                    changed = True
                    n_top, head = _refill(top, n_top, k, alive, in_top, by_rank, head, c_exp, t)  # before any arrival
            else:  # an arrival: into the top-k by rank
                alive[c] = True
                p = n_top
                while p > 0 and _ranks_above(c, top[p - 1], score, o_seq, cand):
                    p -= 1
                if p < k:
                    for r in range(n_top, p, -1):
                        top[r] = top[r - 1]
                    top[p] = c
                    in_top[c] = True
                    n_top += 1
                    if n_top > k:
                        n_top -= 1
                        in_top[top[n_top]] = False
                    changed = True
        if changed:
            for p in range(n_top):
                if not was[top[p]]:
                    out_c[n_out], out_t[n_out] = top[p], t
                    n_out += 1
        for p in range(n_prev):
            was[prev[p]] = False
    return out_c[:n_out], out_t[:n_out]


@njit(cache=True)
def _candidates(terms, term_objs, term_off, o_seq, o_exp, start, end, in_order):
    """The messages sharing a term with the subscription (its `terms`) that are in the window at
    some point of its life (start, end): arrived before `end`, leaving after `start`; ascending,
    each once. A term's messages ascend in row; when their seqs and expiries ascend with the rows
    (`in_order`: a stream in seq order with a window of |W| messages or of T seconds), those
    arrived before `end` are a prefix of its list and those leaving after `start` a suffix, both
    found by bisection; else each is checked."""
    n = 0
    for t in terms:
        n += term_off[t + 1] - term_off[t]
    out = np.empty(n, np.int64)
    n = 0
    for t in terms:
        lo, stop = term_off[t], term_off[t + 1]
        if in_order:
            a, b = lo, stop  # the first with o_seq >= end
            while a < b:
                mid = (a + b) // 2
                if o_seq[term_objs[mid]] < end:
                    a = mid + 1
                else:
                    b = mid
            stop = a
            a, b = lo, stop  # the first with o_exp > start
            while a < b:
                mid = (a + b) // 2
                if o_exp[term_objs[mid]] <= start:
                    a = mid + 1
                else:
                    b = mid
            lo = a
        for p in range(lo, stop):
            o = term_objs[p]
            if o_seq[o] < end and o_exp[o] > start:
                out[n] = o
                n += 1
    out = np.sort(out[:n])
    m = 0
    for i in range(n):  # each once
        if m == 0 or out[i] != out[m - 1]:
            out[m] = out[i]
            m += 1
    return out[:m]


@njit(cache=True, nogil=True)
def _entries(rows, ends, s_k, s_x, s_y, s_alpha, s_seq, offsets, values, o_w, term_objs, term_off, o_seq, o_exp,
             o_x, o_y, in_order, max_dist):
    """Every entry (subscription row, message row, trigger seq) of the subscriptions at `rows` (their
    deletion seqs `ends`), one `_replay` each over its `_candidates`."""
    out_s, out_o, out_t = np.empty(1024, np.int64), np.empty(1024, np.int64), np.empty(1024, np.int64)
    n_out = 0
    for i in range(len(rows)):
        r = rows[i]
        lo, hi = offsets[r], offsets[r + 1]
        terms = values[lo:hi]
        start, end = s_seq[r], ends[i]
        cand = _candidates(terms, term_objs, term_off, o_seq, o_exp, start, end, in_order)
        c, t = _replay(start, end, s_k[r], s_x[r], s_y[r], s_alpha[r], terms, o_w[lo:hi], cand, o_seq, o_exp,
                       o_x, o_y, offsets, values, o_w, max_dist)
        if n_out + len(c) > len(out_s):  # grown per subscription, outside any inner loop
            cap = max(2 * len(out_s), n_out + len(c))
            out_s, out_o, out_t = _grown(out_s, n_out, cap), _grown(out_o, n_out, cap), _grown(out_t, n_out, cap)
        for j in range(len(c)):
            out_s[n_out], out_o[n_out], out_t[n_out] = r, cand[c[j]], t[j]
            n_out += 1
    return out_s[:n_out], out_o[:n_out], out_t[:n_out]


@njit(cache=True)
def _grown(a, n, cap):
    b = np.empty(cap, a.dtype)
    b[:n] = a[:n]
    return b


def topk_oracle(events: Events) -> np.ndarray:
    kind, fam = events.kind, events.family
    is_obj = kind == OBJECT
    idf = _idf_table(events, is_obj)
    subs = np.flatnonzero((fam == TOPK) & (kind == INSERT))
    spans = np.unique(events.tau[subs])  # a time-based window: T seconds (count-based: NaN)
    timed = len(subs) > 0 and bool(np.isfinite(spans).all())
    windows = spans if timed else np.unique(events.win[subs])
    if len(windows) > 1:
        raise ValueError(f"top-k oracle: subscriptions name different windows {windows.tolist()}; a stream has one")
    window = int(windows[0]) if len(windows) and not timed else 0
    used = is_obj | ((fam == TOPK) & (kind != OBJECT))
    if used.any():
        dx = float(events.x[used].max() - events.x[used].min())
        dy = float(events.y[used].max() - events.y[used].min())
        max_dist = math.sqrt(dx * dx + dy * dy) or 1.0
    else:
        max_dist = 1.0
    objs = np.flatnonzero(is_obj)
    o_seq = np.full(len(events), INF, np.int64)
    o_exp = np.full(len(events), INF, np.int64)
    o_seq[objs] = events.seq[objs]
    if timed:  # message i leaves as the first message with ts >= ts_i + T arrives
        t = events.ts[objs]
        j = np.searchsorted(t, t + float(windows[0]), side="left")
        o_exp[objs[j < len(objs)]] = events.seq[objs[j[j < len(objs)]]]
    elif window > 0 and len(objs) > window:
        o_exp[objs[:-window]] = events.seq[objs[window:]]
    o_w = _unit_vectors(events.offsets, events.values, idf)
    # which objects hold each term
    owner = np.repeat(np.arange(len(events)), np.diff(events.offsets))
    obj_entry = is_obj[owner]
    by_term = np.argsort(events.values[obj_entry], kind="stable")
    term_objs = owner[obj_entry][by_term]
    term_off = np.searchsorted(events.values[obj_entry][by_term], np.arange(len(idf) + 1))
    deleted = {int(i): int(s) for i, s in zip(events.id[kind == DELETE], events.seq[kind == DELETE])}
    ends = np.array([deleted.get(q, INF) for q in events.id[subs].tolist()], np.int64)
    # seqs and expiries ascending with the rows: a term's candidates over a life are a range of its list
    in_order = bool((np.diff(o_seq[objs]) > 0).all() and (np.diff(o_exp[objs]) >= 0).all())
    term_objs, term_off = term_objs.astype(np.int64), term_off.astype(np.int64)
    s_k, s_x, s_y = events.k.astype(np.int64), events.x.astype(np.float64), events.y.astype(np.float64)
    s_alpha, s_seq = events.alpha.astype(np.float64), events.seq.astype(np.int64)
    o_x, o_y = events.x.astype(np.float64), events.y.astype(np.float64)
    offsets, values = events.offsets.astype(np.int64), events.values.astype(np.int64)

    def entries(part: np.ndarray) -> np.ndarray:
        """The entry keys of the subscriptions subs[part] (a thread's share: the kernel releases the GIL)."""
        r, o, t = _entries(subs[part], ends[part], s_k, s_x, s_y, s_alpha, s_seq, offsets, values, o_w, term_objs,
                           term_off, o_seq, o_exp, o_x, o_y, in_order, max_dist)
        return entry_keys(events.id[r], events.id[o], t)

    if len(subs) == 0:
        return np.zeros(0, np.int64)
    return np.unique(np.concatenate(in_chunks(entries, len(subs), work=len(subs) * len(objs))))
