"""The frequent_terms family's snapshot answers (SSTD's STQ, and each CTQ report) from a worker's object
store: per query, the term counts of the stored objects in its rectangle and bounds that this
worker counts (harness/families/object_store.py), with count tables over the objects only this
worker holds (`count_tables`)."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from harness.core.kernels import axis_cell, lower_bound
from harness.core.events import Events
from harness.families.object_store import ObjectStore

# the snapshot terms queries to answer: their rows of the events, each one's range of store positions
# (lo, hi: before it and within its look-back), and the events' rectangle, k, and per query row the
# bit mask of the workers it reaches
TermsQueries = namedtuple("TermsQueries", ["rows", "lo", "hi", "xmin", "ymin", "xmax", "ymax", "k", "mask"])

# stored objects (in store order, or cell-major: ObjectStore.cell_major): location, terms as CSR and
# the bit mask of the workers holding a copy
MaskedObjects = namedtuple("MaskedObjects", ["x", "y", "off", "val", "mask"])

# the count tables (`count_tables`) with the slice size they were built for (0: none)
CountTables = namedtuple("CountTables", ["slice_size", "ptr", "term", "count", "other_ptr", "other_pos"])


@njit(cache=True, inline="always")
def _first_common_worker(q_mask, q, o_mask, p):
    """The lowest worker id in both bit masks (-1: none)."""
    for word in range(q_mask.shape[1]):
        m = q_mask[q, word] & o_mask[p, word]
        if m:
            b = 0
            while not (m >> np.uint64(b)) & np.uint64(1):
                b += 1
            return word * 64 + b
    return -1


@njit(cache=True, inline="always")
def _one_bit(q_mask, i):
    """Whether row i of the bit masks has exactly one bit set."""
    seen = False
    for word in range(q_mask.shape[1]):
        m = q_mask[i, word]
        if m:
            if seen or (m & (m - np.uint64(1))):
                return False
            seen = True
    return seen


@njit(cache=True, inline="always")
def _add_terms(p, o_off, o_val, count, touched, n_touched):
    for j in range(o_off[p], o_off[p + 1]):
        term = o_val[j]
        if count[term] == 0:
            touched[n_touched] = term
            n_touched += 1
        count[term] += 1
    return n_touched


@njit(cache=True)
def _scan_terms(arr, indirect, a, b, i, q, xmin, ymin, xmax, ymax, q_mask, o_x, o_y, o_off, o_val, o_mask, worker,
                check_rect, count, touched, n_touched):
    """Objects a..b into the counts (at positions arr[a:b] when `indirect`, else a..b themselves: the
    cell-major arrays of `ObjectStore.cell_major`): inside the rectangle (unless the cell is known
    to be) and counted here (`_first_common_worker`). Returns (n_touched, checked)."""
    for t in range(a, b):
        p = arr[t] if indirect else t
        if check_rect and (o_x[p] < xmin[q] or o_x[p] > xmax[q] or o_y[p] < ymin[q] or o_y[p] > ymax[q]):
            continue
        if _first_common_worker(q_mask, i, o_mask, p) != worker:
            continue
        n_touched = _add_terms(p, o_off, o_val, count, touched, n_touched)
    return n_touched, b - a


@njit(cache=True)
def terms_answers(queries, objects, cell_ptr, cell_pos, by_cell, tables, grid, vocab, worker, work):
    """Per query, the term counts of the stored objects in its rectangle and bounds that this worker
    counts: of the workers holding a copy of an object, the lowest one the query reaches (so each
    object counts once over the workers a query reaches). Rows (query index, term, count).

    With count tables (`slice_size` > 0, `count_tables`): in a cell wholly inside the rectangle
    (edge cells never are: they hold the points beyond the space), each whole slice of positions
    within the query's bounds adds its table (the objects only this worker holds, counted for any
    query that reaches it) and scans the cell's other objects of the slice; the bounds' partial
    slices, and cells the rectangle cuts, are scanned object by object.

    A query that reaches this worker alone (one bit in its mask) has every object counted here, so
    only its top `q_k` terms by (count desc, term asc) can be in the answer: only those are emitted
    (the merge ranks the same way), instead of every distinct term of the region.

    The parts: TermsQueries, the stored objects (MaskedObjects) and, cell-major, their positions by
    cell (cell_ptr into cell_pos) and columns (by_cell), the CountTables, the grid's kernel
    arguments; `answer_terms` assembles them."""
    q_rows, q_lo, q_hi, xmin, ymin, xmax, ymax, q_k, q_mask = queries
    o_x, o_y, o_off, o_val, o_mask = objects
    c_x, c_y, c_off, c_val, c_mask = by_cell
    slice_size, tab_ptr, tab_term, tab_count, other_ptr, other_pos = tables
    x0, y0, icw, ich, nx, ny = grid
    count = np.zeros(vocab, np.int64)
    touched = np.empty(vocab, np.int64)
    out_i = np.empty(256, np.int64)
    out_t = np.empty(256, np.int64)
    out_c = np.empty(256, np.int64)
    n = 0
    n_cells = nx * ny
    cw, ch = 1.0 / icw, 1.0 / ich
    for i in range(len(q_rows)):
        q = q_rows[i]
        lo, hi = q_lo[i], q_hi[i]
        n_touched = 0
        checked = 0
        if hi > lo:
            ix0, ix1 = axis_cell(xmin[q], x0, icw, nx), axis_cell(xmax[q], x0, icw, nx)
            iy0, iy1 = axis_cell(ymin[q], y0, ich, ny), axis_cell(ymax[q], y0, ich, ny)
            s_lo = (lo + slice_size - 1) // slice_size if slice_size > 0 else 0
            s_hi = hi // slice_size if slice_size > 0 else 0
            for cy in range(iy0, iy1 + 1):
                for cx in range(ix0, ix1 + 1):
                    c = cy * nx + cx
                    margin = 1e-9 * (cw + ch)
                    whole = (slice_size > 0 and s_lo < s_hi and 0 < cx < nx - 1 and 0 < cy < ny - 1
                             and xmin[q] <= x0 + cx * cw - margin and x0 + (cx + 1) * cw + margin <= xmax[q]
                             and ymin[q] <= y0 + cy * ch - margin and y0 + (cy + 1) * ch + margin <= ymax[q])
                    a = lower_bound(cell_pos, cell_ptr[c], cell_ptr[c + 1], lo)
                    b = lower_bound(cell_pos, a, cell_ptr[c + 1], hi)
                    if not whole:
                        n_touched, k = _scan_terms(cell_pos, False, a, b, i, q, xmin, ymin, xmax, ymax, q_mask, c_x,
                                                   c_y, c_off, c_val, c_mask, worker, True, count, touched, n_touched)
                        checked += k
                        continue
                    # the partial slices at both ends, object by object
                    m = lower_bound(cell_pos, a, b, s_lo * slice_size)
                    n_touched, k = _scan_terms(cell_pos, False, a, m, i, q, xmin, ymin, xmax, ymax, q_mask, c_x, c_y,
                                               c_off, c_val, c_mask, worker, False, count, touched, n_touched)
                    checked += k
                    m = lower_bound(cell_pos, a, b, s_hi * slice_size)
                    n_touched, k = _scan_terms(cell_pos, False, m, b, i, q, xmin, ymin, xmax, ymax, q_mask, c_x, c_y,
                                               c_off, c_val, c_mask, worker, False, count, touched, n_touched)
                    checked += k
                    # the whole slices: the tables, then the objects other workers hold too
                    for sl in range(s_lo, s_hi):
                        g = sl * n_cells + c
                        for j in range(tab_ptr[g], tab_ptr[g + 1]):
                            term = tab_term[j]
                            if count[term] == 0:
                                touched[n_touched] = term
                                n_touched += 1
                            count[term] += tab_count[j]
                        checked += tab_ptr[g + 1] - tab_ptr[g]
                    a2 = lower_bound(other_pos, other_ptr[c], other_ptr[c + 1], s_lo * slice_size)
                    b2 = lower_bound(other_pos, a2, other_ptr[c + 1], s_hi * slice_size)
                    n_touched, k = _scan_terms(other_pos, True, a2, b2, i, q, xmin, ymin, xmax, ymax, q_mask, o_x, o_y,
                                               o_off, o_val, o_mask, worker, False, count, touched, n_touched)
                    checked += k
        cut = np.iinfo(np.int64).max  # emit the terms whose rank key is <= cut
        if q_k[q] > 0 and n_touched > q_k[q] and _one_bit(q_mask, i):
            keys = np.empty(n_touched, np.int64)
            for j in range(n_touched):
                keys[j] = -count[touched[j]] * vocab + touched[j]  # (count desc, term asc)
            cut = np.partition(keys, q_k[q] - 1)[q_k[q] - 1]
        for j in range(n_touched):
            term = touched[j]
            if -count[term] * vocab + term > cut:
                count[term] = 0
                continue
            if n == len(out_i):
                out_i = np.concatenate((out_i, np.empty(n, np.int64)))
                out_t = np.concatenate((out_t, np.empty(n, np.int64)))
                out_c = np.concatenate((out_c, np.empty(n, np.int64)))
            out_i[n] = i
            out_t[n] = term
            out_c[n] = count[term]
            count[term] = 0
            n += 1
        work[i] = 1 + checked
    return out_i[:n], out_t[:n], out_c[:n]


def answer_terms(store: ObjectStore, ev: Events, rows: np.ndarray, q_mask: np.ndarray, o_mask: np.ndarray,
                 worker: int, work: np.ndarray, slice_size: int, tables: tuple) -> tuple:
    """STQ / CTQ reports: `terms_answers` for the snapshot rows `rows` of `ev` (their worker bit
    masks `q_mask`) over the store's objects (theirs `o_mask`), counted as worker `worker`, with
    the `count_tables` built for `slice_size` (0: none); writes each row's work into `work`."""
    o = store.objects
    lo, hi = store.bounds(ev, rows)
    cell_ptr, cell_pos, *major = store.cell_major()
    queries = TermsQueries(rows, lo, hi, ev.xmin, ev.ymin, ev.xmax, ev.ymax, ev.k.astype(np.int64), q_mask)
    return terms_answers(queries, MaskedObjects(o.x, o.y, o.offsets, o.values, o_mask), cell_ptr, cell_pos,
                         MaskedObjects(*major, o_mask[cell_pos]), CountTables(slice_size, *tables), store.grid.args,
                         store.vocab, worker, work)


def count_tables(store: ObjectStore, own: np.ndarray, slice_size: int) -> tuple[np.ndarray, ...]:
    """Term counts per (slice of `slice_size` positions, cell) of the objects only this worker holds
    (`own`: counted for any query that reaches it), as CSR (tab_ptr over slice * n_cells + cell,
    tab_term, tab_count); and the other objects' positions by cell (other_ptr, other_pos), sorted.
    SSTD keeps such tables per node of each time slice's R-tree (Sec. 6.1)."""
    o = store.objects
    n, n_cells, vocab = len(o), store.grid.n_cells, np.int64(store.vocab)
    cell = store.cells()
    n_slices = max(-(-n // slice_size), 1)
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(o.offsets))
    mine = own[owner]
    key = ((owner[mine] // slice_size) * n_cells + cell[owner[mine]]) * vocab + o.values[mine].astype(np.int64)
    uk, cnt = np.unique(key, return_counts=True)
    tab_ptr = np.searchsorted(uk // vocab, np.arange(n_slices * n_cells + 1, dtype=np.int64)).astype(np.int64)
    other = np.flatnonzero(~own)
    other = other[np.argsort(cell[other], kind="stable")]
    other_ptr = np.r_[0, np.cumsum(np.bincount(cell[other], minlength=n_cells))].astype(np.int64)
    return tab_ptr, (uk % vocab).astype(np.int64), cnt.astype(np.int64), other_ptr, other.astype(np.int64)
