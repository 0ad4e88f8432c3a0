"""Tornado A-Grid's compiled routing kernels: Algorithm 1's neighbour search for query rectangles,
the keyword summaries as an open-addressing hash table (partition << 32 | term -> first seq) and
object routing through them (sections 3.2 to 3.6; the module docstring of agrid.py describes
each)."""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.kernels import axis_cell

# --- neighbour search ----------------------------------------------------------------------------


@njit(cache=True)
def neighbour_search(rows, xmin, ymin, xmax, ymax, x0, y0, inv_cw, inv_ch, nx, ny,
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
NEVER = np.iinfo(np.int64).max

EMPTY = -1
_HASH_MUL = -7046029254386353131  # 0x9E3779B97F4A7C15 as a signed int64


@njit(cache=True, inline="always")
def _slot(key, shift, mask):
    return ((key * _HASH_MUL) >> shift) & mask


@njit(cache=True)
def table_insert_min(table, keys, seqs, shift):
    """Insert each key with its seq, keeping the smallest seq per key; returns new entries added."""
    mask = table.shape[0] - 1
    added = 0
    for k in range(len(keys)):
        key = keys[k]
        s = _slot(key, shift, mask)
        while True:
            cur = table[s, 0]
            if cur == EMPTY:
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
def summary_pairs(pair_rows, pair_parts, offsets, values, op, seq, and_op):
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
def route_points(rows, x, y, seq, offsets, values, x0, y0, inv_cw, inv_ch, nx, ny, cell_part, part_worker,
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
                    if cur == EMPTY:
                        break
                    s = (s + 1) & mask
                if ok:
                    break
        if ok:
            out_r[j] = r
            out_w[j] = part_worker[part]
            j += 1
    return out_r[:j], out_w[:j]


