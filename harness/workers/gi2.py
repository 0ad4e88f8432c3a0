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

from harness.events import AND, DELETE, INSERT, OBJECT, Events
from harness.workers.base import NEVER, CompileClock, IndexContext, WorkerIndex, WorkerOutput, deletion_seqs
from strategies.kernels import axis_cell
from strategies.spatial import UniformGrid


@njit(cache=True)
def build_postings(q_pos, xmin, ymin, xmax, ymax, op, offsets, values, x0, y0, icw, ich, nx, ny, vocab):
    """Postings of the given queries: sorted distinct keys, their start offsets, query positions."""
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
    return ukeys, starts, post


@njit(cache=True)
def cell_pointers(ukeys, n_cells, vocab):
    """Where each cell's run of keys starts in ukeys (keys are cell * vocab + term, sorted), so a
    lookup binary-searches only the few terms of one cell instead of every key."""
    ptr = np.empty(n_cells + 1, np.int64)
    k = 0
    for c in range(n_cells + 1):
        bound = c * vocab
        while k < len(ukeys) and ukeys[k] < bound:
            k += 1
        ptr[c] = k
    return ptr


@njit(cache=True, inline="always")
def _lower_bound(arr, key, lo, hi):
    while lo < hi:
        mid = (lo + hi) >> 1
        if arr[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo


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


@njit(cache=True, inline="always")
def _scan(key, cell, term, s, oid, ox, oy, o_vals, o_lo, o_hi, ukeys, starts, post, cell_ptr, rect, life,
          q_id, q_op, q_off, q_val, out, n):
    """Scan one posting list; returns (out, n, candidates checked). Each posting carries its
    query's rectangle and lifetime, so the scan reads memory sequentially and touches the query's
    keywords only when place and time already match."""
    hi = cell_ptr[cell + 1]
    u = _lower_bound(ukeys, key, cell_ptr[cell], hi)
    if u == hi or ukeys[u] != key:
        return out, n, 0
    for e in range(starts[u], starts[u + 1]):
        if life[e, 0] >= s or life[e, 1] <= s:
            continue
        if ox < rect[e, 0] or oy < rect[e, 1] or ox > rect[e, 2] or oy > rect[e, 3]:
            continue
        p = post[e]
        if q_op[p] == AND:
            ok = _all_in(q_val, q_off[p], q_off[p + 1], o_vals, o_lo, o_hi)
        else:
            ok = _first_common(q_val, q_off[p], q_off[p + 1], o_vals, o_lo, o_hi) == term
        if ok:
            if n == len(out):
                bigger = np.empty(2 * len(out) + 16, np.int64)
                bigger[:n] = out[:n]
                out = bigger
            out[n] = (q_id[p] << 32) | oid
            n += 1
    return out, n, starts[u + 1] - starts[u]


@njit(cache=True)
def match_objects(rows, seq, ids, x, y, offsets, values, x0, y0, icw, ich, nx, ny, vocab,
                  a_keys, a_starts, a_post, a_ptr, a_rect, a_life, b_keys, b_starts, b_post, b_ptr, b_rect, b_life,
                  q_id, q_op, q_off, q_val, work):
    """Match each object row against both indexes; fills work[row]; returns result keys."""
    out = np.empty(1024, np.int64)
    n = 0
    for r in rows:
        cell = axis_cell(y[r], y0, ich, ny) * nx + axis_cell(x[r], x0, icw, nx)
        checks = 0
        lo, hi = offsets[r], offsets[r + 1]
        for j in range(lo, hi):
            t = values[j]
            key = cell * vocab + t
            out, n, c = _scan(key, cell, t, seq[r], ids[r], x[r], y[r], values, lo, hi, a_keys, a_starts, a_post,
                              a_ptr, a_rect, a_life, q_id, q_op, q_off, q_val, out, n)
            checks += c
            out, n, c = _scan(key, cell, t, seq[r], ids[r], x[r], y[r], values, lo, hi, b_keys, b_starts, b_post,
                              b_ptr, b_rect, b_life, q_id, q_op, q_off, q_val, out, n)
            checks += c
        work[r] = 1 + checks
    return out[:n]


def _empty_postings(n_cells: int):
    return (np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(n_cells + 1, np.int64),
            np.zeros((0, 4), np.float64))


class GI2Index(WorkerIndex):
    family = "range"

    def __init__(self, context: IndexContext, cells_per_side: int = 64):
        super().__init__(context)
        self.grid = UniformGrid.over(context.extent, cells_per_side)
        self.vocab = max(int(context.vocab_size), 1)
        self.queries = Events.empty()
        self.ins = np.zeros(0, np.int64)
        self.dele = np.zeros(0, np.int64)
        self.base = _empty_postings(self.grid.n_cells)
        self.delta = _empty_postings(self.grid.n_cells)

    def _post(self, positions: np.ndarray):
        q = self.queries
        ukeys, starts, post = build_postings(positions, q.xmin, q.ymin, q.xmax, q.ymax, q.op, q.offsets, q.values,
                                             *self.grid.args, self.vocab)
        rect = np.stack([q.xmin[post], q.ymin[post], q.xmax[post], q.ymax[post]], axis=1)
        return ukeys, starts, post, cell_pointers(ukeys, self.grid.n_cells, self.vocab), rect

    def _life(self, postings) -> np.ndarray:
        """(insertion seq, deletion seq) per posting, gathered after this epoch's deletions."""
        post = postings[2]
        return np.stack([self.ins[post], self.dele[post]], axis=1)

    def restore(self, state: Events) -> float:
        with CompileClock() as compiling:
            seconds = self._restore(state)
        return max(seconds - compiling.seconds, 0.0)

    def _restore(self, state: Events) -> float:
        t0 = time.process_time()
        self.queries = state
        self.ins = np.full(len(state), -1, np.int64)
        self.dele = np.full(len(state), NEVER, np.int64)
        self.base = self._post(np.arange(len(state), dtype=np.int64))
        self.delta = _empty_postings(self.grid.n_cells)
        return time.process_time() - t0

    def process(self, ev: Events) -> WorkerOutput:
        with CompileClock() as compiling:
            out = self._process(ev)
        out.busy_s = max(out.busy_s - compiling.seconds, 0.0)
        out.counters["compile_s"] = compiling.seconds
        return out

    def _process(self, ev: Events) -> WorkerOutput:
        t0 = time.process_time()
        kind = ev.kind
        work = np.ones(len(ev), np.int64)
        ins_rows = np.flatnonzero(kind == INSERT)
        n_old = len(self.queries)
        if len(ins_rows):
            self.queries = Events.concat([self.queries, ev.take(ins_rows)])
            self.ins = np.concatenate([self.ins, ev.seq[ins_rows]])
            self.dele = np.concatenate([self.dele, np.full(len(ins_rows), NEVER, np.int64)])
            new_pos = np.arange(n_old, len(self.queries), dtype=np.int64)
            self.delta = self._post(new_pos)
            q = self.queries
            ncells = self.grid.cell_ranges(q.xmin[new_pos], q.ymin[new_pos], q.xmax[new_pos], q.ymax[new_pos])
            n_terms = np.where(q.op[new_pos] == AND, 1, np.diff(q.offsets)[new_pos])
            work[ins_rows] = (ncells[:, 1] - ncells[:, 0] + 1) * (ncells[:, 3] - ncells[:, 2] + 1) * n_terms
        del_rows = np.flatnonzero(kind == DELETE)
        dele, orphan = deletion_seqs(self.queries.id, ev)
        np.minimum(self.dele, dele, out=self.dele)
        obj_rows = np.flatnonzero(kind == OBJECT)
        q = self.queries
        # objects in cell order: consecutive objects then scan the same posting lists while they
        # are in cache (results are per object, so the order changes nothing else)
        by_cell = obj_rows[np.argsort(self.grid.cells_of(ev.x[obj_rows], ev.y[obj_rows]), kind="stable")]
        keys = match_objects(
            by_cell, ev.seq, ev.id, ev.x, ev.y, ev.offsets, ev.values, *self.grid.args, self.vocab,
            *self.base, self._life(self.base), *self.delta, self._life(self.delta), q.id, q.op, q.offsets,
            q.values, work,
        )
        busy = time.process_time() - t0
        counters = {
            "objects": len(obj_rows),
            "inserts": len(ins_rows),
            "deletes": len(del_rows),
            "orphan_deletes": orphan,
            "candidates": int(work[obj_rows].sum() - len(obj_rows)),
            "results": len(keys),
            "postings": int(len(self.base[2]) + len(self.delta[2])),
        }
        return WorkerOutput(keys=keys, work=work, counters=counters, busy_s=busy)

    def export_state(self) -> Events:
        live = np.flatnonzero(self.dele == NEVER)
        return self.queries.take(live)

    def size_bytes(self) -> int:
        arrays = [*self.base, *self.delta, self.ins, self.dele, self.queries.offsets, self.queries.values]
        arrays += list(self.queries.cols.values())
        return int(sum(a.nbytes for a in arrays))
