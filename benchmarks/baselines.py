"""Fair baselines: what a user would write with maintained libraries (numpy, shapely) instead of
this project's numba kernels. Each returns its answer in the fast path's form, so the benchmark
asserts the two equal on the timed input, and each is timed the same way as the fast path (process
CPU time, the same rounds, paired). They share no code with the indexes and routers they check.
Pure-Python loops stay beside some of them as a second reference, never as the headline ratio."""

from __future__ import annotations

import numpy as np
import shapely

from harness.core.events import AND, csr_take, pair_keys


def numpy_grid_route(grid, cell_worker, x, y):
    """The grid router's object routing vectorised: each point's clamped cell, then its worker."""
    cx = np.clip(np.floor((x - grid.x0) * grid.inv_cw), 0, grid.nx - 1).astype(np.int64)
    cy = np.clip(np.floor((y - grid.y0) * grid.inv_ch), 0, grid.ny - 1).astype(np.int64)
    return cell_worker[cy * grid.nx + cx]


def query_tree(q_ev):
    """A shapely STRtree over the queries' rectangles (its build is set-up, like an index's restore)."""
    return shapely.STRtree(shapely.box(q_ev.xmin, q_ev.ymin, q_ev.xmax, q_ev.ymax))


def strtree_pairs(tree, q_ev, o_ev, vocab):
    """(query index, object index) of the matching pairs: spatial filter by the STRtree's bulk query
    with the object points, keyword check by sorted-key membership (AND: every query term in the
    object, OR: one), all in numpy."""
    pts = shapely.points(o_ev.x, o_ev.y)
    o_idx, q_idx = tree.query(pts, predicate="intersects")
    q_off, q_val = csr_take(q_ev.offsets, q_ev.values, q_idx)
    nt = np.diff(q_off)
    pair = np.repeat(np.arange(len(q_idx)), nt)
    lookup = o_idx[pair].astype(np.int64) * vocab + q_val
    o_keys = np.repeat(np.arange(len(o_ev), dtype=np.int64), np.diff(o_ev.offsets)) * vocab + o_ev.values
    at = np.minimum(np.searchsorted(o_keys, lookup), len(o_keys) - 1)
    hits = np.bincount(pair, weights=(o_keys[at] == lookup), minlength=len(q_idx))
    ok = np.where(q_ev.op[q_idx] == AND, hits == nt, hits >= 1)
    return q_idx[ok], o_idx[ok]


def strtree_match(tree, q_ev, o_ev, vocab):
    """Sorted (qid, oid) keys of the objects matching the tree's queries."""
    q, o = strtree_pairs(tree, q_ev, o_ev, vocab)
    return np.sort(pair_keys(q_ev.id[q], o_ev.id[o]))


def strtree_stream(tree, q_ev, born, dies, o_ev, vocab):
    """A worker's sub-stream answered in one batch: the tree holds every query live at some point
    of the stream (the restored ones and those inserted in it); a pair counts when the object's seq
    falls in the query's lifetime (born < seq < dies). Sorted (qid, oid) keys."""
    q, o = strtree_pairs(tree, q_ev, o_ev, vocab)
    live = (born[q] < o_ev.seq[o]) & (o_ev.seq[o] < dies[q])
    return np.sort(pair_keys(q_ev.id[q[live]], o_ev.id[o[live]]))


def numpy_prefix_routes(ev, rows, theta, idf, term_worker, n_workers):
    """DSkype's prefix routing vectorised: per subscription its normalised idf weights, the prefix
    length from the running sums of the weights (Eq. 18's loose prefix: the rarest keywords until
    the rest weighs less than lambda_T), then the distinct workers of the prefix's terms. Sorted
    (row, worker) keys row * n_workers + worker."""
    off, val = csr_take(ev.offsets, ev.values, rows)
    n = np.diff(off)
    owner = np.repeat(np.arange(len(rows)), n)
    w = idf[val]
    norm = np.sqrt(np.bincount(owner, weights=w * w, minlength=len(rows)))
    a = ev.alpha[rows].astype(np.float64)
    lam = (theta - a) / (1.0 - a) - 1e-9
    w = w / norm[owner]
    pos = np.arange(len(val)) - off[:-1][owner]
    # per position, the sum of the row's weights up to it (summed in order, one position at a time)
    run = np.zeros(len(val))
    acc = np.zeros(len(rows))
    for j in range(int(n.max()) if len(n) else 0):
        at = pos == j
        acc[owner[at]] += w[at]
        run[at] = acc[owner[at]]
    # prefix length p: one keyword, then one more while what is left (the sum up to n - p - 1) >= lambda_T
    more = (pos <= n[owner] - 2) & (run >= lam[owner])
    p = 1 + np.bincount(owner, weights=more, minlength=len(rows)).astype(np.int64)
    p = np.where((lam > 0) & (norm > 0), np.minimum(p, n), n)
    keep = pos >= (n - p)[owner]
    return np.unique(rows[owner[keep]] * np.int64(n_workers) + term_worker[val[keep]])
