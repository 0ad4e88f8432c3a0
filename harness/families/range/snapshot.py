"""Range's snapshot queries (SSTD's SRQ) answered from a worker's object store: every stored object
in the query's rectangle, with its keywords, within its bounds (harness/families/object_store.py)."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from harness.core.events import Events, pair_keys
from harness.core.kernels import axis_cell
from harness.families.object_store import ObjectStore, cell_candidates, qualifies

# the snapshot range queries to answer: their rows of the events, each one's range of store positions
# (lo, hi: before it and within its look-back), and the events' id, rectangle, operator and keywords
RangeQueries = namedtuple("RangeQueries", ["rows", "lo", "hi", "id", "xmin", "ymin", "xmax", "ymax", "op", "off",
                                           "val"])


@njit(cache=True)
def range_answers(queries, objects, index, grid, vocab, work):
    """(qid, oid) of every stored object in each query's rectangle, keywords and bounds. The
    queries are RangeQueries, the store's parts its StoredObjects and StoreIndex, `grid` its grid's
    kernel arguments."""
    q_rows, q_lo, q_hi, q_id, xmin, ymin, xmax, ymax, q_op, q_off, q_val = queries
    o_id, _, o_x, o_y, o_off, o_val = objects
    cell_ptr, cell_pos, ukeys, starts, post = index
    x0, y0, icw, ich, nx, ny = grid
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
                    arr, a, b = cell_candidates(cy * nx + cx, q, lo, hi, q_op, q_off, q_val, cell_ptr, cell_pos, ukeys,
                                            starts, post, vocab)
                    for t in range(a, b):
                        p = arr[t]
                        checked += 1
                        if o_x[p] < xmin[q] or o_x[p] > xmax[q] or o_y[p] < ymin[q] or o_y[p] > ymax[q]:
                            continue
                        if not qualifies(p, q, q_op, q_off, q_val, o_off, o_val):
                            continue
                        if n == len(out_q):
                            out_q = np.concatenate((out_q, np.empty(n, np.int64)))
                            out_o = np.concatenate((out_o, np.empty(n, np.int64)))
                        out_q[n] = q_id[q]
                        out_o[n] = o_id[p]
                        n += 1
        work[i] = 1 + checked
    return out_q[:n], out_o[:n]


def answer_range(store: ObjectStore, ev: Events, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SRQ: result pair keys and the work of each snapshot row."""
    work = np.ones(len(rows), np.int64)
    if len(rows) == 0 or len(store.objects) == 0:
        return np.zeros(0, np.int64), work
    lo, hi = store.bounds(ev, rows)
    queries = RangeQueries(rows, lo, hi, ev.id, ev.xmin, ev.ymin, ev.xmax, ev.ymax, ev.op, ev.offsets, ev.values)
    qid, oid = range_answers(queries, store.stored(), store.index(), store.grid.args, store.vocab, work)
    return pair_keys(qid, oid), work
