"""Range's snapshot queries (SSTD's SRQ) answered from a worker's object store: every stored object
in the query's rectangle, with its keywords, within its bounds (harness/families/object_store.py)."""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.events import Events, pair_keys
from harness.core.kernels import axis_cell
from harness.families.object_store import ObjectStore, cell_candidates, qualifies


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
    o = store.objects
    qid, oid = range_answers(rows, lo, hi, ev.id, ev.xmin, ev.ymin, ev.xmax, ev.ymax, ev.op, ev.offsets, ev.values,
                             o.id, o.x, o.y, o.offsets, o.values, *store.index(), *store.grid.args, store.vocab,
                             work)
    return pair_keys(qid, oid), work
