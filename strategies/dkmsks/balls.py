"""The ball of a kNN subscription over O_init (DkM-SKS Sec. 3.2 and Eq. 7): the main server
computes a new subscription's k nearest O_init objects satisfying its keywords, and the rectangle
enclosing that ball is its region R_n for the cost models (Eq. 2-7).

A ring search per keyword channel of `ObjectStats` (the objects holding the keyword, sorted by
strip and x): the k nearest of the union of the channels is the OR kNN (an object missing from its keyword's k nearest has k
nearer objects holding that keyword); AND scans its least frequent keyword's channel and checks
the other keywords. Fewer than k qualifying objects: the ball is unbounded (the rectangle given).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.events import AND, KNN, Events, csr_take
from harness.core.kernels import axis_cell, lower_bound, upper_bound
from harness.families.knn.geometry import narrowed_to_balls
from strategies.dkmsks.counts import ObjectStats


@njit(cache=True)
def _has(values, lo, hi, t):
    for j in range(lo, hi):
        if values[j] == t:
            return True
    return False


@njit(cache=True, inline="always")
def _offer(o, d2, best, ids, have, kk):
    """Offer object o at d2 to the sorted k-best list; returns the new fill."""
    if have == kk and d2 >= best[kk - 1]:
        return have
    for m in range(have):
        if ids[m] == o:  # OR: the same object through another of its keywords' channels
            return have
    pos = have if have < kk else kk - 1
    while pos > 0 and best[pos - 1] > d2:
        best[pos] = best[pos - 1]
        ids[pos] = ids[pos - 1]
        pos -= 1
    best[pos] = d2
    ids[pos] = o
    return have + 1 if have < kk else have


@njit(cache=True, inline="always")
def _qualifies(o, t, op, kw_val, lo_t, hi_t, obj_off, obj_val):
    """OR: any channel's object qualifies; AND: the object must hold every other keyword too."""
    if op != AND:
        return True
    for q in range(lo_t, hi_t):
        if kw_val[q] != t and not _has(obj_val, obj_off[o], obj_off[o + 1], kw_val[q]):
            return False
    return True


@njit(cache=True)
def _kth_d2(cx, cy, k, kw_off, kw_val, op, chan_off, row, px, py, pobj, obj_off, obj_val, term_count,
            y0, ich, ny):
    """Per subscription the squared distance of its k-th nearest qualifying object (inf if fewer).

    A ring search per keyword channel over ObjectStats' (channel, strip, x) order: the query's
    strip first, then strips outward while their vertical gap is inside the current k-th distance;
    in a strip, outward from the query's x while the horizontal gap is. The k-best list is shared
    by the channels, so a later channel starts with the earlier ones' bound."""
    n = len(cx)
    out = np.full(n, np.inf)
    h = 1.0 / ich
    margin = 1e-9 * (abs(y0) + ny * h + h)  # strip edges computed here vs floor() in points_to_cells
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
        r0 = axis_cell(cy[i], y0, ich, ny)
        for j in range(lo_t, hi_t):
            t = kw_val[j]
            if op[i] == AND and t != rare:
                continue
            if t + 1 >= len(chan_off) - 1:
                continue
            a, b = chan_off[t + 1], chan_off[t + 2]
            up, dn = r0, r0 - 1  # the next strip above (r0 itself first) and below
            while up < ny or dn >= 0:
                gap_up = np.inf if up >= ny else (0.0 if up == r0 else max(0.0, y0 + up * h - cy[i] - margin))
                gap_dn = np.inf if dn < 0 else max(0.0, cy[i] - (y0 + (dn + 1) * h) - margin)
                if gap_up <= gap_dn:
                    r, gap = up, gap_up
                    up += 1
                else:
                    r, gap = dn, gap_dn
                    dn -= 1
                if have == kk and gap * gap >= best[kk - 1]:
                    break  # the nearer of the two next strips is already outside the ball
                s = lower_bound(row, a, b, r)
                e = upper_bound(row, s, b, r)
                p = lower_bound(px, s, e, cx[i])
                for q in range(p, e):
                    dx = px[q] - cx[i]
                    if have == kk and dx * dx >= best[kk - 1]:
                        break
                    o = pobj[q]
                    if _qualifies(o, t, op[i], kw_val, lo_t, hi_t, obj_off, obj_val):
                        dy = py[q] - cy[i]
                        have = _offer(o, dx * dx + dy * dy, best, ids, have, kk)
                for q in range(p - 1, s - 1, -1):
                    dx = px[q] - cx[i]
                    if have == kk and dx * dx >= best[kk - 1]:
                        break
                    o = pobj[q]
                    if _qualifies(o, t, op[i], kw_val, lo_t, hi_t, obj_off, obj_val):
                        dy = py[q] - cy[i]
                        have = _offer(o, dx * dx + dy * dy, best, ids, have, kk)
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
    kw_off, kw_val = csr_take(ev.offsets, ev.values, knn)
    d2 = _kth_d2(ev.x[knn], ev.y[knn], ev.k[knn].astype(np.int64), np.asarray(kw_off, np.int64),
                 np.asarray(kw_val, np.int64), ev.op[knn], stats.chan_off,
                 stats.row, stats.px, stats.py, stats.pobj, stats.obj_off, np.asarray(stats.obj_val, np.int64),
                 stats.term_count, stats.y0, stats.ich, stats.ny)
    bounded = np.isfinite(d2)
    return narrowed_to_balls(ev, knn[bounded], np.sqrt(d2[bounded]))
