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
    subscription's x, y and alpha, copied in entry order so that a message reads them in sequence)."""
    n = len(offsets) - 1
    geometry, cell = uniform_grid(x, y, per_cell, MAX_SIDE)
    side = int(geometry[4])
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    term = values.astype(np.int64)
    # alpha groups by quantile (Skype's alpha-partition): a block's bound is only as tight as its
    # alphas are close
    edges = np.quantile(alpha, np.linspace(0.0, 1.0, ALPHA_GROUPS + 1)[1:-1]) if n else np.zeros(0)
    a_group = np.searchsorted(edges, alpha, side="right").astype(np.int64)
    group = (term * (side * side) + cell[owner]) * ALPHA_GROUPS + a_group[owner]  # (term, cell, alpha group)
    # rank by posted theta (highest first) within each (term, cell, alpha group), then blocks of `block`
    by_theta = np.lexsort((owner, -theta[owner], group))
    g_sorted = group[by_theta]
    first = np.flatnonzero(np.concatenate(([True], g_sorted[1:] != g_sorted[:-1]))) if len(g_sorted) else np.zeros(
        0, np.int64)
    rank = np.arange(len(g_sorted)) - np.repeat(first, np.diff(np.concatenate((first, [len(g_sorted)]))))
    chunk = np.empty(len(g_sorted), np.int64)
    chunk[by_theta] = rank // block
    with np.errstate(invalid="ignore", divide="ignore"):
        key = np.where(np.isfinite(lam[owner]), lam[owner] / wsum, -np.inf)
    order = np.lexsort((owner, key, chunk, group))
    g, c = group[order], chunk[order]
    starts = np.flatnonzero(np.concatenate(([True], (g[1:] != g[:-1]) | (c[1:] != c[:-1])))) if len(
        order) else np.zeros(0, np.int64)
    blk_off = np.zeros(n_terms + 1, np.int64)
    np.cumsum(np.bincount(term[order][starts], minlength=n_terms), out=blk_off[1:])
    e_sub = owner[order]
    e_w, e_rsum, e_rmax = s_w[order], (wsum - s_w)[order], rmax[order]

    def reduce(op, values_):
        return op.reduceat(values_, starts) if len(starts) else np.zeros(0)

    return (blk_off, cell[e_sub][starts], np.concatenate((starts, [len(order)])).astype(np.int64),
            reduce(np.minimum, theta[e_sub]), reduce(np.minimum, alpha[e_sub]), reduce(np.maximum, alpha[e_sub]),
            reduce(np.maximum, e_w),
            reduce(np.maximum, e_rsum), reduce(np.maximum, e_rmax), geometry, e_sub, e_w, e_rsum, e_rmax,
            key[order], x[e_sub], y[e_sub], alpha[e_sub])
