"""gridt's routing kernels (PS2Stream, Chen et al., Section IV-C): objects by H2, range queries by H1.

The dispatcher's hot path, compiled and kept apart from GridtRouter (strategies/ps2stream/gridt.py),
which sizes their one shared output and passes them its tables. The layout of the object fast
path's per-cell tables (LOW_TERMS, FILTER_WORDS) is defined here, where it is read; the kernels of
strategies/ps2stream/gridt_grow.py build them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.events import AND
from harness.core.kernels import axis_cell, lower_bound as _lower_bound

LOW_TERMS = 64  # dense per-cell H2 seq table over the most frequent term ids (ids are frequency ranks)
# per-cell filter words: word 0 has bit t set when term t < LOW_TERMS is in the cell's H2, words
# 1..8 filter the other terms (bit = term mod 512); far smaller than the seq table, so it stays cached
FILTER_WORDS = 9


@njit(cache=True, inline="always")
def _maybe_in_h2(term_filter, c, t):
    """False when cell c's H2 certainly lacks term t (its filter bit is clear)."""
    if t < LOW_TERMS:
        return (term_filter[c * FILTER_WORDS] >> t) & 1 == 1
    b = t & 511
    return (term_filter[c * FILTER_WORDS + 1 + (b >> 6)] >> (b & 63)) & 1 == 1


@njit(cache=True)
def points_h2_bound(rows, offsets, n_workers):
    """An upper bound of fill_points_h2's pairs (an object reaches at most min(terms, workers))."""
    bound = 0
    for i in range(len(rows)):
        bound += min(offsets[rows[i] + 1] - offsets[rows[i]], n_workers)
    return bound


@njit(cache=True)
def fill_points_h2(rows, seq, x, y, offsets, values, x0, y0, inv_cw, inv_ch, nx, ny, cell_worker, h2_ptr, h2_key,
                   h2_worker, h2_seq, low_seq, term_filter, old_low, old_seq, n_workers, out_r, out_w, total):
    """Each object to the H2 workers of its terms in its cell (entries older than the object),
    written from out[total:] (the caller sizes it: one pair per object of a space cell, at most
    n_workers otherwise; points_h2_bound in units mode); returns the new end.

    A frequent term (id < LOW_TERMS) is tested in the dense table low_seq[cell, term] (the seq of
    its H2 entry, NEVER when absent) instead of a binary search, any other term first in the
    cell's term_filter bits; in a space cell the first hit settles the object. An object later
    than old_seq first tests old_low[cell], the bits of the frequent terms whose entries are at
    most old_seq (those before the last observe_inserts): most objects hit one of them, without
    reading the seq table (measured 24% faster on the frequent terms)."""
    stamp = np.full(n_workers, -1, np.int64)
    for i in range(len(rows)):
        r = rows[i]
        c = axis_cell(y[r], y0, inv_ch, ny) * nx + axis_cell(x[r], x0, inv_cw, nx)
        lo = h2_ptr[c]
        hi = h2_ptr[c + 1]
        if lo == hi:
            continue
        s = seq[r]
        j = offsets[r]
        e = offsets[r + 1]
        base = c << 32
        if cell_worker[c] >= 0:  # a space cell: one worker, the first hit settles it
            # (a loop of its own: measured 12% faster than one loop testing the cell kind per term)
            f0 = term_filter[c * FILTER_WORDS]
            o0 = old_low[c] if s > old_seq else 0
            hit = False
            while j < e:  # terms ascend: the frequent ones first, by the dense table
                t = values[j]
                if t >= LOW_TERMS:
                    break
                if (o0 >> t) & 1 or ((f0 >> t) & 1 and low_seq[c * LOW_TERMS + t] < s):
                    hit = True
                    break
                j += 1
            while not hit and j < e:
                t = values[j]
                j += 1
                if not _maybe_in_h2(term_filter, c, t):
                    continue
                k = _lower_bound(h2_key, lo, hi, base | t)
                if k == hi:
                    break  # terms ascend: no later term is in this cell's H2 either
                lo = k
                hit = h2_key[k] == (base | t) and h2_seq[k] < s
            if hit:
                out_r[total] = r
                out_w[total] = cell_worker[c]
                total += 1
            continue
        for q in range(j, e):
            t = values[q]
            if not _maybe_in_h2(term_filter, c, t) or (t < LOW_TERMS and low_seq[c * LOW_TERMS + t] >= s):
                continue
            k = _lower_bound(h2_key, lo, hi, base | t)
            if k == hi:
                break
            lo = k
            if h2_key[k] == (base | t) and h2_seq[k] < s:
                w = h2_worker[k]
                out_r[total] = r  # branch-free duplicate stamp: always write, advance for a new worker
                out_w[total] = w  # (the output has one slot of slack for the last discarded write)
                total += stamp[w] != i
                stamp[w] = i
    return total


@njit(cache=True)
def rects_h1_bound(rows, op, offsets, xmin, ymin, xmax, ymax, x0, y0, inv_cw, inv_ch, nx, ny, n_out):
    """An upper bound of fill_rects_h1's pairs (a query reaches at most min(cells x routing terms,
    n_out) targets)."""
    bound = 0
    for i in range(len(rows)):
        r = rows[i]
        a = offsets[r]
        b = offsets[r + 1]
        if a < b and op[r] == AND:
            a = b - 1
        cells = (axis_cell(xmax[r], x0, inv_cw, nx) - axis_cell(xmin[r], x0, inv_cw, nx) + 1) * (
            axis_cell(ymax[r], y0, inv_ch, ny) - axis_cell(ymin[r], y0, inv_ch, ny) + 1)
        bound += min(cells * (b - a), n_out)
    return bound


@njit(cache=True)
def fill_rects_h1(rows, op, offsets, values, xmin, ymin, xmax, ymax, x0, y0, inv_cw, inv_ch, nx, ny, cell_target,
                  cell_tmap, tm_ptr, tm_key, tm_slot, tmc_ptr, tmc_worker, unit_base, units, n_out, out_r, out_w,
                  total):
    """Each query to what H1 gives for its routing terms in every cell its rectangle overlaps: a
    space cell's `cell_target` (its worker, or its unit id), and in a text cell the slot of each
    routing term (its map entry's, else the hash fallback) as that slot's worker, or with
    `units` as the slot's unit id (slot 0 = the cell, slot k = unit_base[cell] + k - 1). One
    kernel for both, so routing is exactly the owners of the units.

    One pass from out[total:], sized by rects_h1_bound (a count-then-fill pass measured twice as
    slow); returns the new end. When routing, a term map already looked up for the row is skipped
    (its cells give the same workers)."""
    stamp = np.full(n_out, -1, np.int64)
    seen = np.full(max(len(tm_ptr) - 1, 1), -1, np.int64)  # term maps already looked up for row i
    for i in range(len(rows)):
        r = rows[i]
        a = offsets[r]
        b = offsets[r + 1]
        if a == b:
            continue  # no keyword: matches nothing
        if op[r] == AND:
            a = b - 1  # one conjunct: its least frequent keyword (largest id)
        ix0 = axis_cell(xmin[r], x0, inv_cw, nx)
        ix1 = axis_cell(xmax[r], x0, inv_cw, nx)
        iy0 = axis_cell(ymin[r], y0, inv_ch, ny)
        iy1 = axis_cell(ymax[r], y0, inv_ch, ny)
        for iy in range(iy0, iy1 + 1):
            for ix in range(ix0, ix1 + 1):
                c = iy * nx + ix
                jm = cell_tmap[c]
                if jm < 0:
                    w = cell_target[c]
                    out_r[total] = r  # branch-free duplicate stamp (one slot of slack in the output)
                    out_w[total] = w
                    total += stamp[w] != i
                    stamp[w] = i
                    continue
                if not units:
                    if seen[jm] == i:
                        continue
                    seen[jm] = i
                lo = tm_ptr[jm]
                hi = tm_ptr[jm + 1]
                for q in range(a, b):
                    t = values[q]
                    key = (jm << 32) | t
                    k = _lower_bound(tm_key, lo, hi, key)
                    if k < hi and tm_key[k] == key:
                        slot = tm_slot[k]
                    else:
                        slot = t % (tmc_ptr[jm + 1] - tmc_ptr[jm])
                    if units:
                        w = c if slot == 0 else unit_base[c] + slot - 1
                    else:
                        w = tmc_worker[tmc_ptr[jm] + slot]
                    out_r[total] = r
                    out_w[total] = w
                    total += stamp[w] != i
                    stamp[w] = i
    return total


@njit(cache=True)
def rect_workers(rows, xmin, ymin, xmax, ymax, x0, y0, inv_cw, inv_ch, nx, ny, cell_worker, cell_tmap, tmc_ptr,
                 tmc_worker, n_workers):
    """(row, worker) once for every worker of every cell each rectangle overlaps (a space cell's
    worker; every worker of a text cell's term map), rows in the given order and workers ascending.
    A rectangle stops scanning cells once it holds every worker, and no (row, cell) pair is ever
    stored: a snapshot query as wide as the space (SSTD's second SKQ round when fewer than k
    objects qualify) costs n_workers pairs, not one per cell."""
    out_r = np.empty(len(rows) * n_workers, np.int64)
    out_w = np.empty(len(rows) * n_workers, np.int64)
    mark = np.zeros(n_workers, np.bool_)
    total = 0
    for i in range(len(rows)):
        r = rows[i]
        mark[:] = False
        found = 0
        ix0 = axis_cell(xmin[r], x0, inv_cw, nx)
        ix1 = axis_cell(xmax[r], x0, inv_cw, nx)
        iy = axis_cell(ymin[r], y0, inv_ch, ny)
        iy1 = axis_cell(ymax[r], y0, inv_ch, ny)
        while iy <= iy1 and found < n_workers:
            for ix in range(ix0, ix1 + 1):
                c = iy * nx + ix
                w = cell_worker[c]
                if w >= 0:
                    if not mark[w]:
                        mark[w] = True
                        found += 1
                else:
                    t = cell_tmap[c]
                    for s in range(tmc_ptr[t], tmc_ptr[t + 1]):
                        w = tmc_worker[s]
                        if not mark[w]:
                            mark[w] = True
                            found += 1
                if found == n_workers:
                    break
            iy += 1
        for w in range(n_workers):
            if mark[w]:
                out_r[total] = r
                out_w[total] = w
                total += 1
    return out_r[:total], out_w[:total]
