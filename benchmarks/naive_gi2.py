"""The naive GI2 a user would write in pure Python: the baseline of the worker-stream figure.

cell -> term -> list of query ids, a deleted-id set (lazy deletion), and per-event processing:
an insertion posts the query in every cell its rectangle overlaps (AND: under its least frequent
keyword, i.e. the largest term id; OR: under each keyword), a deletion marks the id, an object
probes its cell under each of its terms and verifies rectangle and keywords. Independent of
harness/families/range/gi2.py on purpose (own cell arithmetic, sets instead of sorted-run merges).
"""

from __future__ import annotations

import math

import numpy as np

from harness.core.events import AND, DELETE, INSERT, OBJECT, Events


class NaiveGI2:
    def __init__(self, extent, cells_per_side: int = 64):
        x0, y0, x1, y1 = (float(v) for v in extent)
        self.x0, self.y0 = x0, y0
        self.n = cells_per_side
        self.fx = cells_per_side / max(x1 - x0, 1e-9)
        self.fy = cells_per_side / max(y1 - y0, 1e-9)
        self.cells: dict[int, dict[int, list[int]]] = {}
        self.queries: dict[int, tuple] = {}
        self.deleted: set[int] = set()

    def _ix(self, x):
        c = math.floor((x - self.x0) * self.fx)
        return 0 if c < 0 else (self.n - 1 if c >= self.n else c)

    def _iy(self, y):
        c = math.floor((y - self.y0) * self.fy)
        return 0 if c < 0 else (self.n - 1 if c >= self.n else c)

    def insert(self, qid, xmin, ymin, xmax, ymax, terms, op):
        self.queries[qid] = (xmin, ymin, xmax, ymax, frozenset(terms), op)
        self.deleted.discard(qid)
        post = [max(terms)] if op == AND else terms
        for iy in range(self._iy(ymin), self._iy(ymax) + 1):
            for ix in range(self._ix(xmin), self._ix(xmax) + 1):
                by_term = self.cells.setdefault(iy * self.n + ix, {})
                for t in post:
                    by_term.setdefault(t, []).append(qid)

    def delete(self, qid):
        self.deleted.add(qid)

    def match(self, oid, x, y, terms):
        by_term = self.cells.get(self._iy(y) * self.n + self._ix(x))
        if not by_term:
            return []
        oset = set(terms)
        found = set()
        for t in terms:
            for qid in by_term.get(t, ()):
                if qid in self.deleted or qid in found:
                    continue
                xmin, ymin, xmax, ymax, qterms, op = self.queries[qid]
                if x < xmin or x > xmax or y < ymin or y > ymax:
                    continue
                if (qterms <= oset) if op == AND else not qterms.isdisjoint(oset):
                    found.add(qid)
        return [(qid << 32) | oid for qid in found]

    # --- whole batches ----------------------------------------------------------------------

    def restore(self, ev: Events):
        """Post every query of an insert batch (set-up, not the measured part)."""
        self.run(ev)

    def run(self, ev: Events) -> np.ndarray:
        """Process events one at a time in order; returns the result keys."""
        kind = ev.kind.tolist()
        ids = ev.id.tolist()
        x, y = ev.x.tolist(), ev.y.tolist()
        xmin, ymin, xmax, ymax = ev.xmin.tolist(), ev.ymin.tolist(), ev.xmax.tolist(), ev.ymax.tolist()
        op = ev.op.tolist()
        off = ev.offsets.tolist()
        vals = ev.values.tolist()
        out: list[int] = []
        for i, k in enumerate(kind):
            terms = vals[off[i]:off[i + 1]]
            if k == OBJECT:
                out.extend(self.match(ids[i], x[i], y[i], terms))
            elif k == INSERT:
                self.insert(ids[i], xmin[i], ymin[i], xmax[i], ymax[i], terms, op[i])
            elif k == DELETE:
                self.delete(ids[i])
        return np.asarray(out, np.int64)
