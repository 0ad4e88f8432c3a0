"""The terms family's brute-force oracle: STQ and CTQ answers from the whole stream, sharing no code
with the object store, the index or the merger (plain loops over objects; a CTQ's reports are
derived here from its registration, not read from the report events the stream carries).

STQ q (kind SNAPSHOT, `step` NaN): the objects with seq < q.seq, ts > q.ts - q.tau, inside q's
rectangle; each counts each of its (distinct) terms once; the top k by (count desc, term asc).
CTQ q (kind INSERT: `step` = delta, `win` = T, `tau` = lifetime): report j = 1, 2, ... at
t_j = q.ts + j * delta while t_j <= q.ts + tau, t_j <= the stream's last event time, and t_j is
before the CTQ's deletion if it has one; report j counts the objects with ts in (t_j - T, t_j].
"""

from __future__ import annotations

from collections import Counter

import numpy as np

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


def _top(counter: Counter, k: int) -> list[tuple[int, int]]:
    return sorted(counter.items(), key=lambda tc: (-tc[1], tc[0]))[:max(k, 1)]


def _count(objs: list, rect, keep) -> Counter:
    xmin, ymin, xmax, ymax = rect
    c: Counter = Counter()
    for seq, ts, x, y, terms in objs:
        if keep(seq, ts) and xmin <= x <= xmax and ymin <= y <= ymax:
            c.update(set(terms))
    return c


def terms_oracle(stream: Events) -> np.ndarray:
    s = stream.take(np.argsort(stream.seq, kind="stable"))
    objs = [(int(s.seq[i]), float(s.ts[i]), float(s.x[i]), float(s.y[i]),
             s.values[s.offsets[i]:s.offsets[i + 1]].tolist()) for i in np.flatnonzero(s.kind == OBJECT)]
    rows: list[tuple[int, int, int, int]] = []
    mine = s.family == TERMS
    for i in np.flatnonzero(mine & (s.kind == SNAPSHOT) & np.isnan(s.step)):
        rect = (s.xmin[i], s.ymin[i], s.xmax[i], s.ymax[i])
        seq_q, t_q, tau = int(s.seq[i]), float(s.ts[i]), float(s.tau[i])
        counts = _count(objs, rect, lambda seq, ts: seq < seq_q and ts > t_q - tau)
        rows += [(int(s.id[i]), 0, t, c) for t, c in _top(counts, int(s.k[i]))]
    last_ts = float(s.ts.max()) if len(s) else 0.0
    deletes = {int(s.id[i]): float(s.ts[i]) for i in np.flatnonzero(mine & (s.kind == DELETE))[::-1]}
    for i in np.flatnonzero(mine & (s.kind == INSERT)):
        qid, rect, window = int(s.id[i]), (s.xmin[i], s.ymin[i], s.xmax[i], s.ymax[i]), float(s.win[i])
        times = ctq_report_times(float(s.ts[i]), float(s.step[i]), float(s.tau[i]), last_ts,
                                 deletes.get(qid, float("inf")))
        for j, t in enumerate(times, start=1):
            counts = _count(objs, rect, lambda seq, ts: t - window < ts <= t)
            rows += [(qid, j, term, c) for term, c in _top(counts, int(s.k[i]))]
    if not rows:
        return np.zeros(0, np.int64)
    q, r, t, c = (np.array(col, np.int64) for col in zip(*rows))
    return np.unique(term_keys(q, r, t, c))
