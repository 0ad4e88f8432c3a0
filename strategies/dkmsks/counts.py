"""Exact object counts over O_init (the sample's objects), from which DkM-SKS's cost model takes
its probabilities (Tsuruoka et al., arXiv 2101.12417, Sec. 3-4): P(lambda) = |O_lambda| / |O_init|,
P(R) = |O_R| / |O_init| and P(R, lambda) = |O_{R,lambda}| / |O_init|. The costs keep the counts as
integer numerators so that sums are exact and a child subset never costs more than its parent
(Algorithm 2's tree order relies on it).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.events import Events, csr_take
from harness.core import kernels
from harness.core.kernels import lower_bound as _lower, upper_bound as _upper


@njit(cache=True)
def _scan_rects(xmin, ymin, xmax, ymax, chan, chan_off, row, px, py, gy0, gy1, ich, ny, ptr, listed):
    """|O_R| (chan -1) or |O_{R,lambda}| (chan lambda) per closed rectangle, exactly. Within the
    channel's segment the points are sorted by (horizontal strip, x): a strip wholly inside R's
    y-range is counted by two binary searches on x, a border strip by testing y over its x-range.
    Given `listed` (not None), rectangle i's points are also written to listed[ptr[i]:] as
    positions into the sorted arrays; numba compiles the counting form (None) without that branch
    (a shared helper function measured 15% slower)."""
    out = np.zeros(len(xmin), np.int64)
    for i in range(len(xmin)):
        ch = chan[i] + 1
        if ch < 0 or ch >= len(chan_off) - 1:
            continue
        if not (xmin[i] <= xmax[i] and ymin[i] <= ymax[i]):  # empty or NaN
            continue
        b = max(ymin[i], gy0)
        d = min(ymax[i], gy1)
        if b > d:
            continue
        lo, hi = chan_off[ch], chan_off[ch + 1]
        iy0 = kernels.axis_cell(b, gy0, ich, ny)
        iy1 = kernels.axis_cell(d, gy0, ich, ny)
        s0 = _lower(row, lo, hi, iy0)
        total = 0
        for iy in range(iy0, iy1 + 1):
            s1 = _lower(row, s0, hi, iy + 1)
            a = _lower(px, s0, s1, xmin[i])
            e = _upper(px, a, s1, xmax[i])
            if listed is None and iy0 < iy < iy1:
                total += e - a
            else:
                for j in range(a, e):
                    if py[j] >= ymin[i] and py[j] <= ymax[i]:
                        if listed is not None:
                            listed[ptr[i] + total] = j
                        total += 1
            s0 = s1
        out[i] = total
    return out


def rect_columns(rects: np.ndarray) -> list[np.ndarray]:
    """The columns xmin, ymin, xmax, ymax of (n, 4) rectangles, each contiguous (kernel arguments)."""
    rects = np.asarray(rects, np.float64).reshape(-1, 4)
    return [np.ascontiguousarray(rects[:, j]) for j in range(4)]


class ObjectStats:
    """O_init (the sample's objects) summarised for the paper's probabilities: per-term counts
    |O_lambda| and exact rectangle counts |O_R|, |O_{R,lambda}|. Points are sorted by (channel,
    horizontal strip, x), channel 0 = every object and lambda + 1 = the objects holding lambda, so
    a count costs a few binary searches per strip its rectangle spans plus the points of its two
    border strips that lie in its x-range."""

    def __init__(self, x: np.ndarray, y: np.ndarray, offsets: np.ndarray, values: np.ndarray):
        x = np.asarray(x, np.float64)
        y = np.asarray(y, np.float64)
        self.n = len(x)
        values = np.asarray(values, np.int64)
        self.term_count = np.bincount(values, minlength=1).astype(np.int64) if len(values) else np.zeros(1, np.int64)
        self.y0 = float(y.min()) if self.n else 0.0
        self.y1 = float(y.max()) if self.n else 0.0
        self.ny = int(np.clip(np.sqrt(self.n) / 4.0, 1, 1024))  # strips: measured best near sqrt(n)/4
        self.ich = self.ny / max(self.y1 - self.y0, 1e-9)
        rows = kernels.points_to_cells(x, y, 0.0, self.y0, 1.0, self.ich, 1, self.ny)  # nx = 1: the strip
        lengths = np.diff(np.asarray(offsets, np.int64))
        obj = np.concatenate([np.arange(self.n), np.repeat(np.arange(self.n), lengths)])
        chan = np.concatenate([np.zeros(self.n, np.int64), values + 1])
        order = np.lexsort((x[obj], rows[obj], chan))
        self.row = rows[obj][order]
        self.px = x[obj][order]
        self.py = y[obj][order]
        self.obj0 = obj[order][:self.n]  # the object of each channel-0 point (channel 0 sorts first)
        self.pobj = obj[order]  # the object of every point (kNN balls: one object, several channels)
        self.obj_off = np.asarray(offsets, np.int64)  # the objects' terms (kNN balls: AND checks)
        self.obj_val = values
        self.chan_off = np.zeros(int(chan.max(initial=0)) + 2, np.int64)  # channel -> its segment
        np.cumsum(np.bincount(chan, minlength=len(self.chan_off) - 1), out=self.chan_off[1:])

    @classmethod
    def from_events(cls, ev: Events, rows: np.ndarray) -> ObjectStats:
        off, val = csr_take(ev.offsets, ev.values, rows)
        return cls(ev.x[rows], ev.y[rows], off, val)

    def term_counts(self, terms: np.ndarray) -> np.ndarray:
        """|O_lambda| per term (0 for a term no sample object holds)."""
        return term_counts(self.term_count, terms)

    def rect_counts(self, rects: np.ndarray, terms: np.ndarray | None = None) -> np.ndarray:
        """|O_R| per rectangle, or |O_{R,lambda}| when `terms` gives one lambda per rectangle."""
        cols = rect_columns(rects)
        chan = np.full(len(cols[0]), -1, np.int64) if terms is None else np.asarray(terms, np.int64)
        return self._scan(cols, chan, None, None)

    def objects_in(self, rects: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ptr, objects): the indices of O_init's objects in each rectangle, rectangle i's at
        objects[ptr[i]:ptr[i + 1]] (in strip, x order)."""
        cols = rect_columns(rects)
        chan = np.full(len(cols[0]), -1, np.int64)
        ptr = np.zeros(len(chan) + 1, np.int64)
        np.cumsum(self._scan(cols, chan, None, None), out=ptr[1:])
        listed = np.empty(ptr[-1], np.int64)
        self._scan(cols, chan, ptr, listed)
        return ptr, self.obj0[listed]

    def _scan(self, cols, chan, ptr, listed) -> np.ndarray:
        return _scan_rects(*cols, chan, self.chan_off, self.row, self.px, self.py, self.y0, self.y1, self.ich, self.ny,
                           ptr, listed)

    def p(self, counts) -> np.ndarray:
        """Counts to probabilities over O_init (0 when O_init is empty)."""
        return np.asarray(counts, np.float64) / max(self.n, 1)


def term_counts(term_count: np.ndarray, terms: np.ndarray) -> np.ndarray:
    """|O_lambda| per term from a bincount of O_init's terms (0 for a term no object holds)."""
    terms = np.asarray(terms, np.int64)
    ok = (terms >= 0) & (terms < len(term_count))
    return np.where(ok, term_count[np.where(ok, terms, 0)], 0)
