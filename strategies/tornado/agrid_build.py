"""Building the A-Grid from the warm-up sample: the cell cost of Eq. 1, the fine grid's resolution
(r_c = r_q, capped at max_cells) and the initial partitioning of section 4.1 (costliest rectangle
split at the cut minimising its larger half)."""

from __future__ import annotations

import heapq
import math

import numpy as np
from numba import njit

from harness.core.events import Events, csr_take
from harness.core.grid import UniformGrid
from strategies.load import routing_terms, sample_parts

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


