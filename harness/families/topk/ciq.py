"""CIQ, Skype's dissemination baseline (Chen et al. ICDE'15, "with the time decay function and its
index removed", skype.txt l.731): the subscriptions an arriving message may enter, found DAAT over
per-cell inverted files of subscriptions assigned to many covering cells.

What Skype says of CIQ (skype.txt l.64, the only description; the reading notes' A22 leave the
details to Chen et al.): "a Quadtree is used to partition the whole space. Each subscription is
assigned to a number of covering cells, forming a disjoint partition of the entire space. ... A
textual bound (e.g., MinT) is precomputed for each subscription w.r.t. each assigned cell ... An
inverted file ordered by subscription id is built to organize the subscriptions assigned to each
cell. For a new message, CIQ traverses all the inverted files with corresponding cells penetrated
by message location in DAAT paradigm, and finds all the subscriptions with textual similarity
higher than the precomputed bound as candidates, which are then verified". And: "the number of
covering cells for each subscription cannot be too large; otherwise, it would lead to extremely
high memory cost".

The choices where the paper only cites (ADR-0090):

- The cover: a full quadtree of DEPTH levels over the subscriptions' bounding box; a
  subscription's cover is, at every level 1..DEPTH, the three siblings of its own ancestor, and its
  own leaf: 3 x DEPTH + 1 disjoint cells that tile the space, fine near the subscription and coarse
  far from it (Fig. 2's c1..c7 is this shape at depth 2). A point outside the box belongs to the
  cell its clamped position is in (clamping onto the box moves a point no farther from a
  subscription inside it, so the bounds stay safe).
- The spatial bound of (s, cell) is precomputed (1 - mindist(s, cell) / MaxDist, 1 in its own
  leaf); MinT(s, cell) = (theta_s - alpha x that bound) / (1 - alpha) is formed from it and the
  current theta when read, which equals CIQ's bound kept up to date as kScore changes.
- A message visits its DEPTH ancestors (the cells it penetrates); in each it merges its terms'
  posting lists by subscription id (DAAT), so each subscription met has its whole text similarity
  with the message summed (every common keyword's posting is in the one cell of its cover the
  message lies in), and is a candidate when that reaches MinT. Each subscription meets the message
  in exactly one of the visited cells.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from harness.families.topk.bounds import MARGIN

DEPTH = 5  # quadtree levels: 3 x 5 + 1 = 16 covering cells per subscription


def cover_cells(x: np.ndarray, y: np.ndarray, geometry: np.ndarray) -> np.ndarray:
    """Per subscription, its 3 x depth + 1 covering cells as global node ids (level l's nodes are
    numbered from (4^l - 4) / 3 on, row gx x 2^l + gy): at each level the three siblings of its
    ancestor, then its own leaf (module docstring)."""
    depth = int(geometry[4])
    n = len(x)
    ix, iy = leaf_coords(x, y, geometry)
    out = np.empty((n, 3 * depth + 1), np.int64)
    col = 0
    for level in range(1, depth + 1):
        ax, ay = ix >> (depth - level), iy >> (depth - level)
        own = (ax & 1) * 2 + (ay & 1)  # the ancestor's place among its parent's four children
        for c in range(3):  # the other three, in child order
            child = c + (c >= own)
            out[:, col] = node_id(level, (ax & ~1) + child // 2, (ay & ~1) + child % 2)
            col += 1
    out[:, col] = node_id(depth, ix, iy)
    return out


def node_id(level, gx, gy):
    return (4 ** level - 4) // 3 + gx * (1 << level) + gy


def leaf_coords(x, y, geometry):
    """Leaf column and row of points, clamped into the box (module docstring)."""
    x0, y0, w, h, depth = geometry[:5]
    side = 1 << int(depth)
    ix = np.clip(np.floor((np.asarray(x, np.float64) - x0) / w * side), 0, side - 1).astype(np.int64)
    iy = np.clip(np.floor((np.asarray(y, np.float64) - y0) / h * side), 0, side - 1).astype(np.int64)
    return ix, iy


def node_reach(nodes: np.ndarray, px: np.ndarray, py: np.ndarray, geometry: np.ndarray, max_dist: float):
    """1 - mindist(point, node's rectangle) / MaxDist, element-wise (a node of the clamped grid at
    the box's edge is its rectangle: points outside the box are clamped, module docstring)."""
    x0, y0, w, h = geometry[:4]
    level = np.zeros(len(nodes), np.int64)
    for lv in range(1, int(geometry[4]) + 1):
        level[nodes >= (4 ** lv - 4) // 3] = lv
    local = nodes - (4 ** level - 4) // 3
    side = np.left_shift(1, level)
    gx, gy = local // side, local % side
    cw, ch = w / side, h / side
    lx, ly = x0 + gx * cw, y0 + gy * ch
    dx = np.maximum(0.0, np.maximum(lx - px, px - (lx + cw)))
    dy = np.maximum(0.0, np.maximum(ly - py, py - (ly + ch)))
    return 1.0 - np.sqrt(dx * dx + dy * dy) / max_dist


def ciq_index(x, y, offsets, values, s_w, max_dist: float, n_terms: int, longest_message: int, depth: int = DEPTH):
    """CIQ's inverted files as the tuple `ciq_candidates` takes: (geometry [x0, y0, width, height,
    depth, number of terms], the sorted (node, term) keys, each key's postings start (one past the
    last: the end), the postings' subscription, weight and precomputed spatial bound, every list
    ordered by subscription id; and the merge's cursors, one per term of the longest message)."""
    n = len(offsets) - 1
    if n:
        x0, y0 = float(x.min()), float(y.min())
        w, h = max(float(x.max()) - x0, 1e-12) * (1 + 1e-9), max(float(y.max()) - y0, 1e-12) * (1 + 1e-9)
    else:
        x0 = y0 = 0.0
        w = h = 1.0
    geometry = np.array([x0, y0, w, h, float(depth), float(n_terms)])
    width = max(int(longest_message), 1)
    scratch = (np.empty(width, np.int64), np.empty(width, np.int64), np.empty(width, np.int64))
    if n == 0 or len(values) == 0:
        return (geometry, np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0),
                np.zeros(0), *scratch)
    cover = cover_cells(x, y, geometry)  # (n, cells)
    cells = cover.shape[1]
    reach = node_reach(cover.ravel(), np.repeat(x, cells), np.repeat(y, cells), geometry, max_dist).reshape(n, cells)
    reach[:, -1] = 1.0  # its own leaf
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))  # per CSR entry
    e_node = cover[owner].ravel()  # per (entry, cell)
    e_sub = np.repeat(owner, cells)
    key = e_node * n_terms + np.repeat(values.astype(np.int64), cells)
    order = np.lexsort((e_sub, key))
    key, e_sub = key[order], e_sub[order]
    e_w = np.repeat(s_w, cells)[order]
    e_reach = reach[owner].ravel()[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    return (geometry, key[starts], np.r_[starts, len(key)].astype(np.int64), e_sub, e_w, e_reach, *scratch)


@njit(cache=True)
def ciq_candidates(m, t, m_off, m_val, m_w, m_x, m_y, ciq, theta, s_redo, s_ins, s_del, s_alpha, cand):
    """The live subscriptions message m may enter at t, into cand (module docstring); returns their
    count and the subscriptions text-scored and rejected. For each of the message's DEPTH ancestor
    cells: its terms' posting lists, merged by subscription id (DAAT), each subscription's text
    similarity summed over them, a candidate when alpha x the cell's bound + (1 - alpha) x that sum
    reaches theta (MinT, less a margin far above rounding: a rejection is certain)."""
    geometry, keys, starts, e_sub, e_w, e_reach, cursor, cur_end, cur_q = ciq
    n_cand = 0
    rejected = 0
    if len(keys) == 0:
        return n_cand, rejected
    depth = int(geometry[4])
    n_terms = int(geometry[5])
    side = 1 << depth
    ix = int(min(max(math.floor((m_x[m] - geometry[0]) / geometry[2] * side), 0), side - 1))
    iy = int(min(max(math.floor((m_y[m] - geometry[1]) / geometry[3] * side), 0), side - 1))
    for level in range(1, depth + 1):
        node = (4 ** level - 4) // 3 + (ix >> (depth - level)) * (1 << level) + (iy >> (depth - level))
        n_lists = 0
        for q in range(m_off[m], m_off[m + 1]):  # the cell's list of each of the message's terms
            if m_val[q] >= n_terms:  # no subscription holds it
                continue
            k = node * n_terms + m_val[q]
            a = np.searchsorted(keys, k)
            if a < len(keys) and keys[a] == k:
                cursor[n_lists], cur_end[n_lists], cur_q[n_lists] = starts[a], starts[a + 1], q
                n_lists += 1
        while True:  # DAAT: the smallest subscription id at the lists' heads, summed over them
            s = -1
            for u in range(n_lists):
                if cursor[u] < cur_end[u] and (s < 0 or e_sub[cursor[u]] < s):
                    s = e_sub[cursor[u]]
            if s < 0:
                break
            tsim = 0.0
            reach = 1.0
            for u in range(n_lists):  # in the message's term order: ascending, as pair_score sums
                p = cursor[u]
                if p < cur_end[u] and e_sub[p] == s:
                    tsim += e_w[p] * m_w[cur_q[u]]
                    reach = e_reach[p]
                    cursor[u] = p + 1
            a = s_alpha[s]
            if a * reach + (1.0 - a) * min(tsim, 1.0) < theta[s] - MARGIN:
                rejected += 1
                continue
            if s_redo[s] == t or not (s_ins[s] < t < s_del[s]):
                continue
            cand[n_cand] = s
            n_cand += 1
    return n_cand, rejected
