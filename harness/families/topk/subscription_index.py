"""The subscriptions an arriving message is checked against: Skype's subscription index (Sec. 5),
as (term, cell, threshold) blocks.

A uniform grid of about PER_CELL subscriptions per cell over their locations (Skype: a quadtree,
one cell per subscription); per term and cell, its subscriptions ordered by the threshold posted
at the epoch's start, highest first, and cut into blocks of at most BLOCK. A block keeps what
bounds every member (Skype's group pruning, Lemma 5 and Thm 5.3): its cell, the smallest posted
theta, the smallest and largest alpha, and the largest of each member's weight for the term, the
rest of its weights' sum and their largest (Eq. 5). Inside a block the members are sorted by the
message weight they need through the term, lam / wtsum (Thm 5.1 as a sort key), so a message reads
a block only up to its largest weight from that term on (Def. 5's refined prefix).

A message skips a whole block when alpha x SSimUB(m, cell) + (1 - alpha) x T stays below the
block's smallest theta at both of its alphas (the bound is linear in alpha), T being Eq. 5's text
bound with the block's largest weights. Valid all epoch: a theta only rises between
re-evaluations, and a subscription whose theta falls is read from the overflow lists instead.
Blocks by threshold keep a few subscriptions with theta 0 (fewer than k matches in the window)
from making their whole cell unskippable.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.families.topk.message_index import uniform_grid

PER_CELL = 1024  # subscriptions per grid cell on average
MAX_SIDE = 64  # cells per side at most
BLOCK = 64  # members per block at most
ALPHA_GROUPS = 8  # Skype's alpha-partition (10 groups by default; 5-40 tested)


def subscription_blocks(x, y, offsets, values, s_w, wsum, rmax, theta, lam, alpha, n_terms: int,
                        per_cell: float = PER_CELL, block: int = BLOCK):
    """The blocks (module docstring) as the tuple `arrival_candidates` takes: (term -> blocks
    offsets, each block's cell, start (one past the last: the end), smallest theta, smallest and
    largest alpha, largest weight, rest sum and rest max; the grid [x0, y0, cell width, cell
    height, side]; the entries' subscription, weight, rest sum, rest max and key, and their
    subscription's x, y and alpha, copied in entry order so that a message reads them in sequence).
    The grid and the alpha groups here, the rest compiled (`block_layout`)."""
    n = len(offsets) - 1
    geometry, cell = uniform_grid(x, y, per_cell, MAX_SIDE)
    side = int(geometry[4])
    # alpha groups by quantile (Skype's alpha-partition): a block's bound is only as tight as its
    # alphas are close
    edges = np.quantile(alpha, np.linspace(0.0, 1.0, ALPHA_GROUPS + 1)[1:-1]) if n else np.zeros(0)
    a_group = np.searchsorted(edges, alpha, side="right").astype(np.int64)
    n_t = max(int(n_terms), int(values.max(initial=-1)) + 1)
    blk_off, rest = block_layout(offsets, values.astype(np.int64), cell, a_group, theta, lam, s_w, wsum, rmax, x, y,
                                 alpha, side * side, n_t, block)
    return (blk_off, *rest[:8], geometry, *rest[8:])


@njit(cache=True)
def block_layout(offsets, values, cell, a_group, theta, lam, s_w, wsum, rmax, x, y, alpha, n_cells: int,
                 n_terms: int, block: int):
    """The entries (subscription s: offsets[s]:offsets[s + 1]) in blocks: by (term, cell, alpha
    group), in each its members by posted theta (highest first, ties by subscription) cut into
    chunks of `block`, and in each chunk by key = lam / wsum (Thm 5.1's sort key; -inf with no
    floor), ties by subscription: np.lexsort((owner, -theta, group)) for the chunks, then
    np.lexsort((owner, key, chunk, group)), as two stable sorts of each group's run (its entries
    come by subscription). Returns the term -> blocks offsets and the block and entry columns.
    Written out because two lexsorts and some thirty numpy passes over a worker's few thousand
    entries took 1.7 ms an epoch, about a sixth of a keyword-partitioned worker's busy time (issue
    50)."""
    n = len(offsets) - 1
    m = len(values)
    owner = np.empty(m, np.int64)
    group = np.empty(m, np.int64)
    key = np.empty(m)
    for s in range(n):
        for j in range(offsets[s], offsets[s + 1]):
            owner[j] = s
            group[j] = (values[j] * n_cells + cell[s]) * ALPHA_GROUPS + a_group[s]
            key[j] = lam[s] / wsum[j] if np.isfinite(lam[s]) else -np.inf
    by_group = np.argsort(group, kind="mergesort")  # each group's run by subscription
    order = np.empty(m, np.int64)
    chunk = np.empty(m, np.int64)
    i = 0
    while i < m:
        e = i + 1
        while e < m and group[by_group[e]] == group[by_group[i]]:
            e += 1
        if e - i <= 32:  # most runs are a few entries: insertion sorts in place, stable
            order[i:e] = by_group[i:e]
            for u in range(i + 1, e):  # by posted theta, highest first
                cur = order[u]
                k = u
                while k > i and theta[owner[order[k - 1]]] < theta[owner[cur]]:
                    order[k] = order[k - 1]
                    k -= 1
                order[k] = cur
            for u in range(i, e):
                chunk[order[u]] = (u - i) // block
            order[i:e] = by_group[i:e]
            for u in range(i + 1, e):  # by chunk, then key
                cur = order[u]
                k = u
                while k > i and (chunk[order[k - 1]] > chunk[cur] or (
                        chunk[order[k - 1]] == chunk[cur] and key[order[k - 1]] > key[cur])):
                    order[k] = order[k - 1]
                    k -= 1
                order[k] = cur
        else:
            run = by_group[i:e]
            neg = np.empty(e - i)
            for u in range(e - i):
                neg[u] = -theta[owner[run[u]]]
            by_theta = run[np.argsort(neg, kind="mergesort")]
            for u in range(e - i):
                chunk[by_theta[u]] = u // block
            k_run = np.empty(e - i)
            for u in range(e - i):
                k_run[u] = key[run[u]]
            by_key = run[np.argsort(k_run, kind="mergesort")]
            c_run = np.empty(e - i, np.int64)
            for u in range(e - i):
                c_run[u] = chunk[by_key[u]]
            order[i:e] = by_key[np.argsort(c_run, kind="mergesort")]
        i = e
    n_blk = 0
    for u in range(m):
        if u == 0 or group[order[u]] != group[order[u - 1]] or chunk[order[u]] != chunk[order[u - 1]]:
            n_blk += 1
    blk_off = np.zeros(n_terms + 1, np.int64)
    blk_cell, blk_start = np.empty(n_blk, np.int64), np.empty(n_blk + 1, np.int64)
    blk_theta, blk_alo, blk_ahi = np.empty(n_blk), np.empty(n_blk), np.empty(n_blk)
    blk_w, blk_rsum, blk_rmax = np.empty(n_blk), np.empty(n_blk), np.empty(n_blk)
    e_sub, e_w, e_rsum, e_rmax, e_key = np.empty(m, np.int64), np.empty(m), np.empty(m), np.empty(m), np.empty(m)
    e_x, e_y, e_alpha = np.empty(m), np.empty(m), np.empty(m)
    b = -1
    for u in range(m):
        j = order[u]
        s = owner[j]
        e_sub[u], e_w[u], e_rsum[u], e_rmax[u], e_key[u] = s, s_w[j], wsum[j] - s_w[j], rmax[j], key[j]
        e_x[u], e_y[u], e_alpha[u] = x[s], y[s], alpha[s]
        if u == 0 or group[j] != group[order[u - 1]] or chunk[j] != chunk[order[u - 1]]:
            b += 1
            blk_off[values[j] + 1] += 1
            blk_cell[b], blk_start[b] = cell[s], u
            blk_theta[b], blk_alo[b], blk_ahi[b] = theta[s], alpha[s], alpha[s]
            blk_w[b], blk_rsum[b], blk_rmax[b] = e_w[u], e_rsum[u], e_rmax[u]
        else:
            blk_theta[b], blk_alo[b] = min(blk_theta[b], theta[s]), min(blk_alo[b], alpha[s])
            blk_ahi[b], blk_w[b] = max(blk_ahi[b], alpha[s]), max(blk_w[b], e_w[u])
            blk_rsum[b], blk_rmax[b] = max(blk_rsum[b], e_rsum[u]), max(blk_rmax[b], e_rmax[u])
    blk_start[n_blk] = m
    for t in range(n_terms):
        blk_off[t + 1] += blk_off[t]
    return blk_off, (blk_cell, blk_start, blk_theta, blk_alo, blk_ahi, blk_w, blk_rsum, blk_rmax, e_sub, e_w, e_rsum,
                     e_rmax, e_key, e_x, e_y, e_alpha)
