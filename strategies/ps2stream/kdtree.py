"""kd-tree partitioning, PS2Stream's best space baseline (after AQWA and Tornado).

The tree has one leaf per worker. A node that must hold k leaves is split into k//2 and k - k//2
along its longer side, at the position that best balances the sample load per leaf, where the
load of a side is n_o * n_q + n_o + n_q (objects inside, queries overlapping; strategies/load.py).
Candidate positions are quantiles of the node's sample coordinates, evaluated at once with
sorted arrays, so the fit is O(n log n) per level. Routing walks the tree exactly
(`strategies/routers/kdtree.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core.events import Events
from strategies.base import FitContext, Router, Strategy
from strategies.load import sample_parts, unit_load
from strategies.routers.kdtree import KdTreeRouter


def best_split(coord, lo_q, hi_q, k_left, k_right, candidates):
    """The candidate that minimises the larger per-leaf load of the two sides."""
    c_sorted = np.sort(coord)
    n_o_left = np.searchsorted(c_sorted, candidates, side="left")
    n_q_left = np.searchsorted(np.sort(lo_q), candidates, side="left")
    n_q_right = len(hi_q) - np.searchsorted(np.sort(hi_q), candidates, side="left")
    left = unit_load(n_o_left, n_q_left) / k_left
    right = unit_load(len(coord) - n_o_left, n_q_right) / k_right
    return candidates[int(np.argmin(np.maximum(left, right)))]


class KdTreeStrategy(Strategy):
    name = "kdtree"
    families = frozenset({"range", "frequent_terms"})

    @dataclass
    class Params:
        candidates: int = 255  # split positions tried per node (quantiles of the node's sample)

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        objs, qs = sample_parts(sample)
        pts = np.stack([sample.x[objs], sample.y[objs]], axis=1)
        lo = np.stack([sample.xmin[qs], sample.ymin[qs]], axis=1)
        hi = np.stack([sample.xmax[qs], sample.ymax[qs]], axis=1)
        nodes: list[list] = []  # [dim, val, left, right, worker, region]
        leaves_made = [0]

        def build(region, o_idx, q_idx, k) -> int:
            me = len(nodes)
            nodes.append([-1, 0.0, -1, -1, -1, region])
            if k == 1:
                nodes[me][4] = leaves_made[0]
                leaves_made[0] += 1
                return me
            dim = 0 if region[2] - region[0] >= region[3] - region[1] else 1
            coord = pts[o_idx, dim]
            k_left = k // 2
            if len(coord) >= 2:
                qs_ = np.unique(np.quantile(coord, np.linspace(0, 1, params.candidates + 2)[1:-1]))
                val = best_split(coord, lo[q_idx, dim], hi[q_idx, dim], k_left, k - k_left, qs_)
            else:
                val = (region[dim] + region[dim + 2]) / 2.0
            r_left, r_right = list(region), list(region)
            r_left[dim + 2] = val
            r_right[dim] = val
            go_left_o = coord < val
            q_lo, q_hi = lo[q_idx, dim], hi[q_idx, dim]
            nodes[me][0], nodes[me][1] = dim, float(val)
            nodes[me][2] = build(r_left, o_idx[go_left_o], q_idx[q_lo < val], k_left)
            nodes[me][3] = build(r_right, o_idx[~go_left_o], q_idx[q_hi >= val], k - k_left)
            return me

        build(list(map(float, context.extent)), np.arange(len(objs)), np.arange(len(qs)), n_workers)
        cols = list(zip(*nodes))
        return KdTreeRouter(n_workers, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5])
