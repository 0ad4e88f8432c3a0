"""The objects a worker keeps for snapshot queries (SSTD's SRQ and SKQ), and their answers.

A snapshot query (kind SNAPSHOT) asks once, at its own arrival, about the objects that arrived
before it (seq < q.seq) within its look-back (ts > q.ts - q.tau). Its answer must come from the
objects the workers were sent earlier, so a family whose stream holds snapshot queries keeps the
objects it receives (`IndexContext.look_back` > 0, set by the family's `stream_context`), evicts
those older than the longest look-back, and carries them across epochs and migrations in
`StateBundle.objects`.

SSTD (Sec. 6.1) cuts the store into time slices of Delta, each an R-tree with inverted lists.
Here the store is kept in arrival order (seq, and ts nondecreasing along it), so "before the
query and within its look-back" is one contiguous range of positions found by two binary
searches: the slices' role without their boundary cases. Each grid cell's positions and each
(cell, term) posting list are sorted by position, so that range narrows them by binary search
too. The index is rebuilt when a call brings objects and a snapshot query needs it (an O(n log n)
sort): cheap at the harness's store sizes; incremental slices are the next step if it shows.
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit

from harness.core.events import AND, OBJECT, SNAPSHOT, Events, csr_take, pair_keys
from harness.core.grid import UniformGrid
from harness.core.kernels import axis_cell, lower_bound
from harness.families.base import WorkerOutput


class ObjectStore:
    """One worker's stored objects of one family: columns in seq order, and a grid over them."""

    def __init__(self, extent, cells_per_side: int, look_back: float, vocab: int):
        self.grid = UniformGrid.over(extent, max(int(cells_per_side), 1))
        self.look_back = float(look_back)
        self.vocab = max(int(vocab), 1)
        self.objects = Events.empty()
        self._index: tuple | None = None
        self._by_term: tuple | None = None
        self._cells: np.ndarray | None = None
        self._major: tuple | None = None
        self._fresh = True  # no slice added since the epoch's restore: the next one evicts

    def restore(self, objects: Events) -> None:
        self.objects = objects
        self._index = self._by_term = self._cells = self._major = None
        self._fresh = True

    def add(self, ev: Events) -> None:
        """Keep the objects of a slice of the stream (seq order). The epoch's first slice forgets
        the objects no query of the epoch can look back to; later slices forget nothing, so a
        query of the epoch can still be answered from the store the epoch leaves (SSTD's two-phase
        SKQ answers its second phase after the epoch, harness/engine/rounds.py)."""
        if len(ev) == 0:
            return
        fresh, self._fresh = self._fresh, False
        if fresh and len(self.objects) and np.isfinite(self.look_back):
            old = self.objects.ts <= ev.ts[0] - self.look_back
            if old.any():
                self.objects = self.objects.take(np.flatnonzero(~old))
                self._index = self._by_term = self._cells = self._major = None
        rows = np.flatnonzero(ev.kind == OBJECT)
        if len(rows):
            new = ev.take(rows)
            self.objects = Events.concat([self.objects, new]) if len(self.objects) else new
            self._index = self._by_term = self._cells = self._major = None

    def cells(self) -> np.ndarray:
        """Each stored object's grid cell."""
        if self._cells is None:
            self._cells = self.grid.cells_of(self.objects.x, self.objects.y)
        return self._cells

    def by_cell(self) -> tuple[np.ndarray, np.ndarray]:
        """(cell_ptr, cell_pos): the stored objects' positions by cell, each cell's in order."""
        cell = self.cells()
        cell_pos = np.argsort(cell, kind="stable").astype(np.int64)
        return np.r_[0, np.cumsum(np.bincount(cell, minlength=self.grid.n_cells))].astype(np.int64), cell_pos

    def cell_major(self) -> tuple:
        """(cell_ptr, cell_pos, x, y, offsets, values): `by_cell`, and the objects' locations and
        terms in that order, so that a scan of a cell's objects reads memory in sequence (in arrival
        order a cell's objects lie all over the store, and each one cost several cache misses)."""
        if self._major is None:
            cell_ptr, cell_pos = self.by_cell()
            o = self.objects
            off, val = csr_take(o.offsets, o.values, cell_pos)
            self._major = (cell_ptr, cell_pos, o.x[cell_pos], o.y[cell_pos], off, val)
        return self._major

    def index(self) -> tuple:
        """(cell_ptr, cell_pos, ukeys, starts, post): positions by cell, and by (cell, term)."""
        if self._index is None:
            o = self.objects
            n = len(o)
            cell = self.cells()
            cell_ptr, cell_pos = self.by_cell()
            owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(o.offsets))
            key = cell[owner] * np.int64(self.vocab) + o.values.astype(np.int64)
            order = np.argsort(key, kind="stable")
            key = key[order]
            first = np.r_[True, key[1:] != key[:-1]] if len(key) else np.zeros(0, np.bool_)
            starts = np.r_[np.flatnonzero(first), len(key)].astype(np.int64)
            self._index = (cell_ptr, cell_pos, key[first], starts, owner[order])
        return self._index

    def by_term(self) -> tuple:
        """(terms, starts, positions): each term's stored objects, by position; and the cell box
        (ix0, ix1, iy0, iy1) the objects occupy. For kNN queries whose keyword few objects hold,
        and ring searches that need not look past the objects."""
        if self._by_term is None:
            o = self.objects
            owner = np.repeat(np.arange(len(o), dtype=np.int64), np.diff(o.offsets))
            order = np.argsort(o.values, kind="stable")
            terms = o.values[order].astype(np.int64)
            first = np.r_[True, terms[1:] != terms[:-1]] if len(terms) else np.zeros(0, np.bool_)
            cells = self.cells()
            ix, iy = cells % self.grid.nx, cells // self.grid.nx
            box = (int(ix.min()), int(ix.max()), int(iy.min()), int(iy.max())) if len(o) else (0, -1, 0, -1)
            self._by_term = (terms[first], np.r_[np.flatnonzero(first), len(terms)].astype(np.int64), owner[order],
                             np.array(box, np.int64))
        return self._by_term

    def bounds(self, ev: Events, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per snapshot query, the positions [lo, hi) of the objects it may see."""
        o = self.objects
        hi = np.searchsorted(o.seq, ev.seq[rows], side="left")
        lo = np.searchsorted(o.ts, ev.ts[rows] - ev.tau[rows], side="right")
        return np.minimum(lo, hi).astype(np.int64), hi.astype(np.int64)

    def size_bytes(self) -> int:
        o = self.objects
        parts = [o.offsets, o.values, *o.cols.values(), *(self._index or ())]
        return int(sum(a.nbytes for a in parts))

    def stored_bytes(self) -> int:
        """The bytes of the arrays the store holds now (numpy nbytes): the objects' columns (every
        Events column, the blank query ones too), their terms (offsets, values), each object's
        cell, and whichever indexes are built at the moment (`index`: positions by cell and by
        (cell, term); `by_term`: positions by term and the cell box). Left out: Python object
        overhead (the Events, dicts, tuples, grid), the temporaries of an index build or a query,
        and the terms index's count tables and worker masks, which TermsIndex builds per call
        and does not keep. The stats' `stored_bytes` per worker (harness/engine/worker.py)."""
        o = self.objects
        parts = [o.offsets, o.values, *o.cols.values(), *(self._index or ()), *(self._by_term or ())]
        if self._cells is not None:
            parts.append(self._cells)
        parts += list(self._major or ())
        return int(sum(a.nbytes for a in parts))


def split_snapshots(ev: Events) -> tuple[np.ndarray, np.ndarray]:
    """(rows of snapshot queries, the other rows) of a slice of the stream."""
    snap = ev.kind == SNAPSHOT
    return np.flatnonzero(snap), np.flatnonzero(~snap)


# -- kernels ------------------------------------------------------------------------------------


DIRECT_POSTINGS = 2048  # an SKQ whose rarest keyword fewer stored objects hold checks them directly


@njit(cache=True, inline="always")
def _common(a, a_lo, a_hi, b, b_lo, b_hi):
    """Terms two sorted distinct lists share."""
    n = 0
    i, j = a_lo, b_lo
    while i < a_hi and j < b_hi:
        if a[i] == b[j]:
            n += 1
            i += 1
            j += 1
        elif a[i] < b[j]:
            i += 1
        else:
            j += 1
    return n


@njit(cache=True)
def _candidates(c, q, lo, hi, q_op, q_off, q_val, cell_ptr, cell_pos, ukeys, starts, post, vocab):
    """The positions in [lo, hi) to scan in cell c for query q, sorted: the postings of its keyword
    with the fewest in c under AND, else every object of c. (array, first, end)."""
    arr, a, b = cell_pos, cell_ptr[c], cell_ptr[c + 1]
    if q_op[q] == AND and q_off[q + 1] > q_off[q]:
        arr, a, b = post, 0, 0
        for j in range(q_off[q], q_off[q + 1]):
            key = c * vocab + q_val[j]
            at = lower_bound(ukeys, 0, len(ukeys), key)
            if at == len(ukeys) or ukeys[at] != key:
                return post, 0, 0  # no object of this cell has that keyword
            if j == q_off[q] or starts[at + 1] - starts[at] < b - a:
                a, b = starts[at], starts[at + 1]
    a = lower_bound(arr, a, b, lo)
    return arr, a, lower_bound(arr, a, b, hi)


@njit(cache=True, inline="always")
def _qualifies(p, q, q_op, q_off, q_val, o_off, o_val):
    need = q_off[q + 1] - q_off[q]
    if need == 0:
        return True
    hits = _common(q_val, q_off[q], q_off[q + 1], o_val, o_off[p], o_off[p + 1])
    return hits == need if q_op[q] == AND else hits > 0


@njit(cache=True)
def range_answers(q_rows, q_lo, q_hi, q_id, xmin, ymin, xmax, ymax, q_op, q_off, q_val,
                  o_id, o_x, o_y, o_off, o_val, cell_ptr, cell_pos, ukeys, starts, post,
                  x0, y0, icw, ich, nx, ny, vocab, work):
    """(qid, oid) of every stored object in each query's rectangle, keywords and bounds."""
    out_q = np.empty(256, np.int64)
    out_o = np.empty(256, np.int64)
    n = 0
    for i in range(len(q_rows)):
        q = q_rows[i]
        lo, hi = q_lo[i], q_hi[i]
        checked = 0
        if hi > lo:
            ix0, ix1 = axis_cell(xmin[q], x0, icw, nx), axis_cell(xmax[q], x0, icw, nx)
            iy0, iy1 = axis_cell(ymin[q], y0, ich, ny), axis_cell(ymax[q], y0, ich, ny)
            for cy in range(iy0, iy1 + 1):
                for cx in range(ix0, ix1 + 1):
                    arr, a, b = _candidates(cy * nx + cx, q, lo, hi, q_op, q_off, q_val, cell_ptr, cell_pos, ukeys,
                                            starts, post, vocab)
                    for t in range(a, b):
                        p = arr[t]
                        checked += 1
                        if o_x[p] < xmin[q] or o_x[p] > xmax[q] or o_y[p] < ymin[q] or o_y[p] > ymax[q]:
                            continue
                        if not _qualifies(p, q, q_op, q_off, q_val, o_off, o_val):
                            continue
                        if n == len(out_q):
                            out_q = np.concatenate((out_q, np.empty(n, np.int64)))
                            out_o = np.concatenate((out_o, np.empty(n, np.int64)))
                        out_q[n] = q_id[q]
                        out_o[n] = o_id[p]
                        n += 1
        work[i] = 1 + checked
    return out_q[:n], out_o[:n]


@njit(cache=True, inline="always")
def _offer(p, o_x, o_y, o_seq, qx, qy, kk, best_d, best_p, have, limit):
    """Object p into the k best by (d2, seq) so far, if d2 <= limit; returns the new count."""
    dx = o_x[p] - qx
    dy = o_y[p] - qy
    d2 = dx * dx + dy * dy
    if d2 > limit:
        return have
    if have == kk and not (d2 < best_d[kk - 1] or (d2 == best_d[kk - 1] and o_seq[p] < o_seq[best_p[kk - 1]])):
        return have
    pos = have if have < kk else kk - 1
    while pos > 0 and (best_d[pos - 1] > d2 or (best_d[pos - 1] == d2 and o_seq[best_p[pos - 1]] > o_seq[p])):
        best_d[pos] = best_d[pos - 1]
        best_p[pos] = best_p[pos - 1]
        pos -= 1
    best_d[pos] = d2
    best_p[pos] = p
    return have + 1 if have < kk else have


@njit(cache=True)
def knn_answers(q_rows, q_lo, q_hi, q_id, q_x, q_y, q_k, q_r2, q_op, q_off, q_val,
                o_id, o_seq, o_x, o_y, o_off, o_val, cell_ptr, cell_pos, ukeys, starts, post,
                x0, y0, icw, ich, nx, ny, vocab, t_terms, t_starts, t_post, box, direct, work):
    """Each query's k nearest qualifying stored objects by (d2, seq). Under AND, when the query's
    rarest keyword is held by few stored objects of its bounds (at most `direct`), those are
    checked directly; otherwise the search goes ring by ring around the query's cell, within the
    cells the objects occupy (`box`): ring r lies outside the square of rings < r, so once that
    square's inner distance exceeds the k-th d2 no unscanned object can rank (strictly: an older
    object at the same distance would). `q_r2`: per query, the largest d2 an answer may have (inf:
    none; SSTD's second SKQ phase). Rows (qid, oid, seq) and d2, query by query."""
    total = 0
    for i in range(len(q_rows)):
        total += max(q_k[q_rows[i]], 1)
    ids = np.empty((total, 3), np.int64)
    dist = np.empty(total, np.float64)
    n = 0
    cw, ch = 1.0 / icw, 1.0 / ich
    for i in range(len(q_rows)):
        q = q_rows[i]
        kk = max(q_k[q], 1)
        lo, hi = q_lo[i], q_hi[i]
        best_d = np.empty(kk, np.float64)
        best_p = np.empty(kk, np.int64)
        have = 0
        checked = 0
        qx, qy, limit = q_x[q], q_y[q], q_r2[q]
        cx, cy = axis_cell(qx, x0, icw, nx), axis_cell(qy, y0, ich, ny)
        last = max(max(cx - box[0], box[1] - cx), max(cy - box[2], box[3] - cy))
        r = 0
        if q_op[q] == AND and q_off[q + 1] > q_off[q] and hi > lo:  # the rarest keyword's holders
            best_a, best_b = 0, -1
            for j in range(q_off[q], q_off[q + 1]):
                at = lower_bound(t_terms, 0, len(t_terms), q_val[j])
                a, b = 0, 0
                if at < len(t_terms) and t_terms[at] == q_val[j]:
                    a = lower_bound(t_post, t_starts[at], t_starts[at + 1], lo)
                    b = lower_bound(t_post, a, t_starts[at + 1], hi)
                if best_b < 0 or b - a < best_b - best_a:
                    best_a, best_b = a, b
            if best_b - best_a <= direct:
                for t in range(best_a, best_b):
                    p = t_post[t]
                    checked += 1
                    if _qualifies(p, q, q_op, q_off, q_val, o_off, o_val):
                        have = _offer(p, o_x, o_y, o_seq, qx, qy, kk, best_d, best_p, have, limit)
                r = last + 1  # done
        while hi > lo and r <= last:
            if r > 0 and (have == kk or limit < np.inf):
                inner = min(min(qx - (x0 + (cx - r + 1) * cw), (x0 + (cx + r) * cw) - qx),
                            min(qy - (y0 + (cy - r + 1) * ch), (y0 + (cy + r) * ch) - qy))
                inner *= 1.0 - 1e-9  # a margin for the boundaries' rounding: stopping later is safe
                if inner > 0.0 and inner * inner > (min(best_d[kk - 1], limit) if have == kk else limit):
                    break
            for gy in range(max(cy - r, box[2]), min(cy + r, box[3]) + 1):
                edge_row = gy == cy - r or gy == cy + r
                for gx in range(max(cx - r, box[0]), min(cx + r, box[1]) + 1):
                    if not edge_row and gx != cx - r and gx != cx + r:
                        continue  # inside the ring: scanned before
                    arr, a, b = _candidates(gy * nx + gx, q, lo, hi, q_op, q_off, q_val, cell_ptr, cell_pos, ukeys,
                                            starts, post, vocab)
                    for t in range(a, b):
                        p = arr[t]
                        checked += 1
                        if _qualifies(p, q, q_op, q_off, q_val, o_off, o_val):
                            have = _offer(p, o_x, o_y, o_seq, qx, qy, kk, best_d, best_p, have, limit)
            r += 1
        for j in range(have):
            ids[n, 0] = q_id[q]
            ids[n, 1] = o_id[best_p[j]]
            ids[n, 2] = o_seq[best_p[j]]
            dist[n] = best_d[j]
            n += 1
        work[i] = 1 + checked
    return ids[:n], dist[:n]


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
def terms_answers(q_rows, q_lo, q_hi, xmin, ymin, xmax, ymax, q_k, q_mask, o_x, o_y, o_off, o_val, o_mask,
                  cell_ptr, cell_pos, c_x, c_y, c_off, c_val, c_mask, x0, y0, icw, ich, nx, ny, vocab, worker, work,
                  slice_size, tab_ptr, tab_term, tab_count, other_ptr, other_pos):
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
    (the merge ranks the same way), instead of every distinct term of the region."""
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


# -- the two families' use ----------------------------------------------------------------------


def answer_range(store: ObjectStore, ev: Events, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SRQ: result pair keys and the work of each snapshot row."""
    work = np.ones(len(rows), np.int64)
    if len(rows) == 0 or len(store.objects) == 0:
        return np.zeros(0, np.int64), work
    lo, hi = store.bounds(ev, rows)
    o = store.objects
    qid, oid = range_answers(rows, lo, hi, ev.id, ev.xmin, ev.ymin, ev.xmax, ev.ymax, ev.op, ev.offsets, ev.values,
                             o.id, o.x, o.y, o.offsets, o.values, *store.index(), *store.grid.args, store.vocab,
                             work)
    return pair_keys(qid, oid), work


def answer_knn(store: ObjectStore, ev: Events, rows: np.ndarray,
               r2: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SKQ: the local k nearest as (qid, oid, seq) rows and d2, and the work of each snapshot row;
    `r2` (per event of `ev`): the largest d2 an answer may have (None: no bound)."""
    work = np.ones(len(rows), np.int64)
    if len(rows) == 0 or len(store.objects) == 0:
        return np.zeros((0, 3), np.int64), np.zeros(0), work
    lo, hi = store.bounds(ev, rows)
    o = store.objects
    r2 = np.full(len(ev), np.inf) if r2 is None else np.asarray(r2, np.float64)
    ids, d2 = knn_answers(rows, lo, hi, ev.id, ev.x, ev.y, ev.k.astype(np.int64), r2, ev.op, ev.offsets, ev.values,
                          o.id, o.seq, o.x, o.y, o.offsets, o.values, *store.index(), *store.grid.args, store.vocab,
                          *store.by_term(), DIRECT_POSTINGS, work)
    return ids, d2, work


def with_snapshots(store: ObjectStore | None, ev: Events, continuous, answer, join) -> WorkerOutput:
    """A slice of the stream through a family's index: the objects into the store, the snapshot
    queries answered from it (`answer(store, ev, rows) -> (results, work)`), everything else
    through the continuous index (`continuous(events) -> WorkerOutput`), the two results joined
    (`join(continuous, snapshot)`) and the work aligned with the slice's rows."""
    if store is None:
        return continuous(ev)
    t0 = time.process_time()
    store.add(ev)
    snap, rest = split_snapshots(ev)
    if len(snap) == 0:
        store_s = time.process_time() - t0
        out = continuous(ev)
        out.busy_s += store_s
        return out
    *results, snap_work = answer(store, ev, snap)
    store_s = time.process_time() - t0
    out = continuous(ev.take(rest))
    work = np.ones(len(ev), np.int64)
    work[rest] = out.work
    work[snap] = snap_work
    snap_results = results[0] if len(results) == 1 else tuple(results)
    before = len(out.results)
    out.results = join(out.results, snap_results)
    out.work = work
    out.busy_s += store_s
    out.counters["snapshots"] = len(snap)
    out.counters["snapshot_checks"] = int(snap_work.sum() - len(snap))
    out.counters["results"] = out.counters.get("results", before) + len(out.results) - before
    return out

