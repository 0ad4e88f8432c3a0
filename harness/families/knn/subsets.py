"""SOP's worker index structure (DkM-SKS Sec. 3.2): the worker's subscriptions grouped into
spatial subsets, each with the rectangle R enclosing its members' balls and an inverted file; an
object probes the inverted file of every subset whose R contains it.

The subsets are SOP's own rule applied by the worker to the subscriptions it holds: split the
space like a quadtree (a subscription located at its point), always the subset of largest cost
|S_r| * P(R), until there are `n_subsets` or none can split. P(R) is R's share of the space: the
worker holds no O_init, so objects are taken as uniform (ADR-0036).
The worker forms them itself at every build of its postings rather than receiving the fit's
subsets from the router: the same structure over the same subscriptions, without a channel from
the router to the index, and R follows the balls as feedback shrinks them.
"""

from __future__ import annotations

import heapq

import numpy as np

MAX_DEPTH = 32  # quadtree levels before a subset is not split (subscriptions at one point)


def ball_squares(x: np.ndarray, y: np.ndarray, r: np.ndarray) -> np.ndarray:
    """(n, 4) squares around balls, a hair wider so rounding in sqrt never leaves out an object
    whose squared distance is inside the bound."""
    pad = r * (1 + 1e-9) + 1e-9 * (np.abs(x) + np.abs(y) + 1.0)
    return np.stack([x - pad, y - pad, x + pad, y + pad], axis=1)


def sop_subsets(x: np.ndarray, y: np.ndarray, squares: np.ndarray, extent, n_subsets: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """(subset of each subscription, (n_sub, 4) R per subset) for subscriptions at (x, y) with
    ball squares `squares`."""
    n = len(x)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros((0, 4))
    x0, y0, x1, y1 = (float(v) for v in extent)
    area = max((x1 - x0) * (y1 - y0), 1e-300)

    def cost(mem):
        r = _mbr(squares[mem])
        return len(mem) * max(r[2] - r[0], 0.0) * max(r[3] - r[1], 0.0) / area

    heap, leaves, tick = [], [], 0

    def push(mem, box, depth):
        nonlocal tick
        if len(mem) >= 2 and depth < MAX_DEPTH:
            heapq.heappush(heap, (-cost(mem), tick, mem, box, depth))
        else:
            leaves.append(mem)
        tick += 1

    push(np.arange(n), (x0, y0, x1, y1), 0)
    while heap and len(heap) + len(leaves) < n_subsets:
        _, _, mem, (bx0, by0, bx1, by1), depth = heapq.heappop(heap)
        mx, my = (bx0 + bx1) / 2.0, (by0 + by1) / 2.0
        quad = (y[mem] >= my).astype(np.int64) * 2 + (x[mem] >= mx)
        for q in np.unique(quad):
            box = (mx if q & 1 else bx0, my if q >> 1 else by0, bx1 if q & 1 else mx, by1 if q >> 1 else my)
            push(mem[quad == q], box, depth + 1)
    groups = leaves + [entry[2] for entry in heap]
    subset = np.empty(n, np.int64)
    rects = np.empty((len(groups), 4))
    for i, mem in enumerate(groups):
        subset[mem] = i
        rects[i] = _mbr(squares[mem])
    return subset, rects


def _mbr(r: np.ndarray) -> np.ndarray:
    return np.array([r[:, 0].min(), r[:, 1].min(), r[:, 2].max(), r[:, 3].max()])
