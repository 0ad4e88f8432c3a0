"""GI2, PS2Stream's worker index for range subscriptions: a uniform grid of inverted files.

A subscription is posted in every cell its rectangle overlaps, under the least frequent keyword
of an AND query (its one conjunct) or under every keyword of an OR query. An object probes the
postings of its cell under each of its distinct terms and verifies rectangle and keywords.

Batch form with exact per-event semantics: the index covers the epoch's subscriptions at once,
each with its insertion and deletion sequence numbers, and an object at seq s accepts a posting
only when inserted < s < deleted. That is lazy deletion made order-exact: a deleted query stays
in the postings (and is counted as a candidate) until the epoch ends, when it is purged from the
exported state. Postings are flat sorted arrays (CSR by cell*V + term); the previous epoch's
subscriptions form a base index built at restore time, the epoch's insertions a delta index, so
a long-lived worker does not pay to rebuild its state in the measured time.

An OR query can be posted under several terms of one object; it is reported only from the
posting of the smallest keyword the object holds, so each pair is emitted once per worker.
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit

from harness.core.events import AND, DELETE, INSERT, OBJECT, Events, small_ints
from harness.core.timing import CompileClock
from harness.families.object_store import ObjectStore, with_snapshots
from harness.families.range.snapshot import answer_range
from harness.families.base import NEVER, IndexContext, StateBundle, WorkerIndex, WorkerOutput, deletion_seqs
from harness.core.kernels import axis_cell, lower_bound
from harness.core.grid import UniformGrid


# A posting is one 64-byte row (one cache line) holding everything a candidate check reads, so
# scanning a posting list touches memory only sequentially; the rectangle columns are read
# through a float64 view of the same buffer. Columns:
INS, DEL, XMIN, YMIN, XMAX, YMAX, QID, KW = range(8)
# KW packs the query's keywords other than the posting's own term (at most two: STS queries have
# 1-3): bit 0 AND, bits 1-2 how many (0-2), bits 3-32 and 33-62 the keywords. A query with more
# keywords, or a vocabulary past 2^30, spills: count 3 and the query's position in bits 3-62,
# and its keywords are read from the query arrays instead.
_KW_BITS = 30
_KW_MASK = (1 << _KW_BITS) - 1
_SPILL = 3


@njit(cache=True)
def build_postings(q_pos, xmin, ymin, xmax, ymax, op, offsets, values, ids, ins, dele,
                   x0, y0, icw, ich, nx, ny, vocab):
    """Postings of the given queries: sorted distinct keys (cell * vocab + term), their start
    offsets, the query position of each posting and its packed row (see the column layout)."""
    total = 0
    for p in q_pos:
        cells = (axis_cell(xmax[p], x0, icw, nx) - axis_cell(xmin[p], x0, icw, nx) + 1) * (
            axis_cell(ymax[p], y0, ich, ny) - axis_cell(ymin[p], y0, ich, ny) + 1
        )
        total += cells * (1 if op[p] == AND else offsets[p + 1] - offsets[p])
    keys = np.empty(total, np.int64)
    post = np.empty(total, np.int64)
    k = 0
    for p in q_pos:
        ix0 = axis_cell(xmin[p], x0, icw, nx)
        ix1 = axis_cell(xmax[p], x0, icw, nx)
        iy0 = axis_cell(ymin[p], y0, ich, ny)
        iy1 = axis_cell(ymax[p], y0, ich, ny)
        t_lo = offsets[p + 1] - 1 if op[p] == AND else offsets[p]
        for iy in range(iy0, iy1 + 1):
            for ix in range(ix0, ix1 + 1):
                cell = iy * nx + ix
                for j in range(t_lo, offsets[p + 1]):
                    keys[k] = cell * vocab + values[j]
                    post[k] = p
                    k += 1
    order = np.argsort(keys, kind="mergesort")
    keys = keys[order]
    post = post[order]
    n_unique = 0
    for i in range(total):
        if i == 0 or keys[i] != keys[i - 1]:
            n_unique += 1
    ukeys = np.empty(n_unique, np.int64)
    starts = np.empty(n_unique + 1, np.int64)
    u = 0
    for i in range(total):
        if i == 0 or keys[i] != keys[i - 1]:
            ukeys[u] = keys[i]
            starts[u] = i
            u += 1
    starts[n_unique] = total
    rows = _aligned_rows(total)
    frows = rows.view(np.float64)
    inline = vocab <= _KW_MASK + 1
    for e in range(total):
        p = post[e]
        rows[e, INS] = ins[p]
        rows[e, DEL] = dele[p]
        frows[e, XMIN] = xmin[p]
        frows[e, YMIN] = ymin[p]
        frows[e, XMAX] = xmax[p]
        frows[e, YMAX] = ymax[p]
        rows[e, QID] = ids[p]
        term = keys[e] % vocab
        meta = 1 if op[p] == AND else 0
        if inline and offsets[p + 1] - offsets[p] <= 3:
            n_other = 0
            for j in range(offsets[p], offsets[p + 1]):
                if values[j] != term:
                    meta |= np.int64(values[j]) << (3 + _KW_BITS * n_other)
                    n_other += 1
            meta |= n_other << 1
        else:
            meta |= (_SPILL << 1) | (p << 3)
        rows[e, KW] = meta
    return ukeys, starts, post, rows


@njit(cache=True)
def _aligned_rows(n):
    """An (n, 8) int64 array whose rows start on 64-byte boundaries."""
    raw = np.empty(n * 8 + 8, np.int64)
    skip = (-(raw.ctypes.data % 64) % 64) // 8
    return raw[skip:skip + n * 8].reshape(n, 8)


@njit(cache=True)
def cell_pointers(ukeys, n_cells, vocab):
    """Where each cell's run of keys starts in ukeys (keys are cell * vocab + term, sorted), so a
    lookup binary-searches only the terms of one cell. (An open-addressing hash table over all
    keys measured slower here: its random probes evict the posting rows that objects of the same
    cell, matched one after another, would reuse.)"""
    ptr = np.empty(n_cells + 1, np.int64)
    k = 0
    for c in range(n_cells + 1):
        bound = c * vocab
        while k < len(ukeys) and ukeys[k] < bound:
            k += 1
        ptr[c] = k
    return ptr


@njit(cache=True, inline="always")
def _has(vals, lo, hi, w):
    """w is in the sorted run vals[lo:hi]."""
    for j in range(lo, hi):
        if vals[j] >= w:
            return vals[j] == w
    return False


@njit(cache=True, inline="always")
def _first_common(a, a_lo, a_hi, b, b_lo, b_hi):
    """Smallest value present in both sorted runs, or -1."""
    i, j = a_lo, b_lo
    while i < a_hi and j < b_hi:
        if a[i] == b[j]:
            return a[i]
        if a[i] < b[j]:
            i += 1
        else:
            j += 1
    return -1


@njit(cache=True, inline="always")
def _all_in(a, a_lo, a_hi, b, b_lo, b_hi):
    """Every value of sorted run a is in sorted run b."""
    j = b_lo
    for i in range(a_lo, a_hi):
        while j < b_hi and b[j] < a[i]:
            j += 1
        if j == b_hi or b[j] != a[i]:
            return False
    return True


@njit(cache=True)
def _spilled_match(p, term, o_vals, o_lo, o_hi, q_op, q_off, q_val):
    """Keyword check of a spilled posting (query position p) against the object's sorted terms."""
    if q_op[p] == AND:
        return _all_in(q_val, q_off[p], q_off[p + 1], o_vals, o_lo, o_hi)
    return _first_common(q_val, q_off[p], q_off[p + 1], o_vals, o_lo, o_hi) == term


@njit(cache=True)
def match_objects(order, seq, ids, x, y, offsets, values, x0, y0, icw, ich, nx, ny, vocab,
                  a_keys, a_ptr, a_starts, a_rows, b_keys, b_ptr, b_starts, b_rows, q_op, q_off, q_val, work):
    """Match each object row (in the given order) against the base (a), then the delta (b)
    postings; adds the candidates checked to work[row]; returns the result keys.

    Written as one loop nest on purpose (each variant was measured on 100k queries): the store
    is chosen outside the object loop, so its arrays stay loop invariant (choosing it per object
    cost 30%, a helper function per store 45%, the keyword check as an inlined function 20%);
    the output array is rebound only when full, between objects, which are then matched again
    from their first result (rebinding it inside the candidate loop costs reference counting per
    candidate: 40%)."""
    out = np.empty(1024, np.int64)
    n = 0
    for which in range(2):
        if which == 0:
            ukeys, ptr, starts, rows = a_keys, a_ptr, a_starts, a_rows
        else:
            ukeys, ptr, starts, rows = b_keys, b_ptr, b_starts, b_rows
        frows = rows.view(np.float64)
        for r in order:
            cell = axis_cell(y[r], y0, ich, ny) * nx + axis_cell(x[r], x0, icw, nx)
            s, ox, oy = seq[r], x[r], y[r]
            lo, hi = offsets[r], offsets[r + 1]
            k_lo, k_hi = ptr[cell], ptr[cell + 1]
            while True:
                m = n
                full = False
                checks = 0
                for j in range(lo, hi):
                    term = values[j]
                    key = cell * vocab + term
                    u = lower_bound(ukeys, k_lo, k_hi, key)
                    if u == k_hi or ukeys[u] != key:
                        continue
                    checks += starts[u + 1] - starts[u]
                    for e in range(starts[u], starts[u + 1]):
                        if rows[e, INS] >= s or rows[e, DEL] <= s:
                            continue
                        if ox < frows[e, XMIN] or oy < frows[e, YMIN] or ox > frows[e, XMAX] or oy > frows[e, YMAX]:
                            continue
                        # keywords: AND needs every other keyword; OR needs no smaller one held,
                        # so the pair is reported from one posting only
                        meta = rows[e, KW]
                        n_other = (meta >> 1) & 3
                        ok = True
                        if n_other == _SPILL:
                            ok = _spilled_match(meta >> 3, term, values, lo, hi, q_op, q_off, q_val)
                        elif meta & 1:
                            if n_other >= 1 and not _has(values, lo, hi, (meta >> 3) & _KW_MASK):
                                ok = False
                            elif n_other == 2 and not _has(values, lo, hi, (meta >> (3 + _KW_BITS)) & _KW_MASK):
                                ok = False
                        else:
                            if n_other >= 1:
                                w = (meta >> 3) & _KW_MASK
                                if w < term and _has(values, lo, hi, w):
                                    ok = False
                            if ok and n_other == 2:
                                w = (meta >> (3 + _KW_BITS)) & _KW_MASK
                                if w < term and _has(values, lo, hi, w):
                                    ok = False
                        if ok:
                            if m == len(out):
                                full = True
                                break
                            out[m] = (rows[e, QID] << 32) | ids[r]
                            m += 1
                    if full:
                        break
                if not full:
                    break
                bigger = np.empty(2 * len(out), np.int64)
                bigger[:n] = out[:n]
                out = bigger
            n = m
            work[r] += checks
    return out[:n]


@njit(cache=True)
def refresh_deletions(rows, post, dele):
    """Copy the queries' deletion seqs into their postings."""
    for e in range(len(post)):
        rows[e, DEL] = dele[post[e]]


class Postings:
    """One posting store: sorted distinct keys with per-cell pointers into them, each key's list
    start, and per posting the query's position and its packed row."""

    def __init__(self, ukeys, starts, post, rows, n_cells: int, vocab: int):
        self.ukeys, self.ptr = ukeys, cell_pointers(ukeys, n_cells, vocab)
        self.starts, self.post, self.rows = starts, post, rows

    @classmethod
    def empty(cls, n_cells: int) -> "Postings":
        return cls(np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros((0, 8), np.int64),
                   n_cells, 1)

    @property
    def args(self) -> tuple:
        return self.ukeys, self.ptr, self.starts, self.rows

    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.ukeys, self.ptr, self.starts, self.post, self.rows))


class GI2Index(WorkerIndex):
    family = "range"
    chunkable = True  # queries since the restore are re-posted to delta on each call

    def __init__(self, context: IndexContext, cells_per_side: int = 64):
        super().__init__(context)
        self.grid = UniformGrid.over(context.extent, cells_per_side)
        self.vocab = max(int(context.vocab_size), 1)
        # snapshot range queries (SSTD's SRQ) answer from the objects this worker was sent
        self.store = (ObjectStore(context.extent, cells_per_side, context.look_back, context.vocab_size)
                      if context.look_back > 0 else None)
        self.queries = Events.empty()
        self.ins = np.zeros(0, np.int64)
        self.dele = np.zeros(0, np.int64)
        self.n_base = 0  # queries[:n_base] are posted in base, the rest in delta
        self.base = Postings.empty(self.grid.n_cells)
        self.delta = Postings.empty(self.grid.n_cells)

    def _post(self, positions: np.ndarray) -> Postings:
        q = self.queries
        return Postings(*build_postings(positions, q.xmin, q.ymin, q.xmax, q.ymax, q.op, q.offsets, q.values, q.id,
                                        self.ins, self.dele, *self.grid.args, self.vocab),
                        self.grid.n_cells, self.vocab)

    def restore(self, state: StateBundle) -> float:
        with CompileClock() as compiling:
            seconds = self._restore(state.queries)
        if self.store is not None:
            self.store.restore(state.objects)
        return max(seconds - compiling.seconds, 0.0)

    def _restore(self, state: Events) -> float:
        t0 = time.process_time()
        self.queries = state
        self.ins = np.full(len(state), -1, np.int64)
        self.dele = np.full(len(state), NEVER, np.int64)
        self.n_base = len(state)
        self.base = self._post(np.arange(len(state), dtype=np.int64))
        self.delta = Postings.empty(self.grid.n_cells)
        return time.process_time() - t0

    def process(self, ev: Events) -> WorkerOutput:
        with CompileClock() as compiling:
            out = with_snapshots(self.store, ev, self._process, answer_range, _joined_keys)
        out.busy_s = max(out.busy_s - compiling.seconds, 0.0)
        out.counters["compile_s"] = compiling.seconds
        return out

    def _process(self, ev: Events) -> WorkerOutput:
        t0 = time.process_time()
        kind = ev.kind
        work = np.ones(len(ev), np.int64)
        ins_rows = np.flatnonzero(kind == INSERT)
        del_rows = np.flatnonzero(kind == DELETE)
        n_old = len(self.queries)
        if len(ins_rows):
            self.queries = Events.concat([self.queries, ev.take(ins_rows)])
            self.ins = np.concatenate([self.ins, ev.seq[ins_rows]])
            self.dele = np.concatenate([self.dele, np.full(len(ins_rows), NEVER, np.int64)])
        dele, orphan = deletion_seqs(self.queries.id, ev)
        np.minimum(self.dele, dele, out=self.dele)
        if len(ins_rows):
            # every query since the restore goes to delta, also those of an earlier call
            self.delta = self._post(np.arange(self.n_base, len(self.queries), dtype=np.int64))
            q = self.queries
            new_pos = np.arange(n_old, len(q), dtype=np.int64)
            ncells = self.grid.cell_ranges(q.xmin[new_pos], q.ymin[new_pos], q.xmax[new_pos], q.ymax[new_pos])
            n_terms = np.where(q.op[new_pos] == AND, 1, np.diff(q.offsets)[new_pos])
            work[ins_rows] = (ncells[:, 1] - ncells[:, 0] + 1) * (ncells[:, 3] - ncells[:, 2] + 1) * n_terms
        if len(del_rows):
            refresh_deletions(self.base.rows, self.base.post, self.dele)
            refresh_deletions(self.delta.rows, self.delta.post, self.dele)
        obj_rows = np.flatnonzero(kind == OBJECT)
        q = self.queries
        # objects in cell order: consecutive objects then scan the same posting lists while they
        # are in cache (results are per object, so the order changes nothing else)
        cells = small_ints(self.grid.cells_of(ev.x[obj_rows], ev.y[obj_rows]), self.grid.n_cells)
        by_cell = obj_rows[np.argsort(cells, kind="stable")]
        keys = match_objects(by_cell, ev.seq, ev.id, ev.x, ev.y, ev.offsets, ev.values, *self.grid.args, self.vocab,
                             *self.base.args, *self.delta.args, q.op, q.offsets, q.values, work)
        busy = time.process_time() - t0
        counters = {
            "objects": len(obj_rows),
            "inserts": len(ins_rows),
            "deletes": len(del_rows),
            "orphan_deletes": orphan,
            "candidates": int(work[obj_rows].sum() - len(obj_rows)),
            "results": len(keys),
            "postings": int(len(self.base.post) + len(self.delta.post)),
        }
        return WorkerOutput(results=keys, work=work, counters=counters, busy_s=busy)

    def export_state(self) -> StateBundle:
        return StateBundle(queries=self.queries.take(np.flatnonzero(self.dele == NEVER)),
                           objects=self.store.objects if self.store is not None else Events.empty())

    def size_bytes(self) -> int:
        arrays = [self.ins, self.dele, self.queries.offsets, self.queries.values, *self.queries.cols.values()]
        stored = self.store.size_bytes() if self.store is not None else 0
        return int(self.base.nbytes() + self.delta.nbytes() + sum(a.nbytes for a in arrays) + stored)


def _joined_keys(continuous: np.ndarray, snapshot: np.ndarray) -> np.ndarray:
    return np.concatenate([continuous, snapshot]) if len(snapshot) else continuous
