"""Tornado's Augmented Grid (A-Grid): cost-partitioned fine grid, neighbour-search range routing
and per-evaluator keyword summaries (Mahmood et al., Tornado; paper sections 3 and 4.1).

- Fine grid (section 3.1, section 5): square cells whose side is the average query side of the
  sample (r_c = r_q), enlarged when the grid would exceed `max_cells` (the paper's 1000 x 1000).
- Initial partitioning (section 4.1): a max-priority queue of rectangles keyed by cost; the
  costliest is split at the horizontal or vertical cut minimising the larger half's cost, until
  the requested number of partitions exists. A single-cell partition is set aside, not split
  (the paper says "until a single grid cell is reached"; we keep going with the others).
  Cell cost is Eq. 1, sum over sample objects of the queries they would find in the cell's
  inverted lists, plus the cell's objects and overlapping queries (see `cell_costs`).
- Routing (sections 3.2 to 3.5): an object goes to the partition of its cell in O(1); a query
  rectangle walks Algorithm 1 (neighbour search): from the partition of its top-left cell, follow
  each visited partition's right and bottom shortcuts to the next partition's dominant cell,
  O(partitions touched) and independent of the grid resolution.
- Keyword summaries (section 3.6): per partition the set of query keywords routed to it: every
  keyword of an OR (OVERLAPS) query, only the least frequent keyword of an AND (CONTAINS) query
  (the paper stores "a single keyword" without saying which; an object matching an AND query
  holds all its keywords, so it holds the least frequent one, and that one prunes best). An
  object is forwarded only if one of its terms is in its partition's summary. Entries carry the
  seq of the insertion that created them, and an object uses only entries older than itself.
  Summaries only grow (the paper's lazy cleaning is not modelled: a stale entry costs a false
  positive, never a lost result).

Partitions are explicit (inclusive cell rectangles + partition -> worker), one per worker by
default as in the paper (one evaluator per partition); `partitions_per_worker` > 1 groups them by
longest-processing-time greedy on their cost. Decisions are in docs/decisions.md.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from harness.core.events import AND, INSERT, RANGE, Events, csr_take
from harness.core import allocate
from strategies.base import FitContext, Pairs, Router, Strategy
from harness.core.kernels import axis_cell
from strategies.load import routing_terms, sample_parts
from harness.core.grid import UniformGrid

# --- neighbour search ----------------------------------------------------------------------------


@njit(cache=True)
def _neighbour_search(rows, xmin, ymin, xmax, ymax, x0, y0, inv_cw, inv_ch, nx, ny,
                      cell_part, px0, py0, px1, py1, part_worker, n_workers, emit_partitions):
    """Algorithm 1 per rectangle; emits distinct partitions (emit_partitions) or distinct workers.

    Cells are (x, y) with y the row index; the "top-left" cell of a region is its (min x, min y).
    The dominant cell of partition P within range r is (max(P.x0, r.x0), max(P.y0, r.y0)). From a
    visited P we push the partition right of P on P's dominant row and the partition below P on
    P's dominant column, when those cells are still inside r. Visited partitions are stamped with
    the row's index, so nothing is reset between rectangles (notes A4). Two passes: count, fill.
    """
    n_parts = len(px0)
    seen_part = np.full(n_parts, -1, np.int64)
    seen_worker = np.full(max(n_workers, 1), -1, np.int64)
    stack = np.empty(2 * n_parts + 2, np.int64)
    out_r = np.empty(0, np.int64)
    out_v = np.empty(0, np.int64)
    total = 0
    for p in range(2):
        if p == 1:
            out_r = np.empty(total, np.int64)
            out_v = np.empty(total, np.int64)
            seen_part[:] = -1
            seen_worker[:] = -1
            total = 0
        for i in range(len(rows)):
            r = rows[i]
            rx0 = axis_cell(xmin[r], x0, inv_cw, nx)
            rx1 = axis_cell(xmax[r], x0, inv_cw, nx)
            ry0 = axis_cell(ymin[r], y0, inv_ch, ny)
            ry1 = axis_cell(ymax[r], y0, inv_ch, ny)
            stack[0] = cell_part[ry0 * nx + rx0]
            top = 1
            while top > 0:
                top -= 1
                q = stack[top]
                if seen_part[q] == i:
                    continue
                seen_part[q] = i
                v = q if emit_partitions else part_worker[q]
                if emit_partitions or seen_worker[v] != i:
                    if not emit_partitions:
                        seen_worker[v] = i
                    if p == 1:
                        out_r[total] = r
                        out_v[total] = v
                    total += 1
                dx = max(rx0, px0[q])  # dominant cell of q within r
                dy = max(ry0, py0[q])
                if px1[q] + 1 <= rx1:  # right shortcut, on q's dominant row
                    stack[top] = cell_part[dy * nx + px1[q] + 1]
                    top += 1
                if py1[q] + 1 <= ry1:  # bottom shortcut, on q's dominant column
                    stack[top] = cell_part[(py1[q] + 1) * nx + dx]
                    top += 1
    return out_r, out_v


# --- keyword summaries: an open-addressing hash table (partition << 32 | term) -> first seq -------
# One (capacity, 2) array of (key, seq) rows, so a probe touches one cache line; linear probing,
# load factor <= 1/2, capacity a power of two, Fibonacci hashing on the packed key. The N_HOT most
# frequent terms (ids < N_HOT) are mirrored in a dense partition x term array: most objects hit
# on one of them, and a direct load is much cheaper than a hash probe (measured: 1.6x objects/s).

N_HOT = 256
_NEVER = np.iinfo(np.int64).max

_EMPTY = -1
_HASH_MUL = -7046029254386353131  # 0x9E3779B97F4A7C15 as a signed int64


@njit(cache=True, inline="always")
def _slot(key, shift, mask):
    return ((key * _HASH_MUL) >> shift) & mask


@njit(cache=True)
def _table_insert_min(table, keys, seqs, shift):
    """Insert each key with its seq, keeping the smallest seq per key; returns new entries added."""
    mask = table.shape[0] - 1
    added = 0
    for k in range(len(keys)):
        key = keys[k]
        s = _slot(key, shift, mask)
        while True:
            cur = table[s, 0]
            if cur == _EMPTY:
                table[s, 0] = key
                table[s, 1] = seqs[k]
                added += 1
                break
            if cur == key:
                table[s, 1] = min(table[s, 1], seqs[k])
                break
            s = (s + 1) & mask
    return added


@njit(cache=True)
def _summary_pairs(pair_rows, pair_parts, offsets, values, op, seq, and_op):
    """Summary entries of routed queries: for each (row, partition) pair, key (partition, term)
    for the least frequent term of an AND query, for every term of an OR query; value = seq."""
    total = 0
    for k in range(len(pair_rows)):
        r = pair_rows[k]
        n = offsets[r + 1] - offsets[r]
        total += (1 if n > 0 else 0) if op[r] == and_op else n
    keys = np.empty(total, np.int64)
    seqs = np.empty(total, np.int64)
    j = 0
    for k in range(len(pair_rows)):
        r = pair_rows[k]
        lo = offsets[r]
        hi = offsets[r + 1]
        if op[r] == and_op and hi > lo:
            lo = hi - 1  # terms are sorted ascending: the last is the least frequent
        for t in range(lo, hi):
            keys[j] = (pair_parts[k] << 32) | values[t]
            seqs[j] = seq[r]
            j += 1
    return keys, seqs


@njit(cache=True)
def _route_points(rows, x, y, seq, offsets, values, x0, y0, inv_cw, inv_ch, nx, ny, cell_part, part_worker,
                  use_summaries, hot, n_hot, table, shift):
    """(row, worker) of each point's partition, leaving out the points its summary rejects: none of
    the point's terms has an entry older than the point. Terms are tried most frequent first (the
    likeliest hit; the first hit ends the search), the hottest ones in a dense table."""
    n = len(rows)
    out_r = np.empty(n, np.int64)
    out_w = np.empty(n, np.int64)
    mask = table.shape[0] - 1
    j = 0
    for i in range(n):
        r = rows[i]
        part = cell_part[axis_cell(y[r], y0, inv_ch, ny) * nx + axis_cell(x[r], x0, inv_cw, nx)]
        ok = not use_summaries
        if use_summaries:
            sr = seq[r]
            base = part * n_hot
            for t in range(offsets[r], offsets[r + 1]):
                v = values[t]
                if v < n_hot:
                    if hot[base + v] < sr:
                        ok = True
                        break
                    continue
                key = (np.int64(part) << 32) | v
                s = _slot(key, shift, mask)
                while True:
                    cur = table[s, 0]
                    if cur == key:
                        ok = table[s, 1] < sr
                        break
                    if cur == _EMPTY:
                        break
                    s = (s + 1) & mask
                if ok:
                    break
        if ok:
            out_r[j] = r
            out_w[j] = part_worker[part]
            j += 1
    return out_r[:j], out_w[:j]


# --- sample cost (Eq. 1) -------------------------------------------------------------------------


@njit(cache=True)
def _query_cell_term_keys(pair_q, pair_terms, ranges, nx):
    """(cell << 32 | term) for every cell a query overlaps and every term it is indexed under."""
    total = 0
    for k in range(len(pair_q)):
        q = pair_q[k]
        total += (ranges[q, 1] - ranges[q, 0] + 1) * (ranges[q, 3] - ranges[q, 2] + 1)
    out = np.empty(total, np.int64)
    j = 0
    for k in range(len(pair_q)):
        q = pair_q[k]
        for cy in range(ranges[q, 2], ranges[q, 3] + 1):
            for cx in range(ranges[q, 0], ranges[q, 1] + 1):
                out[j] = ((cy * nx + cx) << 32) | pair_terms[k]
                j += 1
    return out


def cell_costs(sample: Events, grid: UniformGrid) -> np.ndarray:
    """Per fine-grid cell: Eq. 1 (sum over the cell's sample objects of the query postings that
    their terms hit in the cell's inverted lists) + objects in the cell + queries overlapping it.

    Postings follow the summary rule (AND: least frequent keyword, OR: all keywords), so q_l counts
    postings, not distinct queries (notes A5). The two additive terms charge routing and insertion
    work and keep a sparse sample from leaving whole regions at zero cost.
    """
    objs, qs = sample_parts(sample)
    obj_cells = grid.cells_of(sample.x[objs], sample.y[objs])
    ranges = grid.cell_ranges(sample.xmin[qs], sample.ymin[qs], sample.xmax[qs], sample.ymax[qs])
    q_rows, q_terms = routing_terms(sample, qs)
    qkeys = np.sort(_query_cell_term_keys(np.searchsorted(qs, q_rows), q_terms.astype(np.int64), ranges, grid.nx))
    o_off, o_terms = csr_take(sample.offsets, sample.values, objs)
    o_cell = np.repeat(obj_cells, np.diff(o_off))
    okeys = (o_cell << 32) | o_terms.astype(np.int64)
    hits = np.searchsorted(qkeys, okeys, side="right") - np.searchsorted(qkeys, okeys, side="left")
    eq1 = np.bincount(o_cell, weights=hits.astype(np.float64), minlength=grid.n_cells)
    n_o = np.bincount(obj_cells, minlength=grid.n_cells).astype(np.float64)
    n_q = grid.overlap_counts(sample.xmin[qs], sample.ymin[qs], sample.xmax[qs], sample.ymax[qs])
    return eq1 + n_o + n_q


# --- initial partitioning (section 4.1) ----------------------------------------------------------


def fine_grid(extent, mean_side: float, max_cells: int, n_parts: int) -> UniformGrid:
    """Square cells of side `mean_side` (r_c = r_q), coarsened to at most `max_cells` cells and
    refined to at least 2 * ceil(sqrt(n_parts)) cells per axis so every partition can exist."""
    w = max(float(extent[2]) - float(extent[0]), 1e-9)
    h = max(float(extent[3]) - float(extent[1]), 1e-9)
    side = mean_side if mean_side > 0 and math.isfinite(mean_side) else max(w, h) / 64.0
    side = max(side, math.sqrt(w * h / max_cells))
    nx, ny = max(1, math.ceil(w / side - 1e-9)), max(1, math.ceil(h / side - 1e-9))
    while nx * ny > max_cells and (nx > 1 or ny > 1):
        side *= 1.01
        nx, ny = max(1, math.ceil(w / side - 1e-9)), max(1, math.ceil(h / side - 1e-9))
    floor = 2 * math.ceil(math.sqrt(max(n_parts, 1)))
    return UniformGrid.over(extent, max(nx, floor), max(ny, floor))


def _best_cut(sat, x0, y0, x1, y1):
    """Best cut of an inclusive cell rectangle: (larger half's cost, axis, last cell of the first
    half). Ties go to the cut nearest the middle of its axis, then vertical (x) before horizontal."""
    best = None
    whole = sat[y1 + 1, x1 + 1] - sat[y0, x1 + 1] - sat[y1 + 1, x0] + sat[y0, x0]
    for axis in (0, 1):
        lo, hi = (x0, x1) if axis == 0 else (y0, y1)
        if hi <= lo:
            continue
        c = np.arange(lo, hi)  # first half = lo..c
        if axis == 0:
            first = sat[y1 + 1, c + 1] - sat[y0, c + 1] - sat[y1 + 1, x0] + sat[y0, x0]
        else:
            first = sat[c + 1, x1 + 1] - sat[c + 1, x0] - sat[y0, x1 + 1] + sat[y0, x0]
        worst = np.maximum(first, whole - first)
        off_mid = np.abs((c + 0.5) - (lo + hi) / 2.0) / (hi - lo + 1)
        k = int(np.lexsort((off_mid, worst))[0])
        cand = (float(worst[k]), float(off_mid[k]), axis, int(c[k]))
        if best is None or cand[:2] < best[:2]:
            best = cand
    return best


def kd_partition(cost: np.ndarray, nx: int, ny: int, n_parts: int) -> np.ndarray:
    """Section 4.1: split the costliest rectangle at its best cut until n_parts rectangles exist
    (or none can be split). Returns (P, 4) inclusive cell rectangles x0, y0, x1, y1, in row-major
    order of their top-left cells. Loops over partitions only; each split costs O(w + h)."""
    grid2d = cost.reshape(ny, nx)
    sat = np.zeros((ny + 1, nx + 1), np.float64)
    sat[1:, 1:] = grid2d.cumsum(axis=0).cumsum(axis=1)

    def rect_cost(r):
        x0, y0, x1, y1 = r
        return sat[y1 + 1, x1 + 1] - sat[y0, x1 + 1] - sat[y1 + 1, x0] + sat[y0, x0]

    counter = 0
    heap = [(-rect_cost((0, 0, nx - 1, ny - 1)), counter, (0, 0, nx - 1, ny - 1))]
    done = []
    while heap and len(heap) + len(done) < n_parts:
        _, _, r = heapq.heappop(heap)
        x0, y0, x1, y1 = r
        if x0 == x1 and y0 == y1:  # a single cell cannot be split: keep it, split the next one
            done.append(r)
            continue
        _, _, axis, c = _best_cut(sat, x0, y0, x1, y1)
        halves = ((x0, y0, c, y1), (c + 1, y0, x1, y1)) if axis == 0 else ((x0, y0, x1, c), (x0, c + 1, x1, y1))
        for h in halves:
            counter += 1
            heapq.heappush(heap, (-rect_cost(h), counter, h))
    rects = np.array(done + [h[2] for h in heap], np.int64).reshape(-1, 4)
    return rects[np.lexsort((rects[:, 0], rects[:, 1]))]


def rect_costs(cost: np.ndarray, nx: int, ny: int, rects: np.ndarray) -> np.ndarray:
    sat = np.zeros((ny + 1, nx + 1), np.float64)
    sat[1:, 1:] = cost.reshape(ny, nx).cumsum(axis=0).cumsum(axis=1)
    x0, y0, x1, y1 = rects.T
    return sat[y1 + 1, x1 + 1] - sat[y0, x1 + 1] - sat[y1 + 1, x0] + sat[y0, x0]


# --- migration units (adjusters) ----------------------------------------------------------------


@njit(cache=True)
def _owner_rects(cell_part, owner, nx, ny):
    """Tile the grid into rectangles of cells sharing (partition, owner): greedy in row-major order,
    each rectangle as wide, then as tall, as it can be. A partition whose cells share one owner
    comes back unchanged. Rows: x0, y0, x1, y1, owner."""
    done = np.zeros(nx * ny, np.bool_)
    out = np.empty((nx * ny, 5), np.int64)
    n = 0
    for y in range(ny):
        for x in range(nx):
            c = y * nx + x
            if done[c]:
                continue
            p = cell_part[c]
            w = owner[c]
            x1 = x
            while x1 + 1 < nx and not done[c + x1 + 1 - x] and cell_part[c + x1 + 1 - x] == p \
                    and owner[c + x1 + 1 - x] == w:
                x1 += 1
            y1 = y
            while y1 + 1 < ny:
                base = (y1 + 1) * nx
                ok = True
                for xx in range(x, x1 + 1):
                    if done[base + xx] or cell_part[base + xx] != p or owner[base + xx] != w:
                        ok = False
                        break
                if not ok:
                    break
                y1 += 1
            for yy in range(y, y1 + 1):
                for xx in range(x, x1 + 1):
                    done[yy * nx + xx] = True
            out[n, 0] = x
            out[n, 1] = y
            out[n, 2] = x1
            out[n, 3] = y1
            out[n, 4] = w
            n += 1
    return out[:n]


def _overlap_pairs(new_rect: np.ndarray, new_cell_part: np.ndarray, old_rect: np.ndarray,
                   old_cell_part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(new partition, old partition) pairs that share at least one cell: a rectangle test when the
    pair matrix is small, else the distinct (new, old) labels of the cells."""
    n_new, n_old = len(new_rect), len(old_rect)
    if n_new * n_old <= 4 * len(new_cell_part):
        a, b = new_rect[:, None, :], old_rect[None, :, :]
        ov = (a[..., 0] <= b[..., 2]) & (b[..., 0] <= a[..., 2]) & (a[..., 1] <= b[..., 3]) & (b[..., 1] <= a[..., 3])
        return np.nonzero(ov)
    key = np.unique(new_cell_part.astype(np.int64) * n_old + old_cell_part)
    return key // n_old, key % n_old


# --- router --------------------------------------------------------------------------------------


class AGridRouter(Router):
    """The A-Grid: cell -> partition, partition rectangles (the paper's Partitions Map),
    partition -> worker, and the seq-stamped keyword summaries of each partition."""

    families = frozenset({"range"})

    def __init__(self, n_workers: int, grid: UniformGrid, part_rect: np.ndarray, part_worker: np.ndarray,
                 summaries: bool = True, part_cost: np.ndarray | None = None):
        super().__init__(n_workers)
        self.grid = grid
        self.summaries = bool(summaries)
        self.part_cost = np.zeros(len(part_rect)) if part_cost is None else np.asarray(part_cost, np.float64)
        self.sum_table = np.full((16, 2), _EMPTY, np.int64)  # (partition << 32 | term, first seq)
        self.sum_count = 0
        self.set_partitions(part_rect, part_worker)

    # partitions ---------------------------------------------------------------------------------

    def set_partitions(self, part_rect: np.ndarray, part_worker: np.ndarray) -> None:
        """Install a tiling (inclusive cell rectangles x0, y0, x1, y1) and rebuild cell -> partition.

        For adjusters: summaries are keyed by partition id, so a partition that takes over cells
        must also receive the summary of their old owner (`copy_summary`, paper section 4.4)."""
        rect = np.ascontiguousarray(part_rect, np.int64).reshape(-1, 4)
        self.part_rect = rect
        self.px0, self.py0, self.px1, self.py1 = (np.ascontiguousarray(rect[:, k]) for k in range(4))
        self.part_worker = np.ascontiguousarray(part_worker, np.int64)
        cells = np.full((self.grid.ny, self.grid.nx), -1, np.int32)
        for pid, (x0, y0, x1, y1) in enumerate(rect.tolist()):
            cells[y0 : y1 + 1, x0 : x1 + 1] = pid
        if (cells < 0).any():
            raise ValueError("partitions do not cover the fine grid")
        self.cell_part = cells.ravel()
        self.hot = np.full(len(rect) * N_HOT, _NEVER, np.int64)  # first seq of (partition, hot term)
        part, term, seq = self.summary_entries()
        self._update_hot(part, term, seq)

    def _update_hot(self, part: np.ndarray, term: np.ndarray, seq: np.ndarray) -> None:
        sel = (term < N_HOT) & (part < self.n_partitions)
        np.minimum.at(self.hot, part[sel] * N_HOT + term[sel], seq[sel])

    @property
    def n_partitions(self) -> int:
        return len(self.part_rect)

    # summaries ----------------------------------------------------------------------------------

    def _shift(self) -> int:
        return 65 - len(self.sum_table).bit_length()

    def add_summary_entries(self, keys: np.ndarray, seqs: np.ndarray) -> None:
        """Insert (partition << 32 | term) keys first seen at `seqs`; keeps the earliest seq."""
        if len(keys) == 0:
            return
        need = self.sum_count + len(keys)  # an upper bound: some keys may already be present
        if need * 2 > len(self.sum_table):  # keep the load factor <= 1/2: grow and rehash
            cap = 1 << max(4, int(need * 2 - 1).bit_length())
            old = self.sum_table[self.sum_table[:, 0] != _EMPTY]
            self.sum_table = np.full((cap, 2), _EMPTY, np.int64)
            self.sum_count = _table_insert_min(self.sum_table, old[:, 0].copy(), old[:, 1].copy(), self._shift())
        keys, seqs = np.asarray(keys, np.int64), np.asarray(seqs, np.int64)
        self.sum_count += _table_insert_min(self.sum_table, keys, seqs, self._shift())
        self._update_hot(keys >> 32, keys & 0xFFFFFFFF, seqs)

    def summary_entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(partition, term, seq) of every summary entry, sorted by partition then term."""
        live = self.sum_table[self.sum_table[:, 0] != _EMPTY]
        k, s = live[:, 0], live[:, 1]
        order = np.argsort(k, kind="stable")
        k, s = k[order], s[order]
        return k >> 32, k & 0xFFFFFFFF, s

    def copy_summary(self, src: int, dst: int) -> None:
        """summary(dst) |= summary(src), seqs kept (paper section 4.4, for shifts and merges)."""
        part, term, seq = self.summary_entries()
        sel = part == src
        self.add_summary_entries((np.int64(dst) << 32) | term[sel], seq[sel])

    def observe_inserts(self, ev: Events, rows: np.ndarray) -> None:
        """Add each range insertion's summary terms to every partition its rectangle overlaps,
        stamped with its seq (the paper's forward propagation, made exact per event)."""
        if not self.summaries or len(rows) == 0:
            return
        rows = np.asarray(rows, np.int64)
        rows = rows[(ev.kind[rows] == INSERT) & (ev.family[rows] == RANGE)]
        pr, pp = self._search(ev, rows, emit_partitions=True)
        keys, seqs = _summary_pairs(pr, pp, ev.offsets, ev.values, ev.op, ev.seq, AND)
        self.add_summary_entries(keys, seqs)

    # routing ------------------------------------------------------------------------------------

    def _search(self, ev: Events, rows: np.ndarray, emit_partitions: bool) -> Pairs:
        return _neighbour_search(np.asarray(rows, np.int64), ev.xmin, ev.ymin, ev.xmax, ev.ymax, *self.grid.args,
                                 self.cell_part, self.px0, self.py0, self.px1, self.py1, self.part_worker,
                                 self.n_workers, emit_partitions)

    def route_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        rows = np.asarray(rows, np.int64)
        return _route_points(rows, ev.x, ev.y, ev.seq, ev.offsets, ev.values, *self.grid.args, self.cell_part,
                             self.part_worker, self.summaries, self.hot, N_HOT, self.sum_table, self._shift())

    def route_range(self, ev: Events, rows: np.ndarray) -> Pairs:
        return self._search(ev, rows, emit_partitions=False)

    def route_range_partitions(self, ev: Events, rows: np.ndarray) -> Pairs:
        """(row, partition) pairs: every partition each rectangle overlaps (for adjusters, tests)."""
        return self._search(ev, rows, emit_partitions=True)

    # migration units (strategies/adjust_base.py) --------------------------------------------------

    def units(self, ev: Events, rows: np.ndarray) -> Pairs:
        """Fine cells: an object's cell, every cell a rectangle overlaps (the paper migrates cells)."""
        return self.grid.units(ev, rows)

    def unit_owner(self) -> np.ndarray:
        return self.part_worker[self.cell_part]

    def with_unit_owner(self, owner: np.ndarray) -> AGridRouter:
        """Cells reassigned to `owner`. A partition whose cells all get one worker keeps its
        rectangle (only part_worker changes); one whose cells are spread is cut into rectangles of
        constant owner (`_owner_rects`), so arbitrary per-cell adjusters stay valid, at the price of
        more partitions. Summaries follow the cells (`with_partitions`)."""
        owner = np.asarray(owner, np.int64)
        if owner.shape != (self.grid.n_cells,):
            raise ValueError(f"owner has shape {owner.shape}, expected ({self.grid.n_cells},)")
        first = owner[self.py0 * self.grid.nx + self.px0]  # owner of each partition's top-left cell
        if (owner == first[self.cell_part]).all():
            return self.with_partitions(self.part_rect, first, self.part_cost)
        rects = _owner_rects(self.cell_part.astype(np.int64), owner, self.grid.nx, self.grid.ny)
        old_pid = self.cell_part[rects[:, 1] * self.grid.nx + rects[:, 0]]
        area = (rects[:, 2] - rects[:, 0] + 1) * (rects[:, 3] - rects[:, 1] + 1)
        old_area = (self.px1 - self.px0 + 1) * (self.py1 - self.py0 + 1)
        cost = self.part_cost[old_pid] * area / old_area[old_pid] if len(self.part_cost) == self.n_partitions else None
        return self.with_partitions(rects[:, :4], rects[:, 4], cost)

    def with_partitions(self, part_rect: np.ndarray, part_worker: np.ndarray,
                        part_cost: np.ndarray | None = None) -> AGridRouter:
        """A new router on the same fine grid with another tiling. Each new partition's summary is
        the union of the summaries of every old partition it shares a cell with, seqs kept: the
        paper's "the entire textual summary of X is copied" (section 4.4), applied to whatever
        moved. Queries a worker holds for a cell were summarised in the cell's old partition, so an
        object never misses one; stale extra terms only cost false positives."""
        new = AGridRouter(self.n_workers, self.grid, part_rect, part_worker, self.summaries, part_cost)
        area = int(((new.px1 - new.px0 + 1) * (new.py1 - new.py0 + 1)).sum())
        if area != self.grid.n_cells:  # set_partitions rejects gaps; equal area then rules out overlaps
            raise ValueError(f"partitions overlap: their areas sum to {area} cells, the grid has {self.grid.n_cells}")
        part, term, seq = self.summary_entries()
        if len(part) == 0:
            return new
        ni, oi = _overlap_pairs(new.part_rect, new.cell_part, self.part_rect, self.cell_part.astype(np.int64))
        bounds = np.searchsorted(part, np.arange(self.n_partitions + 1))
        start, count = bounds[oi], np.diff(bounds)[oi]
        total = int(count.sum())
        ends = np.cumsum(count)
        idx = np.repeat(start - (ends - count), count) + np.arange(total)
        keys = (np.repeat(np.asarray(ni, np.int64), count) << 32) | term[idx]
        new.add_summary_entries(keys, seq[idx])
        return new

    def describe(self) -> dict:
        g = self.grid
        cw, ch = 1.0 / g.inv_cw, 1.0 / g.inv_ch
        part, _, _ = self.summary_entries()
        n_terms = np.bincount(part, minlength=self.n_partitions) if len(part) else np.zeros(self.n_partitions, int)
        parts = []
        for pid, (x0, y0, x1, y1) in enumerate(self.part_rect.tolist()):
            parts.append({
                "pid": pid, "worker": int(self.part_worker[pid]), "cells": [x0, y0, x1, y1],
                "region": [g.x0 + x0 * cw, g.y0 + y0 * ch, g.x0 + (x1 + 1) * cw, g.y0 + (y1 + 1) * ch],
                "cost": float(self.part_cost[pid]) if pid < len(self.part_cost) else 0.0,
                "summary_terms": int(n_terms[pid]),
            })
        return {**super().describe(), "grid": [g.nx, g.ny], "cell_km": [cw, ch], "summaries": self.summaries,
                "partitions": parts}


class AGridStrategy(Strategy):
    name = "agrid"
    families = frozenset({"range"})
    filters_objects = True
    unit_router = True  # fine cells are the migration units (strategies/tornado_adjust.py)

    @dataclass
    class Params:
        summaries: bool = True  # drop objects no query of their partition could match (section 3.6)
        partitions_per_worker: int = 1  # the paper: one partition per evaluator
        cell_side: float = 0.0  # km; 0 = the sample's average query side (section 5: r_c = r_q)
        max_cells: int = 1_000_000  # the paper's 1000 x 1000 fine grid

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        n_parts = max(1, int(n_workers) * max(1, int(params.partitions_per_worker)))
        _, qs = sample_parts(sample)
        if params.cell_side > 0:
            side = float(params.cell_side)
        elif len(qs):
            side = float(np.mean((sample.xmax[qs] - sample.xmin[qs] + sample.ymax[qs] - sample.ymin[qs]) / 2.0))
        else:
            side = 0.0
        grid = fine_grid(context.extent, side, int(params.max_cells), n_parts)
        cost = cell_costs(sample, grid)
        rects = kd_partition(cost, grid.nx, grid.ny, n_parts)
        pcost = rect_costs(cost, grid.nx, grid.ny, rects)
        if len(rects) <= n_workers:
            part_worker = np.arange(len(rects), dtype=np.int64)  # one evaluator per partition
        else:
            # Zero-cost partitions still need spreading: a tiny per-partition floor breaks LPT ties.
            floor = 1e-9 * max(float(pcost.max(initial=0.0)), 1.0)
            part_worker = allocate.lpt_assign(pcost + floor, n_workers)
        router = AGridRouter(n_workers, grid, rects, part_worker, params.summaries, pcost)
        router.observe_inserts(sample, np.flatnonzero(sample.kind == INSERT))  # warm-up queries
        return router
