"""The objects a worker keeps for snapshot queries (SSTD's SRQ, SKQ and STQ), shared by every family
that has them.

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

Each family answers its own snapshot queries from the store, in its folder
(harness/families/<name>/snapshot.py: range's SRQ, kNN's SKQ, frequent_terms' STQ and CTQ reports), with the
kernel helpers below (`cell_candidates`, `qualifies`); `with_snapshots` runs a slice of the stream
through the store, the family's answer and its continuous index.
"""

from __future__ import annotations

import time
from collections import namedtuple

import numpy as np
from numba import njit

from harness.core.events import AND, OBJECT, SNAPSHOT, Events, csr_take
from harness.core.grid import UniformGrid
from harness.core.kernels import lower_bound
from harness.families.base import WorkerOutput


# the store's objects as the snapshot kernels read them: id, seq, location, terms as CSR
StoredObjects = namedtuple("StoredObjects", ["id", "seq", "x", "y", "off", "val"])

# positions by grid cell (cell_ptr into cell_pos), and by (cell, term): the distinct keys
# cell * vocab + term, each key's range of `post` (starts), the positions
StoreIndex = namedtuple("StoreIndex", ["cell_ptr", "cell_pos", "keys", "starts", "post"])

# positions by term: the distinct terms, each term's range of `post` (starts), the positions; and the
# cell box (ix0, ix1, iy0, iy1) the objects occupy
TermIndex = namedtuple("TermIndex", ["terms", "starts", "post", "box"])


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

    def stored(self) -> StoredObjects:
        """The stored objects' columns for the snapshot kernels."""
        o = self.objects
        return StoredObjects(o.id, o.seq, o.x, o.y, o.offsets, o.values)

    def index(self) -> StoreIndex:
        """Positions by cell, and by (cell, term)."""
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
            self._index = StoreIndex(cell_ptr, cell_pos, key[first], starts, owner[order])
        return self._index

    def by_term(self) -> TermIndex:
        """Each term's stored objects, by position, and the cell box the objects occupy. For kNN queries whose keyword few objects hold,
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
            self._by_term = TermIndex(terms[first], np.r_[np.flatnonzero(first), len(terms)].astype(np.int64),
                                      owner[order], np.array(box, np.int64))
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


# -- kernel helpers the families' answers share ---------------------------------------------------


@njit(cache=True, inline="always")
def common_terms(a, a_lo, a_hi, b, b_lo, b_hi):
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
def cell_candidates(c, q, lo, hi, q_op, q_off, q_val, cell_ptr, cell_pos, ukeys, starts, post, vocab):
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
def qualifies(p, q, q_op, q_off, q_val, o_off, o_val):
    """Whether stored object p holds query q's keywords (AND: all of them, OR: one; none: any object)."""
    need = q_off[q + 1] - q_off[q]
    if need == 0:
        return True
    hits = common_terms(q_val, q_off[q], q_off[q + 1], o_val, o_off[p], o_off[p + 1])
    return hits == need if q_op[q] == AND else hits > 0


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

