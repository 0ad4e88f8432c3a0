"""The message index a worker initialises and re-evaluates subscriptions against (Skype Sec. 3:
"any existing spatial-keyword index, such as IR-Tree and S2I"): its window as (term, cell) blocks.

A uniform grid of about PER_CELL messages per cell over the epoch's messages; per term its
non-empty cells, each a block of the term's messages in that cell, heaviest weight for the term
first, with the block's largest weight. `best_candidates` bounds every cell that holds one of the
subscription's terms by alpha x SSimUB(s, cell) + (1 - alpha) x min(1, the sum over s's terms of
s's weight times the block's largest), visits the cells in descending bound, and inside a cell runs
the threshold algorithm over s's blocks with the cell's spatial bound. It stops once neither an
unvisited cell nor an unseen message of the cell can reach the target.

Why both bounds: a text-only threshold algorithm must bound SSim by 1, and the target (the 3k-th
best score) often lies below alpha, so it read most of the subscription's postings (about 5,000
pairs at |W| = 100k, 40 ms a registration at 1M); a cell bound alone still scores every message of
the nearby cells (3,300); together about 90, against the 60 any exact search must score
(ADR-0047).

The index is built once per epoch over the window and the epoch's arrivals; a search skips the
messages not yet arrived or already expired at its time, so the blocks' bounds stay valid.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from harness.families.topk.scoring import pair_score
from harness.families.topk.skyband import grown

PER_CELL = 256  # messages per grid cell on average
MAX_SIDE = 256  # cells per side at most
SLACK = 1e-9  # added to every bound: a rounding error cannot prune a message that reaches the target


def message_grid(x, y, offsets, values, weights, n_terms: int, per_cell: float = PER_CELL, norms=None):
    """The epoch's messages as (term, cell) blocks (module docstring). Returns the tuple the search
    takes: (geometry [x0, y0, cell width, cell height, side], term -> blocks offsets, each block's
    cell, start and end, and largest weight, the entries' message and weight). `norms`: each
    message's L2 norm (scoring.message_norms), along which every term's weights fall, so that the
    entries come out of `grid_blocks` nearly ranked; the blocks are the same without it (or with
    any other values), only slower to build."""
    geometry, cell = uniform_grid(x, y, per_cell, MAX_SIDE)
    side = int(geometry[4])
    key = np.zeros(len(offsets) - 1) if norms is None else norms
    return (geometry, *grid_blocks(offsets, values, weights, cell, key, n_terms, side * side))


@njit(cache=True)
def grid_blocks(offsets, values, weights, cell, key, n_terms: int, n_cells: int):
    """The CSR entries (message m: entries offsets[m]:offsets[m + 1], terms `values`, weights
    `weights`, in grid cell cell[m]) as (term, cell) blocks: term -> blocks offsets (its blocks by
    cell), each block's cell, start, end and largest weight, and the entries' message and weight,
    each block's in rank order (weight desc, ties in entry order: the order np.lexsort((-weights,
    cell[owner], values)) gives a term's entries in a cell).

    The entries are laid out cell by cell (a block's entries are contiguous, its term's blocks need
    not be): a cell's messages are dealt out to their terms' blocks in (key, index) order, so the
    writes stay inside the cell's region. With key = the norms a term's weights (idf / norm) fall
    along it, so a block comes out ranked but for equal weights of unequal norms, which an
    insertion sort puts in entry order in one pass; with any other key the insertion sort, or a
    stable sort of a block far from ranked, does the work. Sorting every entry by term, cell and
    weight across the whole window (two counting sorts, then each run) wrote all over it: at |W| =
    20,000 with 37 terms a message (800k entries) the grid was 60-70% of a worker's busy time
    (issue 50)."""
    n_msg = len(offsets) - 1
    n = len(values)
    by_key = np.argsort(key)  # ties in any order: a block's are put in message order below
    first = np.zeros(n_cells + 1, np.int64)
    for m in range(n_msg):
        first[cell[m] + 1] += 1
    for c in range(n_cells):
        first[c + 1] += first[c]
    fill = first[:-1].copy()
    msgs = np.empty(n_msg, np.int64)  # by cell, then key, then index
    for v in range(n_msg):
        m = by_key[v]
        msgs[fill[cell[m]]] = m
        fill[cell[m]] += 1
    stamp = np.full(n_terms, -1, np.int64)
    pos = np.empty(n_terms, np.int64)
    touched = np.empty(n_terms, np.int64)
    e_msg, e_w = np.empty(n, np.int64), np.empty(n)
    # blocks in (cell, first appearance) order; at most one per entry
    b_term, b_cell, b_start, b_end = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64), \
        np.empty(n, np.int64)
    n_blk = 0
    base = 0
    for c in range(n_cells):
        n_t = 0
        for v in range(first[c], first[c + 1]):  # the cell's terms and their counts
            m = msgs[v]
            for j in range(offsets[m], offsets[m + 1]):
                t = values[j]
                if stamp[t] != c:
                    stamp[t], pos[t] = c, 0
                    touched[n_t] = t
                    n_t += 1
                pos[t] += 1
        for u in range(n_t):  # each term's block: its region of the cell's
            t = touched[u]
            b_term[n_blk + u], b_cell[n_blk + u], b_start[n_blk + u] = t, c, base
            base += pos[t]
            b_end[n_blk + u] = base
            pos[t] = b_start[n_blk + u]
        for v in range(first[c], first[c + 1]):  # the entries dealt out, messages in (key, index) order
            m = msgs[v]
            for j in range(offsets[m], offsets[m + 1]):
                p = pos[values[j]]
                e_msg[p], e_w[p] = m, weights[j]
                pos[values[j]] = p + 1
        for u in range(n_blk, n_blk + n_t):
            if b_end[u] - b_start[u] > 1:
                _rank_block(e_msg, e_w, b_start[u], b_end[u])
        n_blk += n_t
    # the blocks by term, each term's by cell (a stable counting sort of the cell-ordered list)
    term_blocks = np.zeros(n_terms + 1, np.int64)
    for b in range(n_blk):
        term_blocks[b_term[b] + 1] += 1
    for t in range(n_terms):
        term_blocks[t + 1] += term_blocks[t]
    at = term_blocks[:-1].copy()
    blk_cell, blk_start, blk_end, blk_maxw = np.empty(n_blk, np.int64), np.empty(n_blk, np.int64), \
        np.empty(n_blk, np.int64), np.empty(n_blk)
    for b in range(n_blk):
        q = at[b_term[b]]
        at[b_term[b]] = q + 1
        blk_cell[q], blk_start[q], blk_end[q], blk_maxw[q] = b_cell[b], b_start[b], b_end[b], e_w[b_start[b]]
    return term_blocks, blk_cell, blk_start, blk_end, blk_maxw, e_msg, e_w


@njit(cache=True)
def _rank_block(e_msg, e_w, start, end):
    """A block's entries by weight (heaviest first), ties by message (entry order: a message's
    entries are contiguous, and two of one message in a block are alike): an insertion sort while
    the block is nearly ranked (its moves bounded by a few per entry), else a stable sort of it."""
    budget = 4 * (end - start) + 64
    for i in range(start + 1, end):
        m, w = e_msg[i], e_w[i]
        k = i
        while k > start and (e_w[k - 1] < w or (e_w[k - 1] == w and e_msg[k - 1] > m)):
            e_msg[k], e_w[k] = e_msg[k - 1], e_w[k - 1]
            k -= 1
            budget -= 1
        e_msg[k], e_w[k] = m, w
        if budget < 0:  # far from ranked: sort it outright (a permutation of it, whatever moved so far)
            by_m = start + np.argsort(e_msg[start:end], kind="mergesort")
            rank = by_m[np.argsort(-e_w[by_m], kind="mergesort")]
            e_msg[start:end], e_w[start:end] = e_msg[rank], e_w[rank]
            return


def uniform_grid(x: np.ndarray, y: np.ndarray, per_cell: float, max_side: int) -> tuple[np.ndarray, np.ndarray]:
    """A uniform grid over the points' bounding box, about per_cell points a cell, at most
    max_side cells a side: ([x0, y0, cell width, cell height, side], each point's cell, column-major
    as cx x side + cy)."""
    n = len(x)
    side = int(min(max_side, max(1, round(math.sqrt(n / per_cell)))))
    x0, y0 = (float(x.min()), float(y.min())) if n else (0.0, 0.0)
    cw = (float(x.max()) - x0) / side if n else 1.0
    ch = (float(y.max()) - y0) / side if n else 1.0
    cw, ch = cw if cw > 0.0 else 1.0, ch if ch > 0.0 else 1.0
    cx = np.clip(((x - x0) / cw).astype(np.int64), 0, side - 1)
    cy = np.clip(((y - y0) / ch).astype(np.int64), 0, side - 1)
    return np.array([x0, y0, cw, ch, side], np.float64), cx * side + cy


@njit(cache=True, inline="always")
def cell_reach(c, geometry, px, py, max_dist):
    """SSimUB of a point and grid cell c: 1 - the point's distance to the cell's rectangle / MaxDist."""
    side = int(geometry[4])
    lx, ly = geometry[0] + (c // side) * geometry[2], geometry[1] + (c % side) * geometry[3]
    dx = max(0.0, lx - px, px - (lx + geometry[2]))
    dy = max(0.0, ly - py, py - (ly + geometry[3]))
    return 1.0 - math.sqrt(dx * dx + dy * dy) / max_dist


def search_scratch(grid, terms_per_subscription: int):
    """Per-cell work space for `best_candidates`, allocated once per epoch: bound accumulators, a
    stamp, each touched cell's slot and blocks, and the stamp counter."""
    cells = int(grid[0][4]) ** 2
    width = max(terms_per_subscription, 1)
    return (np.zeros(cells), np.full(cells, -1, np.int64), np.zeros(cells, np.int64), np.zeros(cells, np.int64),
            np.zeros(cells * width, np.int64), np.zeros(cells), np.zeros(cells), np.zeros(1, np.int64))


@njit(cache=True)
def best_candidates(s, t, inclusive, min_exp, need, frac, c_msg, c_score, m_seen, stamp, m_seq, m_exp, m_x, m_y,
                    m_off, m_val, m_w, grid, scratch, s_x, s_y, s_alpha, s_off, s_val, s_w, max_dist):
    """The window messages at time t sharing a keyword with s (arrived before t, or at t too when
    `inclusive`; not expired at t, nor before `min_exp`) that can score at least `frac` x the
    `need`-th best score (module docstring). Returns (c_msg, c_score, n, target): every such message
    scoring >= target is among the n scored (target -inf: every candidate was)."""
    geometry, term_blocks, blk_cell, blk_start, blk_end, blk_maxw, e_msg, e_w = grid
    acc, c_stamp, slot, touched, t_blk, bound, spatial, counter = scratch
    counter[0] += 1
    cs = counter[0]
    lo_t, hi_t = s_off[s], s_off[s + 1]
    nt = hi_t - lo_t
    n_touch = 0
    postings = 0  # the entries of s's blocks: at most that many messages are scored
    for i in range(nt):  # the cells holding one of s's terms, and their blocks
        term = s_val[lo_t + i]
        if term + 1 >= len(term_blocks):
            continue
        for b in range(term_blocks[term], term_blocks[term + 1]):
            postings += blk_end[b] - blk_start[b]
            c = blk_cell[b]
            if c_stamp[c] != cs:
                c_stamp[c], acc[c], slot[c], touched[n_touch] = cs, 0.0, n_touch, c
                for u in range(nt):
                    t_blk[n_touch * nt + u] = -1
                n_touch += 1
            acc[c] += s_w[lo_t + i] * blk_maxw[b]
            t_blk[slot[c] * nt + i] = b
    alpha = s_alpha[s]
    for u in range(n_touch):
        c = touched[u]
        spatial[u] = alpha * cell_reach(c, geometry, s_x[s], s_y[s], max_dist) + SLACK
        bound[u] = spatial[u] + (1.0 - alpha) * min(acc[c], 1.0)
    order = np.argsort(-bound[:n_touch])
    # room for every candidate before the search: growing the arrays inside it made numba count
    # references to them on every step of its loops (as in merge.replay)
    if len(c_msg) < postings:
        c_msg, c_score = grown(c_msg, postings), grown(c_score, postings)
    best = np.full(need, -np.inf)  # the best scores so far, descending
    ptr = np.empty(nt, np.int64)
    n = 0
    every = True
    for v in range(n_touch):
        u = order[v]
        if best[need - 1] > -np.inf and bound[u] < frac * best[need - 1]:
            every = False
            break
        for i in range(nt):
            b = t_blk[u * nt + i]
            ptr[i] = blk_start[b] if b >= 0 else 0
        while True:  # the threshold algorithm over s's blocks in this cell
            progressed = False
            reach = 0.0
            for i in range(nt):
                b = t_blk[u * nt + i]
                if b < 0:
                    continue
                p, hi = ptr[i], blk_end[b]
                while p < hi:
                    m = e_msg[p]
                    p += 1
                    if m_seen[m] == stamp:
                        continue
                    m_seen[m] = stamp
                    if m_seq[m] > t or (m_seq[m] == t and not inclusive) or m_exp[m] <= t or m_exp[m] < min_exp:
                        continue
                    if n == len(c_msg):  # cannot happen (room for every posting above): never write past it
                        raise RuntimeError("top-k search: more candidates than postings")
                    sc = pair_score(s_x[s], s_y[s], alpha, s_val, s_w, lo_t, hi_t, m_x[m], m_y[m], m_val, m_w,
                                    m_off[m], m_off[m + 1], max_dist)
                    c_msg[n] = m
                    c_score[n] = sc
                    n += 1
                    if sc > best[need - 1]:
                        r = need - 1
                        while r > 0 and best[r - 1] < sc:
                            best[r] = best[r - 1]
                            r -= 1
                        best[r] = sc
                    progressed = True
                    break
                ptr[i] = p
                if p < hi:
                    reach += s_w[lo_t + i] * e_w[p]
            if not progressed:
                break
            if best[need - 1] > -np.inf and spatial[u] + (1.0 - alpha) * reach < frac * best[need - 1]:
                every = False
                break
    return c_msg, c_score, n, (-np.inf if every else frac * best[need - 1])
