"""gridt's maintenance kernels (PS2Stream, Chen et al., Section IV-C): H2 growth with
subscriptions by one sort and a merge, first-come assignment of new terms to a term map's
workers, and the object fast path's per-cell tables.

Compiled because GridtRouter.observe_inserts (strategies/ps2stream/gridt.py) runs them per chunk
of insertions; the policy (chunking, seq order, which terms are new) stays with the router.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.events import AND
from harness.core.kernels import axis_cell
from strategies.ps2stream.gridt_route import FILTER_WORDS, LOW_TERMS

NEVER = np.iinfo(np.int64).max


@njit(cache=True)
def expand_h2_keys(rows, op, offsets, values, xmin, ymin, xmax, ymax, x0, y0, inv_cw, inv_ch, nx, ny, row_bits):
    """A sortable key for every (cell a query overlaps, term it is indexed under), repeats
    included: (cell << 32 | term) << row_bits | i, i = the query's position in rows. One
    int64 per pair, so one numpy sort groups them by cell and term (separate cell, term and seq
    columns sorted per cell measured 2x slower). No bound pass: the output grows geometrically."""
    cap = 4 * len(rows) + 16
    keys = np.empty(cap, np.int64)
    n = 0
    for i in range(len(rows)):
        r = rows[i]
        a = offsets[r]
        b = offsets[r + 1]
        if a < b and op[r] == AND:
            a = b - 1
        ix0 = axis_cell(xmin[r], x0, inv_cw, nx)
        ix1 = axis_cell(xmax[r], x0, inv_cw, nx)
        iy0 = axis_cell(ymin[r], y0, inv_ch, ny)
        iy1 = axis_cell(ymax[r], y0, inv_ch, ny)
        need = n + (ix1 - ix0 + 1) * (iy1 - iy0 + 1) * (b - a)
        if need > cap:
            cap = max(2 * cap, need)
            grown = np.empty(cap, np.int64)
            grown[:n] = keys[:n]
            keys = grown
        for iy in range(iy0, iy1 + 1):
            for ix in range(ix0, ix1 + 1):
                c = np.int64(iy * nx + ix) << 32
                for q in range(a, b):
                    keys[n] = ((c | values[q]) << row_bits) | i
                    n += 1
    return keys[:n]


@njit(cache=True)
def merge_h2(h2_ptr, h2_key, h2_worker, h2_seq, new_keys, row_bits, row_seq, cell_worker, low, bits):
    """H2 with the sorted expand_h2_keys folded in, cell by cell: a term H2 has keeps its entry
    with the smaller seq (events observed out of order), a new term enters with the smallest seq
    of its queries (row_seq[i]) and its space cell's worker (-1 in a text cell: the caller assigns
    it from H1). The object fast path's tables (low seq, filter bits) are updated in place for the
    changed entries. Returns the new (key, worker, seq, per-cell pointers)."""
    n_cells = len(h2_ptr) - 1
    cap = len(h2_key) + len(new_keys)
    ok = np.empty(cap, np.int64)
    ow = np.empty(cap, np.int64)
    os = np.empty(cap, np.int64)
    ptr = np.empty(n_cells + 1, np.int64)
    ptr[0] = 0
    cell_shift = 32 + row_bits
    row_mask = (np.int64(1) << row_bits) - 1
    n = 0
    j = 0
    m = len(new_keys)
    for c in range(n_cells):
        i = h2_ptr[c]
        ie = h2_ptr[c + 1]
        if j == m or (new_keys[j] >> cell_shift) != c:  # untouched cell: its run as it was
            ok[n:n + ie - i] = h2_key[i:ie]
            ow[n:n + ie - i] = h2_worker[i:ie]
            os[n:n + ie - i] = h2_seq[i:ie]
            n += ie - i
            ptr[c + 1] = n
            continue
        base = np.int64(c) << 32
        while i < ie or (j < m and (new_keys[j] >> cell_shift) == c):
            t = -1
            if j < m and (new_keys[j] >> cell_shift) == c:
                t = (new_keys[j] >> row_bits) & 0xFFFFFFFF
            if t < 0 or (i < ie and (h2_key[i] & 0xFFFFFFFF) < t):
                ok[n] = h2_key[i]
                ow[n] = h2_worker[i]
                os[n] = h2_seq[i]
                n += 1
                i += 1
                continue
            pair = new_keys[j] >> row_bits
            s = row_seq[new_keys[j] & row_mask]
            j += 1
            while j < m and (new_keys[j] >> row_bits) == pair:
                s = min(s, row_seq[new_keys[j] & row_mask])
                j += 1
            if i < ie and (h2_key[i] & 0xFFFFFFFF) == t:
                ok[n] = h2_key[i]
                ow[n] = h2_worker[i]
                os[n] = min(h2_seq[i], s)
                i += 1
            else:
                ok[n] = base | t
                ow[n] = cell_worker[c]
                os[n] = s
                if t < LOW_TERMS:
                    bits[c * FILTER_WORDS] |= np.int64(1) << t
                else:
                    b = t & 511
                    bits[c * FILTER_WORDS + 1 + (b >> 6)] |= np.int64(1) << (b & 63)
            if t < LOW_TERMS:
                low[c * LOW_TERMS + t] = os[n]
            n += 1
        ptr[c + 1] = n
    return ok[:n], ow[:n], os[:n], ptr


@njit(cache=True)
def assign_new_terms(tmap, tmc_ptr, tmc_worker, worker_load, tm_unit):
    """New (term map, term) entries in seq order, each to the least loaded text worker of its map
    (ties to the lowest id, or to the first slot when a map lists a worker twice); `worker_load` is
    updated in place. Returns the position in `tmc_worker` (the map's slot), not the worker."""
    out = np.empty(len(tmap), np.int64)
    for i in range(len(tmap)):
        j = tmap[i]
        best = -1
        for k in range(tmc_ptr[j], tmc_ptr[j + 1]):
            if best < 0 or worker_load[tmc_worker[k]] < worker_load[tmc_worker[best]]:
                best = k
        out[i] = best
        worker_load[tmc_worker[best]] += tm_unit[j]
    return out


@njit(cache=True)
def object_tables(h2_ptr, h2_key, h2_seq):
    """The object fast path's per-cell tables: the dense seq of the H2 entries of terms below
    LOW_TERMS (NEVER when absent), and the filter bits of the other H2 terms."""
    n_cells = len(h2_ptr) - 1
    low = np.full(n_cells * LOW_TERMS, NEVER, np.int64)
    bits = np.zeros(n_cells * FILTER_WORDS, np.int64)
    for c in range(n_cells):
        for k in range(h2_ptr[c], h2_ptr[c + 1]):
            t = h2_key[k] & 0xFFFFFFFF
            if t < LOW_TERMS:
                low[c * LOW_TERMS + t] = h2_seq[k]
                bits[c * FILTER_WORDS] |= np.int64(1) << t
            else:
                b = t & 511
                bits[c * FILTER_WORDS + 1 + (b >> 6)] |= np.int64(1) << (b & 63)
    return low, bits
