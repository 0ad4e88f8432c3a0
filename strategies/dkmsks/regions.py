"""Subscription regions, and the two lookups DkM-SKS makes for a subscription s_n arriving after
the fit (Tsuruoka et al., arXiv 2101.12417, Sec. 4.4): Eq. (7), the subset whose R overlaps s_n's
region most (RegionIndex), and Eq. (5) under that R* (RegionTerms). Both are built once at the fit
so that routing time pays a few cell scans and binary searches per subscription, not strip counts.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.events import Events, csr_take
from harness.core import kernels
from harness.core.kernels import lower_bound as _lower
from strategies.dkmsks.counts import ObjectStats, rect_columns


def regions(ev: Events, rows: np.ndarray) -> np.ndarray:
    """(n, 4) rectangles of range subscriptions: R = the rectangle itself."""
    return np.stack([ev.xmin[rows], ev.ymin[rows], ev.xmax[rows], ev.ymax[rows]], axis=1).astype(np.float64)


# --- Eq. (7): the subset whose R overlaps a new subscription's region most -----------------------

# A region registered in a cell is of one of four classes, by whether that cell is the first
# column (C) and/or the first row (R) of the region's cell range. Stored per cell in the order
# C-only, both, R-only, neither, so that each case of the query scan below is one contiguous run.
_CLASS = np.array([[3, 2], [0, 1]], np.int64)  # [starts column][starts row]


@njit(cache=True)
def _register(ranges, g):
    """CSR (cell, class) -> regions from per-region inclusive cell ranges: region i is listed in
    cell c under class k at items[offsets[4c + k]:offsets[4c + k + 1]]."""
    counts = np.zeros(4 * g * g + 1, np.int64)
    for i in range(len(ranges)):
        for iy in range(ranges[i, 2], ranges[i, 3] + 1):
            for ix in range(ranges[i, 0], ranges[i, 1] + 1):
                k = _CLASS[int(ix == ranges[i, 0]), int(iy == ranges[i, 2])]
                counts[4 * (iy * g + ix) + k + 1] += 1
    offsets = np.cumsum(counts)
    fill = offsets[:-1].copy()
    items = np.empty(offsets[-1], np.int64)
    for i in range(len(ranges)):
        for iy in range(ranges[i, 2], ranges[i, 3] + 1):
            for ix in range(ranges[i, 0], ranges[i, 1] + 1):
                slot = 4 * (iy * g + ix) + _CLASS[int(ix == ranges[i, 0]), int(iy == ranges[i, 2])]
                items[fill[slot]] = i
                fill[slot] += 1
    return offsets, items


@njit(cache=True)
def _best_overlap(rows, qx0, qy0, qx1, qy1, offsets, items, item_rects, gx0, gy0, gx1, gy1, icw, ich, g):
    """Per query (rectangle rows[i] of the q columns), the region of largest positive overlap area
    (ties: lower index; -1 if none).
    Each region is scored once, in the first cell (column cx0, row cy0) of the cell ranges it shares
    with the query (the reference-point rule): in a cell past the query's first column only regions
    that start in that column, past its first row only those that start in that row. That cuts the
    candidates read about threefold against scanning every registration of every cell.
    item_rects[j] is the rectangle of items[j], so a cell's candidates are read sequentially."""
    out = np.full(len(rows), -1, np.int64)
    for i in range(len(rows)):
        x0, y0, x1, y1 = qx0[rows[i]], qy0[rows[i]], qx1[rows[i]], qy1[rows[i]]
        a = max(x0, gx0)
        b = max(y0, gy0)
        c = min(x1, gx1)
        d = min(y1, gy1)
        if not (a <= c and b <= d):
            continue
        best = -1
        best_area = 0.0
        cx0 = kernels.axis_cell(a, gx0, icw, g)
        cy0 = kernels.axis_cell(b, gy0, ich, g)
        for cy in range(cy0, kernels.axis_cell(d, gy0, ich, g) + 1):
            for cx in range(cx0, kernels.axis_cell(c, gx0, icw, g) + 1):
                base = 4 * (cy * g + cx)
                # classes C-only 0, both 1, R-only 2, neither 3: the first cell takes all four, the
                # rest of the first row 0-1, of the first column 1-2, every other cell 1
                lo = base if cy == cy0 else base + 1
                hi = base + 2
                if cx == cx0:
                    hi += 2 if cy == cy0 else 1
                for j in range(offsets[lo], offsets[hi]):
                    # branch-free area (0 without overlap): the argmax test is the only branch
                    w = max(min(x1, item_rects[j, 2]) - max(x0, item_rects[j, 0]), 0.0)
                    h = max(min(y1, item_rects[j, 3]) - max(y0, item_rects[j, 1]), 0.0)
                    area = w * h
                    if area >= best_area and area > 0.0:
                        r = items[j]
                        if area > best_area or r < best:
                            best_area = area
                            best = r
        out[i] = best
    return out


@njit(cache=True)
def _cell_order(rows, xmin, ymin, xmax, ymax, gx0, gy0, icw, ich, g):
    """The rows sorted (stably) by the grid cell of their rectangles' centres: a counting sort."""
    cell = np.empty(len(rows), np.int64)
    start = np.zeros(g * g + 1, np.int64)
    for i in range(len(rows)):
        r = rows[i]
        c = (kernels.axis_cell((ymin[r] + ymax[r]) / 2, gy0, ich, g) * g
             + kernels.axis_cell((xmin[r] + xmax[r]) / 2, gx0, icw, g))
        cell[i] = c
        start[c + 1] += 1
    for c in range(g * g):
        start[c + 1] += start[c]
    order = np.empty(len(rows), np.int64)
    for i in range(len(rows)):
        order[start[cell[i]]] = i
        start[cell[i]] += 1
    return order


class RegionIndex:
    """A grid over the subsets' rectangles R, answering Eq. (7): argmax over subsets of the
    overlap area |R cap R_n| (ties: the lower subset index; -1 when nothing overlaps)."""

    def __init__(self, rects: np.ndarray):
        rects = np.ascontiguousarray(np.asarray(rects, np.float64).reshape(-1, 4))
        self.rects = rects
        k = len(rects)
        if k:
            self.bbox = (float(rects[:, 0].min()), float(rects[:, 1].min()), float(rects[:, 2].max()),
                         float(rects[:, 3].max()))
        else:
            self.bbox = (0.0, 0.0, 0.0, 0.0)
        gx0, gy0, gx1, gy1 = self.bbox
        g = int(np.clip(np.sqrt(k), 1, 256))
        while True:  # coarsen until registrations stay near-linear in k (large R span many cells)
            icw, ich = g / max(gx1 - gx0, 1e-9), g / max(gy1 - gy0, 1e-9)
            ranges = kernels.rects_to_cell_ranges(*rect_columns(rects), gx0, gy0, icw, ich, g, g)
            spans = int(((ranges[:, 1] - ranges[:, 0] + 1) * (ranges[:, 3] - ranges[:, 2] + 1)).sum())
            if g == 1 or spans <= 16 * k + 4096:
                break
            g = max(1, g // 2)
        self.g, self.icw, self.ich = g, icw, ich
        offsets, items = _register(ranges, g)
        small = np.int32 if max(len(items), k) < 2**31 else np.int64  # halves the index's cache footprint
        self.offsets, self.items = offsets.astype(small), items.astype(small)
        self.item_rects = rects[items]  # each registration's rectangle, in cell order

    def best_overlap(self, rects: np.ndarray) -> np.ndarray:
        cols = rect_columns(rects)
        rows = np.arange(len(cols[0]), dtype=np.int64)
        order = self.cell_order(*cols, rows)
        out = np.empty(len(rows), np.int64)
        out[order] = self.best_overlap_rows(*cols, rows[order])
        return out

    def cell_order(self, xmin, ymin, xmax, ymax, rows: np.ndarray) -> np.ndarray:
        """An order of the rows by the cell of their rectangles' centres: answered in it, neighbours
        reuse the same candidates from cache (measured 20% faster on 10k STS-Q1 rectangles)."""
        return _cell_order(np.asarray(rows, np.int64), xmin, ymin, xmax, ymax, *self.bbox[:2], self.icw, self.ich,
                           self.g)

    def best_overlap_rows(self, xmin, ymin, xmax, ymax, rows: np.ndarray) -> np.ndarray:
        """Eq. (7) for rectangles rows of the columns (an event batch's), from columns gathered in
        row order (reading them in place measured 30% slower)."""
        rows = np.asarray(rows, np.int64)
        return _best_overlap(np.arange(len(rows), dtype=np.int64), xmin[rows], ymin[rows], xmax[rows], ymax[rows],
                             self.offsets, self.items, self.item_rects, *self.bbox, self.icw, self.ich, self.g)


# --- Eq. (5) under a subset's R, for new subscriptions --------------------------------------------

FILTER_WORDS = 8  # a 512-bit filter of each listed region's terms (64 bytes: 1.3 MB for 20k regions)


@njit(cache=True, inline="always")
def _filter_bit(term):
    """The bit of a term in a region's filter (a multiplicative hash: term ids are frequency ranks)."""
    return ((np.int64(term) * 2654435761) & 0xFFFFFFFF) >> 23


@njit(cache=True)
def _term_filters(t_span, t_key):
    """Per region, the FILTER_WORDS words with the bit of each term of its run set."""
    out = np.zeros(len(t_span) * FILTER_WORDS, np.int64)
    for b in range(len(t_span)):
        for j in range(max(t_span[b, 0], 0), max(t_span[b, 1], 0)):
            h = _filter_bit(np.int64(t_key[j]) >> 8)
            out[b * FILTER_WORDS + (h >> 6)] |= np.int64(1) << (h & 63)
    return out


@njit(cache=True)
def _listed_counts(region, rows, kw_off, kw_val, t_span, t_key, t_filter):
    """Eq. (5) numerators of subscriptions (keywords of rows[i] in the CSR kw_off, kw_val) placed
    under listed regions: per keyword, a binary search in the region's run t_key[lo:hi] of sorted
    keys term << 8 | count (t_span[b] = lo, hi; lo -1 for a region not listed), skipped when the
    region's filter lacks the term (most keywords are absent from a small R: measured 17% faster
    on STS-Q1). Returns (numerators, whether each row was counted)."""
    out = np.zeros(len(region), np.int64)
    done = np.zeros(len(region), np.bool_)
    for i in range(len(region)):
        b = region[i]
        if b < 0 or t_span[b, 0] < 0:
            continue
        lo, hi = t_span[b, 0], t_span[b, 1]
        total = 0
        for k in range(kw_off[rows[i]], kw_off[rows[i] + 1]):
            lam = np.int64(kw_val[k])
            h = _filter_bit(lam)
            if (t_filter[b * FILTER_WORDS + (h >> 6)] >> (h & 63)) & 1 == 0:
                continue
            j = _lower(t_key, lo, hi, lam << 8)
            if j < hi and (np.int64(t_key[j]) >> 8) == lam:
                total += t_key[j] & 255
        out[i] = total
        done[i] = True
    return out, done


class RegionTerms:
    """|O_{R,lambda}| for every term of O_init's objects inside each subset's R, as sorted runs of
    keys term << 8 | count per R (one int32 each while terms stay below 2^23), so that Eq. (5) of
    a subscription placed under that R* costs one binary search per keyword instead of a strip
    count (measured ~4x faster on STS-Q1). The runs are laid out in `layout` order (the order in
    which subscriptions will visit the subsets, e.g. by cell: neighbours then share cache lines).

    The entries grow with the objects inside each R, i.e. with sample size squared, so they are
    budgeted linearly: at most ENTRIES_PER_SUBSET per subset on average (and BUDGET in all). The
    subsets are listed from the fewest objects up (at most MAX_OBJECTS, so a count fits the low
    byte) while the object-term pairs they hold fit the budget; the others are counted by the
    strips. Only the chosen subsets are listed, so the fit stays linear too."""

    MAX_OBJECTS = 255
    ENTRIES_PER_SUBSET = 64
    BUDGET = 1 << 21  # entries: 8 MiB as int32

    def __init__(self, stats: ObjectStats, rects: np.ndarray, obj_offsets: np.ndarray, obj_values: np.ndarray,
                 layout: np.ndarray | None = None):
        rects = np.asarray(rects, np.float64).reshape(-1, 4)
        layout = np.arange(len(rects)) if layout is None else np.asarray(layout, np.int64)
        n_in = stats.rect_counts(rects)
        per_object = len(obj_values) / max(len(obj_offsets) - 1, 1)  # terms per object
        budget = min(self.BUDGET, self.ENTRIES_PER_SUBSET * len(rects))
        cand = np.flatnonzero(n_in <= self.MAX_OBJECTS)
        cand = cand[np.argsort(n_in[cand], kind="stable")]  # fewest objects first, ties by index
        chosen = cand[np.cumsum(n_in[cand] * per_object) <= budget]
        position = np.empty(len(rects), np.int64)
        position[layout] = np.arange(len(layout))
        small = chosen[np.argsort(position[chosen], kind="stable")]  # in layout order
        ptr, objs = stats.objects_in(rects[small])
        lengths = np.diff(np.asarray(obj_offsets, np.int64))
        terms = csr_take(obj_offsets, obj_values, objs)[1]
        owner = np.repeat(np.repeat(np.arange(len(small)), np.diff(ptr)), lengths[objs])  # per term entry
        width = int(terms.max()) + 1 if len(terms) else 1
        keys, count = np.unique(owner * width + terms, return_counts=True)
        per_small = np.bincount(keys // width, minlength=len(small))
        ends = np.cumsum(per_small)
        self.t_span = np.full((len(rects), 2), -1, np.int64)
        self.t_span[small, 0] = ends - per_small
        self.t_span[small, 1] = ends
        self.t_key = ((keys % width) << 8 | count).astype(np.int32 if width <= 2**23 else np.int64)
        self.t_filter = _term_filters(self.t_span, self.t_key)

    @property
    def listed(self) -> np.ndarray:
        return self.t_span[:, 0] >= 0

    def counts(self, region: np.ndarray, kw_off: np.ndarray, kw_val: np.ndarray,
               rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(Eq. 5 numerators, done): per subscription under subset `region` (-1: none), the sum
        over its keywords (rows of the CSR kw_off, kw_val; all by default) of |O_{R,lambda}|;
        subscriptions whose region is not listed are left undone."""
        region = np.asarray(region, np.int64)
        rows = np.arange(len(region), dtype=np.int64) if rows is None else np.asarray(rows, np.int64)
        return _listed_counts(region, rows, np.asarray(kw_off, np.int64), kw_val, self.t_span, self.t_key,
                              self.t_filter)
