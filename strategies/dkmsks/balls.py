"""The ball of a kNN subscription over O_init (DkM-SKS Sec. 3.2 and Eq. 7): the main server
computes a new subscription's k nearest O_init objects satisfying its keywords, and the rectangle
enclosing that ball is its region R_n for the cost models (Eq. 2-7).

One scan per keyword channel of `ObjectStats` (the objects holding the keyword): the k nearest of
the union of the channels is the OR kNN (an object missing from its keyword's k nearest has k
nearer objects holding that keyword); AND scans its least frequent keyword's channel and checks
the other keywords. Fewer than k qualifying objects: the ball is unbounded (the rectangle given).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.events import AND, KNN, Events
from harness.families.knn.geometry import narrowed_to_balls
from strategies.dkmsks.counts import ObjectStats


@njit(cache=True)
def _has(values, lo, hi, t):
    for j in range(lo, hi):
        if values[j] == t:
            return True
    return False


@njit(cache=True)
def _kth_d2(cx, cy, k, kw_off, kw_val, op, chan_off, px, py, pobj, obj_off, obj_val, term_count):
    """Per subscription the squared distance of its k-th nearest qualifying object (inf if fewer)."""
    n = len(cx)
    out = np.full(n, np.inf)
    for i in range(n):
        kk = max(k[i], 1)
        best = np.full(kk, np.inf)
        ids = np.full(kk, -1, np.int64)
        have = 0
        lo_t, hi_t = kw_off[i], kw_off[i + 1]
        if hi_t == lo_t:
            continue
        rare = kw_val[lo_t]
        for j in range(lo_t, hi_t):  # AND: the keyword fewest objects hold
            t = kw_val[j]
            if (t < len(term_count) and term_count[t] < term_count[rare]) or rare >= len(term_count):
                rare = t
        for j in range(lo_t, hi_t):
            t = kw_val[j]
            if op[i] == AND and t != rare:
                continue
            if t + 1 >= len(chan_off) - 1:
                continue
            for p in range(chan_off[t + 1], chan_off[t + 2]):
                o = pobj[p]
                if op[i] == AND:
                    ok = True
                    for q in range(lo_t, hi_t):
                        if kw_val[q] != t and not _has(obj_val, obj_off[o], obj_off[o + 1], kw_val[q]):
                            ok = False
                            break
                    if not ok:
                        continue
                dx = px[p] - cx[i]
                dy = py[p] - cy[i]
                d2 = dx * dx + dy * dy
                if have == kk and d2 >= best[kk - 1]:
                    continue
                dup = False
                for m in range(have):
                    if ids[m] == o:
                        dup = True
                        break
                if dup:
                    continue
                pos = have if have < kk else kk - 1
                while pos > 0 and best[pos - 1] > d2:
                    best[pos] = best[pos - 1]
                    ids[pos] = ids[pos - 1]
                    pos -= 1
                best[pos] = d2
                ids[pos] = o
                if have < kk:
                    have += 1
        if have == kk:
            out[i] = best[kk - 1]
    return out


def with_balls(ev: Events, rows: np.ndarray, stats: ObjectStats) -> Events:
    """`ev` with the rectangle of every kNN subscription among `rows` narrowed to its ball over
    O_init (the others untouched): what Eq. 2-7 take as a kNN subscription's region."""
    rows = np.asarray(rows, np.int64)
    knn = rows[ev.family[rows] == KNN]
    if len(knn) == 0:
        return ev
    kw_off = np.r_[0, np.cumsum(np.diff(ev.offsets)[knn])].astype(np.int64)
    kw_val = np.concatenate([ev.values[ev.offsets[r]:ev.offsets[r + 1]] for r in knn]).astype(np.int64) \
        if len(knn) else np.zeros(0, np.int64)
    d2 = _kth_d2(ev.x[knn], ev.y[knn], ev.k[knn].astype(np.int64), kw_off, kw_val, ev.op[knn], stats.chan_off,
                 stats.px, stats.py, stats.pobj, stats.obj_off, np.asarray(stats.obj_val, np.int64),
                 stats.term_count)
    bounded = np.isfinite(d2)
    return narrowed_to_balls(ev, knn[bounded], np.sqrt(d2[bounded]))
