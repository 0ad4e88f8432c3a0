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
only because a Python loop over every (subscription, message) takes minutes at test-run sizes.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from harness.core.events import DELETE, INSERT, OBJECT, TOPK, Events
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


@njit(cache=True)
def _insert(live, n_live, c, score, o_seq, cand):
    """Candidate c into the rank-ordered live list (score desc, then the newer message first)."""
    p = n_live
    while p > 0 and (score[live[p - 1]] < score[c] or (score[live[p - 1]] == score[c]
                                                       and o_seq[cand[live[p - 1]]] < o_seq[cand[c]])):
        p -= 1
    for r in range(n_live, p, -1):
        live[r] = live[r - 1]
    live[p] = c
    return n_live + 1


@njit(cache=True)
def _replay(start, end, k, qx, qy, alpha, q_terms, q_w, cand, o_seq, o_exp, o_x, o_y, o_off, o_val, o_w, max_dist):
    """Entries (candidate, trigger seq) of one subscription live over (start, end)."""
    n = len(cand)
    score = np.empty(n)
    for c in range(n):
        o = cand[c]
        ddx = o_x[o] - qx
        ddy = o_y[o] - qy
        ssim = 1.0 - math.sqrt(ddx * ddx + ddy * ddy) / max_dist
        tsim = 0.0
        for a in range(len(q_terms)):
            for b in range(o_off[o], o_off[o + 1]):
                if o_val[b] == q_terms[a]:
                    tsim += q_w[a] * o_w[b]
        score[c] = alpha * ssim + (1.0 - alpha) * tsim
    # the candidates' arrivals and expiries inside the life, by time (an expiry before an arrival)
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
    live = np.empty(n, np.int64)  # candidate indices in rank order
    n_live = 0
    for c in range(n):  # the window at the registration
        o = cand[c]
        if o_seq[o] < start and o_exp[o] > start:
            n_live = _insert(live, n_live, c, score, o_seq, cand)
    top_old = np.full(k, -1, np.int64)
    out_c = np.empty(k * (m + 1), np.int64)
    out_t = np.empty(len(out_c), np.int64)
    n_out = 0
    e = 0
    t = start
    while True:
        for p in range(min(k, n_live)):
            c = live[p]
            fresh = True
            for r in range(k):
                if top_old[r] == c:
                    fresh = False
                    break
            if fresh:
                out_c[n_out] = c
                out_t[n_out] = t
                n_out += 1
        top_old[:] = -1
        for p in range(min(k, n_live)):
            top_old[p] = live[p]
        if e == m:
            break
        t = ev_t[order[e]]
        while e < m and ev_t[order[e]] == t:
            c = ev_c[order[e]]
            if c < 0:  # an expiry
                c = -1 - c
                for p in range(n_live):
                    if live[p] == c:
                        for r in range(p, n_live - 1):
                            live[r] = live[r + 1]
                        n_live -= 1
                        break
            else:
                n_live = _insert(live, n_live, c, score, o_seq, cand)
            e += 1
    return out_c[:n_out], out_t[:n_out]


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
    out_q, out_o, out_t = [], [], []
    for r in subs.tolist():
        lo, hi = events.offsets[r], events.offsets[r + 1]
        terms = events.values[lo:hi]
        cand = np.unique(np.concatenate([term_objs[term_off[t]:term_off[t + 1]] for t in terms.tolist()]
                                        or [np.zeros(0, np.int64)]))
        qid = int(events.id[r])
        start, end = int(events.seq[r]), deleted.get(qid, INF)
        cand = cand[(o_seq[cand] < end) & (o_exp[cand] > start)]  # in the window at some point of its life
        c, t = _replay(start, end, int(events.k[r]), float(events.x[r]),
                       float(events.y[r]), float(events.alpha[r]), terms, o_w[lo:hi], cand, o_seq, o_exp, events.x,
                       events.y, events.offsets, events.values, o_w, max_dist)
        out_q.append(np.full(len(c), qid, np.int64))
        out_o.append(events.id[cand[c]])
        out_t.append(t)
    if not out_q:
        return np.zeros(0, np.int64)
    return np.unique(entry_keys(np.concatenate(out_q), np.concatenate(out_o), np.concatenate(out_t)))
