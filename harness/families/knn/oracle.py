"""TEMPORARY placeholder oracle (the lead's naive loop) until the independent oracle lands."""

from __future__ import annotations

import numpy as np

from harness.core.events import AND, DELETE, INSERT, KNN, OBJECT, Events


def knn_oracle(ev: Events) -> np.ndarray:
    keys = []
    objs = np.flatnonzero(ev.kind == OBJECT)
    for i in np.flatnonzero((ev.kind == INSERT) & (ev.family == KNN)):
        q = int(ev.id[i]); k = int(ev.k[i]); qt = set(ev.values[ev.offsets[i]:ev.offsets[i + 1]].tolist())
        dels = np.flatnonzero((ev.kind == DELETE) & (ev.id == q) & (ev.seq > ev.seq[i]))
        end = ev.seq[dels[0]] if len(dels) else 1 << 62
        A = []
        for o in objs[(ev.seq[objs] > ev.seq[i]) & (ev.seq[objs] < end)]:
            ot = set(ev.values[ev.offsets[o]:ev.offsets[o + 1]].tolist())
            if not (qt <= ot if ev.op[i] == AND else bool(qt & ot)):
                continue
            dx = ev.x[o] - ev.x[i]; dy = ev.y[o] - ev.y[i]; d2 = dx * dx + dy * dy
            if len(A) < k or d2 < A[-1][0]:
                A.append((d2, int(ev.seq[o]))); A.sort(); A = A[:k]
                keys.append((q << 32) | int(ev.id[o]))
    return np.unique(np.array(keys, np.int64))
