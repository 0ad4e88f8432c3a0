"""The QT-tree's compiled routing kernels and the flattened tree's encoding they read (node kinds,
the live-term bitmask, the fallback hash of terms a textual node's sample never saw), kept apart
so the router, the builder and FG's rebuild (strategies/sstd/fgtree.py) share one definition.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

LEAF, SPATIAL, TEXT = 0, 1, 2
TRACKED = 62  # term positions tracked in a live-term bitmask; later positions are always live
ALL_LIVE = -1  # int64 with every bit set


@njit(cache=True, inline="always")
def _fallback_child(w, node):
    """Child of a term the node's sample never saw: a hash of (term, node), spread evenly."""
    h = ((w * 2654435761) ^ (node * 40503)) & 0xFFFFFFFF
    return (h >> 30) & 3


# --- routing kernels ------------------------------------------------------------------------------
# A row walks the flattened tree depth-first, continuing into its first child and stacking the
# others. Spatial node: every quadrant the rectangle reaches (a point reaches one: < mid goes
# left/below). Textual node: a term follows one path through consecutive textual nodes (it stays
# live only in the child owning it), so each maximal run of textual nodes is compiled at fit into
# one term -> exit table (`exit_table`, exits are the first non-textual nodes); a row jumps to the
# exits of its live terms, and each exit inherits the live terms that reached it. AND queries have
# one live term, their last (least frequent) one; a row without terms takes the first children.
# Kernels fill caller-owned buffers and stop before a row could overflow them (no reallocation,
# hence no reference counting, inside the loop); the wrapper (router.py) sizes the buffer for
# n_workers pairs per row (pages never written cost nothing), so it resumes only past LAZY_PAIRS.


# the flattened tree as the routing kernel reads it (QTTreeRouter's arrays, router.py): per node its
# kind, first child and split midpoints; per head of a textual run its term -> exit table (offset and
# length into `exit_table`; `exit_worker`: the exit's worker where the exit is a leaf, else -1), the
# exit of a row without terms (`empty_exit`) and whether every exit is a leaf (`leaf_run`); per node
# its leaf and per leaf its worker
FlatTree = namedtuple("FlatTree", ["kind", "first_child", "mid_x", "mid_y", "exit_off", "exit_len", "exit_table",
                                   "empty_exit", "leaf_run", "exit_worker", "node_leaf", "leaf_worker"])

# rows to route: their event rows, rectangles (objects: the point in xmin, ymin), keywords as CSR over
# every event, and per row whether only its last keyword is live (an AND query)
RouteRows = namedtuple("RouteRows", ["rows", "xmin", "ymin", "xmax", "ymax", "offsets", "values", "last_only"])


@njit(cache=True)
def route_kernel(batch, begin, points, tree, n_workers, out_r, out_w, total):
    """`batch` (RouteRows) from `begin` on down the tree (FlatTree), their (row, worker) pairs into
    out_r/out_w from `total` on; returns (next row, new end). `points`: the rows are objects
    (xmin, ymin is the point; xmax, ymax are not read). The named tuples are unpacked once per
    call and the per-row walk stays in this one loop: helper kernels called per row (or inlined
    with their array arguments) cost numba reference counts per array per call, measurably
    (ADR-0081)."""
    rows, xmin, ymin, xmax, ymax, offsets, values, last_only = batch
    (kind, first_child, mid_x, mid_y, exit_off, exit_len, exit_table, empty_exit, leaf_run, exit_worker, node_leaf,
     leaf_worker) = tree
    n_nodes = len(kind)
    stamp = np.full(n_workers, -1, np.int64)
    st_node = np.empty(4 * n_nodes + 4, np.int64)
    st_mask = np.empty(4 * n_nodes + 4, np.int64)
    acc = np.zeros(n_nodes, np.int64)
    seen = np.full(n_nodes, -1, np.int64)
    touched = np.empty(n_nodes, np.int64)
    token = 0
    cap = len(out_r)
    for i in range(begin, len(rows)):
        if total + n_workers >= cap:  # a row writes at most n_workers pairs plus one discarded write
            return i, total
        r = rows[i]
        x0 = xmin[r]
        y0 = ymin[r]
        x1 = x0 if points else xmax[r]
        y1 = y0 if points else ymax[r]
        node = 0
        mask = np.int64(ALL_LIVE)
        top = 0
        while True:
            k = kind[node]
            if k == SPATIAL:
                mx = mid_x[node]
                my = mid_y[node]
                fc = first_child[node]
                if points:  # one quadrant
                    node = fc + (1 if x0 >= mx else 0) + (2 if y0 >= my else 0)
                    continue
                nxt = -1
                for c in range(4):
                    ok_x = x1 >= mx if (c & 1) else x0 < mx
                    ok_y = y1 >= my if (c >> 1) else y0 < my
                    if ok_x and ok_y:
                        if nxt < 0:
                            nxt = fc + c
                        else:
                            st_node[top] = fc + c
                            st_mask[top] = mask
                            top += 1
                node = nxt
            elif k == LEAF:
                w = leaf_worker[node_leaf[node]]
                out_r[total] = r  # branch-free duplicate stamp (see the all-leaf run below)
                out_w[total] = w
                total += stamp[w] != i
                stamp[w] = i
                if top == 0:
                    break
                top -= 1
                node = st_node[top]
                mask = st_mask[top]
            else:  # the head of a textual run: jump to the exits of the live terms
                lo = offsets[r]
                hi = offsets[r + 1]
                start = hi - 1 if (last_only[i] and hi > lo) else lo
                if leaf_run[node] and hi > lo:  # every exit is a leaf: emit workers directly
                    off = exit_off[node]
                    length = exit_len[node]
                    for j in range(start, hi):
                        p = j - lo
                        if p < TRACKED and not (mask >> p) & 1:
                            continue
                        t = values[j]
                        if t < length:
                            w = np.int64(exit_worker[off + t])
                        else:
                            e = node
                            while kind[e] == TEXT:
                                e = first_child[e] + _fallback_child(t, e)
                            w = leaf_worker[node_leaf[e]]
                        # branch-free duplicate stamp: always write, advance only for a new worker
                        # (the data-dependent branch measured slower here, ~5 distinct of 7.5 terms)
                        out_r[total] = r
                        out_w[total] = w
                        total += stamp[w] != i
                        stamp[w] = i
                    if top == 0:
                        break
                    top -= 1
                    node = st_node[top]
                    mask = st_mask[top]
                    continue
                token += 1
                n_t = 0
                for j in range(start, hi):
                    p = j - lo
                    if p < TRACKED and not (mask >> p) & 1:
                        continue
                    w = values[j]
                    if w < exit_len[node]:
                        e = np.int64(exit_table[exit_off[node] + w])
                    else:  # past the table: every textual node on the path uses the fallback hash
                        e = node
                        while kind[e] == TEXT:
                            e = first_child[e] + _fallback_child(w, e)
                    if seen[e] != token:
                        seen[e] = token
                        acc[e] = 0
                        touched[n_t] = e
                        n_t += 1
                    if p < TRACKED:
                        acc[e] |= np.int64(1) << p
                if n_t == 0:  # no terms (or, impossibly, no live one): the first children
                    node = empty_exit[node]
                    continue
                for t in range(1, n_t):
                    st_node[top] = touched[t]
                    st_mask[top] = acc[touched[t]]
                    top += 1
                node = touched[0]
                mask = acc[node]
    return len(rows), total


@njit(cache=True)
def route_rects_every_child(rows, xmin, ymin, xmax, ymax, kind, first_child, mid_x, mid_y, node_leaf, leaf_worker,
                            n_workers):
    """(row, worker) pairs of rectangles that carry no keywords (a top-k-terms query): every
    quadrant a spatial node's rectangle reaches, every child of a textual node (an object of any
    term may be there), each worker once per row."""
    out_r = np.empty(16, np.int64)
    out_w = np.empty(16, np.int64)
    n = 0
    stack = np.empty(4 * len(kind) + 4, np.int64)
    stamp = np.full(n_workers, -1, np.int64)
    for i in range(len(rows)):
        r = rows[i]
        top = 1
        stack[0] = 0
        while top:
            top -= 1
            node = stack[top]
            k = kind[node]
            if k == LEAF:
                w = leaf_worker[node_leaf[node]]
                if stamp[w] != i:
                    stamp[w] = i
                    if n == len(out_r):
                        out_r = np.concatenate((out_r, np.empty(n, np.int64)))
                        out_w = np.concatenate((out_w, np.empty(n, np.int64)))
                    out_r[n] = r
                    out_w[n] = w
                    n += 1
                continue
            fc = first_child[node]
            for c in range(4):
                if k == SPATIAL:
                    ok_x = xmax[r] >= mid_x[node] if (c & 1) else xmin[r] < mid_x[node]
                    ok_y = ymax[r] >= mid_y[node] if (c >> 1) else ymin[r] < mid_y[node]
                    if not (ok_x and ok_y):
                        continue
                stack[top] = fc + c
                top += 1
    return out_r[:n], out_w[:n]


@njit(cache=True)
def _route_points_spatial(rows, x, y, kind, first_child, mid_x, mid_y, node_leaf, leaf_worker):
    """Objects down a tree without textual nodes: one leaf each (the common, fast case)."""
    out = np.empty(len(rows), np.int64)
    for i in range(len(rows)):
        r = rows[i]
        px = x[r]
        py = y[r]
        node = 0
        while kind[node] == SPATIAL:
            node = first_child[node] + (1 if px >= mid_x[node] else 0) + (2 if py >= mid_y[node] else 0)
        out[i] = leaf_worker[node_leaf[node]]
    return out


def fallback_children(w: np.ndarray, node: int) -> np.ndarray:
    """`_fallback_child` over an array of term ids (int8 children)."""
    w = np.asarray(w, np.int64)
    return ((((w * 2654435761) ^ (int(node) * 40503)) & 0xFFFFFFFF) >> 30).astype(np.int8)
