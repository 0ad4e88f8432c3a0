"""The frequent_terms family's brute-force oracle: STQ and CTQ answers from the whole stream, sharing no code
with the object store, the index or the merger (every visible object is checked against the
rectangle; a CTQ's reports are derived here from its registration, not read from the report
events the stream carries).

STQ q (kind SNAPSHOT, `step` NaN): the objects with seq < q.seq, ts > q.ts - q.tau, inside q's
rectangle; each counts each of its (distinct) terms once; the top k by (count desc, term asc).
CTQ q (kind INSERT: `step` = delta, `win` = T, `tau` = lifetime): report j = 1, 2, ... at
t_j = q.ts + j * delta while t_j <= q.ts + tau, t_j <= the stream's last event time, and t_j is
before the CTQ's deletion if it has one; report j counts the objects with ts in (t_j - T, t_j].
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.events import DELETE, INSERT, OBJECT, SNAPSHOT, TERMS, Events, term_keys


def ctq_report_times(t_reg: float, step: float, lifetime: float, last_ts: float, deleted_at: float) -> list[float]:
    """The report times of one CTQ (the module docstring's rule)."""
    out, j = [], 1
    while True:
        t = t_reg + j * step
        if t > t_reg + lifetime or t > last_ts or t >= deleted_at:
            return out
        out.append(t)
        j += 1


@njit(cache=True)
def _counts(first, last, xmin, ymin, xmax, ymax, o_x, o_y, o_off, o_val, vocab):
    """Per ask i, the term counts of objects first[i]..last[i] (inclusive) inside its rectangle:
    rows (ask, term, count)."""
    count = np.zeros(vocab, np.int64)
    out_a = np.empty(64, np.int64)
    out_t = np.empty(64, np.int64)
    out_c = np.empty(64, np.int64)
    n = 0
    for i in range(len(first)):
        for p in range(first[i], last[i] + 1):
            if xmin[i] <= o_x[p] <= xmax[i] and ymin[i] <= o_y[p] <= ymax[i]:
                for j in range(o_off[p], o_off[p + 1]):
                    count[o_val[j]] += 1
        for t in range(vocab):
            if count[t]:
                if n == len(out_a):
                    out_a = np.concatenate((out_a, np.empty(n, np.int64)))
                    out_t = np.concatenate((out_t, np.empty(n, np.int64)))
                    out_c = np.concatenate((out_c, np.empty(n, np.int64)))
                out_a[n], out_t[n], out_c[n] = i, t, count[t]
                count[t] = 0
                n += 1
    return out_a[:n], out_t[:n], out_c[:n]


def terms_oracle(stream: Events) -> np.ndarray:
    s = stream.take(np.argsort(stream.seq, kind="stable"))
    objs = np.flatnonzero(s.kind == OBJECT)
    o = s.take(objs)
    asks = []  # (qid, report, k, rect, earliest ts (exclusive), latest ts (inclusive), before seq)
    mine = s.family == TERMS
    for i in np.flatnonzero(mine & (s.kind == SNAPSHOT) & np.isnan(s.step)):
        asks.append((int(s.id[i]), 0, int(s.k[i]), i, float(s.ts[i] - s.tau[i]), float(s.ts[i]), int(s.seq[i])))
    last_ts = float(s.ts.max()) if len(s) else 0.0
    deletes: dict[int, float] = {}
    for i in np.flatnonzero(mine & (s.kind == DELETE))[::-1]:
        deletes[int(s.id[i])] = float(s.ts[i])
    never = np.iinfo(np.int64).max
    for i in np.flatnonzero(mine & (s.kind == INSERT)):
        times = ctq_report_times(float(s.ts[i]), float(s.step[i]), float(s.tau[i]), last_ts,
                                 deletes.get(int(s.id[i]), float("inf")))
        asks += [(int(s.id[i]), j, int(s.k[i]), i, t - float(s.win[i]), t, never) for j, t in enumerate(times, 1)]
    if not asks or not len(objs):
        return np.zeros(0, np.int64)
    qid, rep, k, row, after, upto, before = (np.array(c) for c in zip(*asks))
    # the objects in each ask's time range, in seq order: ts in (after, upto] and seq < before
    first = np.searchsorted(o.ts, after, side="right")
    last = np.minimum(np.searchsorted(o.ts, upto, side="right"), np.searchsorted(o.seq, before)) - 1
    vocab = int(o.values.max()) + 1 if len(o.values) else 1
    a, term, count = _counts(first, last, s.xmin[row], s.ymin[row], s.xmax[row], s.ymax[row], o.x, o.y, o.offsets,
                             o.values, vocab)
    order = np.lexsort((term, -count, a))
    a, term, count = a[order], term[order], count[order]
    start = np.flatnonzero(np.r_[True, a[1:] != a[:-1]]) if len(a) else np.zeros(0, np.int64)
    rank = np.arange(len(a)) - np.repeat(start, np.diff(np.r_[start, len(a)]))
    keep = rank < np.maximum(k[a], 1)
    return np.unique(term_keys(qid[a][keep], rep[a][keep], term[keep], count[keep]))
