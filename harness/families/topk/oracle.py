"""Brute-force top-k over a sliding window, sharing no code with the index or the merger.

Per subscription, the window is replayed event by event: at its registration its top-k is the k
best window messages sharing a keyword with it; after every later event (an arrival, the expiry
it causes) the top-k is recomputed from a list of all live candidates kept in rank order, and
every member that was not in the top-k before the event is an entry with that event's seq as
trigger. The window is count-based and read from the subscriptions' own `win` (|W|): message i
leaves when message i + |W| arrives. Scores follow Skype's Eq. 1 written out in plain Python with
the weights of scoring.py's docstring (smoothed idf rounded to 2^-20, L2-normalised sets, sums in
ascending term order).
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from harness.core.events import DELETE, INSERT, OBJECT, TOPK, Events
from harness.families.topk.keys import entry_keys


def _idf(events: Events) -> dict[int, float]:
    n_docs = 0
    df: dict[int, int] = {}
    for r in range(len(events)):
        if events.kind[r] != OBJECT:
            continue
        n_docs += 1
        for t in events.values[events.offsets[r]:events.offsets[r + 1]].tolist():
            df[t] = df.get(t, 0) + 1
    terms = set(events.values.tolist())
    return {t: math.floor(math.log(1.0 + (n_docs + 1.0) / (df.get(t, 0) + 1.0)) * 2.0 ** 20 + 0.5) / 2.0 ** 20
            for t in terms}


def _vector(terms: list[int], idf: dict[int, float]) -> dict[int, float]:
    total = 0.0
    for t in terms:
        total += idf[t] * idf[t]
    norm = math.sqrt(total)
    return {t: (idf[t] / norm if norm > 0.0 else 0.0) for t in terms}


def topk_oracle(events: Events) -> np.ndarray:
    n = len(events)
    idf = _idf(events)
    kinds, fams = events.kind.tolist(), events.family.tolist()
    xs, ys, seqs, ids = events.x.tolist(), events.y.tolist(), events.seq.tolist(), events.id.tolist()
    terms = [events.values[events.offsets[r]:events.offsets[r + 1]].tolist() for r in range(n)]
    used = [r for r in range(n) if kinds[r] == OBJECT or (fams[r] == TOPK and kinds[r] != OBJECT)]
    if used:
        dx = max(xs[r] for r in used) - min(xs[r] for r in used)
        dy = max(ys[r] for r in used) - min(ys[r] for r in used)
        max_dist = math.sqrt(dx * dx + dy * dy) or 1.0
    else:
        max_dist = 1.0
    objects = [r for r in range(n) if kinds[r] == OBJECT]
    windows = {float(events.win[r]) for r in range(n) if fams[r] == TOPK and kinds[r] == INSERT}
    if len(windows) > 1:
        raise ValueError(f"top-k oracle: subscriptions name different windows {sorted(windows)}; one stream has one")
    window = int(windows.pop()) if windows else 0
    # each object's arrival and expiry seq: message i leaves when message i + |W| arrives
    arrive = [seqs[r] for r in objects]
    expire = [arrive[i + window] if i + window < len(objects) else math.inf for i in range(len(objects))]
    vec = {}
    out_q, out_o, out_t = [], [], []
    for r in range(n):
        if fams[r] != TOPK or kinds[r] != INSERT:
            continue
        qid, start = ids[r], seqs[r]
        end = next((seqs[d] for d in range(r + 1, n) if kinds[d] == DELETE and ids[d] == qid), math.inf)
        k, alpha = int(events.k[r]), float(events.alpha[r])
        sv = _vector(terms[r], idf)
        mine = set(terms[r])

        def score(i):
            o = objects[i]
            if o not in vec:
                vec[o] = _vector(terms[o], idf)
            ddx, ddy = xs[o] - xs[r], ys[o] - ys[r]
            ssim = 1.0 - math.sqrt(ddx * ddx + ddy * ddy) / max_dist
            tsim = 0.0
            for t in sorted(mine & set(terms[o])):
                tsim += sv[t] * vec[o][t]
            return alpha * ssim + (1.0 - alpha) * tsim

        def shares(i):
            return bool(mine & set(terms[objects[i]]))

        live = []  # (-score, -seq, i): rank order
        for i in range(len(objects)):
            if arrive[i] < start and expire[i] > start and shares(i):
                bisect.insort(live, (-score(i), -arrive[i], i))
        top = {e[2] for e in live[:k]}
        for i in top:
            out_q.append(qid), out_o.append(ids[objects[i]]), out_t.append(start)
        # later events: each object's arrival, with the expiry it causes at the same seq
        for i in range(len(objects)):
            t = arrive[i]
            if t <= start:
                continue
            if t >= end:
                break
            gone = i - window
            if window and gone >= 0 and shares(gone):
                entry = (-score(gone), -arrive[gone], gone)
                pos = bisect.bisect_left(live, entry)
                if pos < len(live) and live[pos] == entry:
                    live.pop(pos)
            if shares(i):
                bisect.insort(live, (-score(i), -arrive[i], i))
            now = {e[2] for e in live[:k]}
            for j in now - top:
                out_q.append(qid), out_o.append(ids[objects[j]]), out_t.append(t)
            top = now
    return np.unique(entry_keys(np.array(out_q, np.int64), np.array(out_o, np.int64), np.array(out_t, np.int64)))
