"""DSkype's location-based distribution (§7.3.2): a cost-based kd-tree over subscription locations.

Fit (Algorithm 3, cost model Eq. 15). A node nd costs C(nd) = N(nd) x p(nd): N = the sample's
subscriptions (INSERT rows, every family) whose point lies in nd, p = the probability that a
message falls in nd, estimated from the sample's objects. Depth even splits on x, odd on y, at the
subscription coordinate that best balances the two children's cost; each leaf is one worker.

Decisions (not in the paper):
- Smoothing. p(nd) = (m(nd) + a * area(nd) / area(extent)) / (M + a): m = sample objects in nd,
  M = all of them, a = `smoothing` pseudo-messages spread uniformly over the extent. Without it a
  sample with no objects (or a region without any) gives cost 0 to every candidate and the split
  search has nothing to balance; with it an empty region costs as much as its area, and p stays a
  probability (the leaves' p sum to 1).
- Worker counts that are not a power of two (the paper stops at a maxdepth, so 2^d leaves): a
  node with a budget of n leaves gives ceil(n/2) to the left child and floor(n/2) to the right and
  minimises |C1/n1^e - C2/n2^e| (= the paper's |C1 - C2| when n1 = n2). e = `budget_exponent`,
  2 by default: Eq. 15 is a product, so cutting a child into n even leaves divides both N and p by
  n and a leaf costs about C/n^2; e = 2 balances the leaves themselves, where e = 1 (the spec's
  proposal A27, cost per leaf as a share of the child's cost) leaves the heaviest leaf far above
  the mean (3 workers on a skewed sample: heaviest
  leaf 1.51x the mean with e = 1, 1.01x with e = 2; tests/strategies/dskype/test_location.py).
- A node without sample subscriptions (e.g. a warm-up of objects only) is split at its midpoint:
  every candidate costs 0 there, and the midpoint keeps the smoothed p even.
- Sample points outside the extent are clamped into it, as the router clamps events.

Routing: every object is broadcast ("to guarantee the algorithm correctness": top-k scores mix
space and text, so a far message can still enter a subscription's top-k), and every subscription
event (insert, delete, snapshot; range, knn, topk) goes to the one worker whose leaf contains its
point. One owner that sees every object computes each result in full, so every family is exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.core.events import Events
from strategies.base import FitContext, Pairs, Router, Strategy
from strategies.routers.kdtree import KdTreeRouter
from strategies.load import sample_parts
from strategies.routers import kernels as route_kernels


def split_costs(sub_sorted: np.ndarray, obj_coord: np.ndarray, lo: float, hi: float, n_objects: int,
                smoothing: float, mass: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(candidates, C1, C2) of every split of a node at one of its subscriptions' distinct
    coordinates `sub_sorted` (sorted), left = coordinate < candidate. `obj_coord` are the node's
    sample objects, `mass` the node's share of the extent's area, [lo, hi] its side on this axis.
    Prefix counts and one searchsorted: no loop over candidates."""
    first = np.empty(len(sub_sorted), bool)
    first[:1] = True
    np.not_equal(sub_sorted[1:], sub_sorted[:-1], out=first[1:])
    n1 = np.flatnonzero(first)  # subscriptions left of a distinct value = its first position
    cand = sub_sorted[n1]
    n2 = len(sub_sorted) - n1
    m1 = np.searchsorted(np.sort(obj_coord), cand, side="left")
    m2 = len(obj_coord) - m1
    frac = np.clip((cand - lo) / (hi - lo), 0.0, 1.0) if hi > lo else np.zeros(len(cand))
    denom = n_objects + smoothing
    p1 = (m1 + smoothing * mass * frac) / denom
    p2 = (m2 + smoothing * mass * (1.0 - frac)) / denom
    return cand, n1 * p1, n2 * p2


class DSkypeLocationRouter(KdTreeRouter):
    """Objects to every worker; a subscription to the worker of the kd-tree leaf holding its point
    (clamped into the fitted extent, so a point outside goes to the nearest leaf). The tree is the
    kd-tree router's; only what goes where differs."""

    def __init__(self, n_workers, split_dim, split_val, left, right, leaf_worker, regions, n_subs, prob):
        super().__init__(n_workers, split_dim, split_val, left, right, leaf_worker,
                         np.asarray(regions, np.float64).reshape(-1, 4))
        self.n_subs = np.asarray(n_subs, np.int64)  # per node N(nd) in the sample
        self.prob = np.asarray(prob, np.float64)  # per node smoothed p(nd)

    def route_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        return self.to_every_worker(ev, rows)

    def leaf_of(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The worker of the leaf holding each point, after clamping it into the root region."""
        xmin, ymin, xmax, ymax = self.regions[0]
        x = np.clip(np.asarray(x, np.float64), xmin, xmax)
        y = np.clip(np.asarray(y, np.float64), ymin, ymax)
        return route_kernels.kd_descend(np.arange(len(x), dtype=np.int64), x, y, *self._tree())

    def _by_point(self, ev: Events, rows: np.ndarray) -> Pairs:
        rows = np.asarray(rows, np.int64)
        return rows, self.leaf_of(ev.x[rows], ev.y[rows])

    route_range = route_knn = route_topk = route_frequent_terms = _by_point  # objects are broadcast

    def describe(self) -> dict[str, Any]:
        leaves = np.flatnonzero(self.split_dim < 0)
        return {
            **Router.describe(self),
            "objects": "broadcast",
            "leaves": [{"worker": int(self.leaf_worker[i]), "region": self.regions[i].tolist(),
                        "subscriptions": int(self.n_subs[i]), "p": float(self.prob[i]),
                        "cost": float(self.n_subs[i] * self.prob[i])} for i in leaves],
        }


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


class DSkypeLocationStrategy(Strategy):
    name = "dskype_location"
    families = frozenset({"range", "knn", "topk", "frequent_terms"})

    @dataclass
    class Params:
        smoothing: float = 1.0  # pseudo-messages spread uniformly over the extent in p(nd) (module doc)
        budget_exponent: float = 2.0  # e in |C1/n1^e - C2/n2^e| for uneven leaf budgets (module doc)

        def __post_init__(self):
            if not (_number(self.smoothing) and self.smoothing > 0):
                raise ValueError(f"strategy.params.smoothing={self.smoothing!r} is invalid; allowed: a finite number > 0")
            if not (_number(self.budget_exponent) and self.budget_exponent >= 0):
                raise ValueError(f"strategy.params.budget_exponent={self.budget_exponent!r} is invalid; allowed: a "
                                 "finite number >= 0 (1: cost per leaf budget, 2: per leaf under Eq. 15)")

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        if int(n_workers) < 1:
            raise ValueError(f"dskype_location: n_workers={n_workers!r} is invalid; allowed: an integer >= 1")
        root = [float(v) for v in context.extent]
        if not all(map(math.isfinite, root)) or root[2] < root[0] or root[3] < root[1]:
            raise ValueError(f"dskype_location: context.extent={tuple(root)} is invalid; allowed: finite "
                             "(xmin, ymin, xmax, ymax) with xmin <= xmax and ymin <= ymax")
        objs, subs = sample_parts(sample)
        lo, hi = np.array(root[:2]), np.array(root[2:])
        s_pts = np.clip(np.stack([sample.x[subs], sample.y[subs]], axis=1), lo, hi)
        o_pts = np.clip(np.stack([sample.x[objs], sample.y[objs]], axis=1), lo, hi)
        a, e, n_obj = float(params.smoothing), float(params.budget_exponent), len(objs)
        # per node: dim, val, left, right, worker, region, N(nd), p(nd)
        nodes: list[list] = []
        leaves_made = [0]

        def build(region, s_idx, o_idx, mass, k, depth) -> int:
            me = len(nodes)
            nodes.append([-1, 0.0, -1, -1, -1, region, len(s_idx), (len(o_idx) + a * mass) / (n_obj + a)])
            if k == 1:
                nodes[me][4] = leaves_made[0]
                leaves_made[0] += 1
                return me
            dim = depth % 2
            r_lo, r_hi = region[dim], region[dim + 2]
            k1, k2 = (k + 1) // 2, k // 2
            s_coord, o_coord = s_pts[s_idx, dim], o_pts[o_idx, dim]
            if len(s_idx):
                cand, c1, c2 = split_costs(np.sort(s_coord), o_coord, r_lo, r_hi, n_obj, a, mass)
                val = float(cand[int(np.argmin(np.abs(c1 / k1**e - c2 / k2**e)))])
            else:
                val = (r_lo + r_hi) / 2.0
            frac = (val - r_lo) / (r_hi - r_lo) if r_hi > r_lo else 0.0
            r_left, r_right = list(region), list(region)
            r_left[dim + 2] = val
            r_right[dim] = val
            nodes[me][0], nodes[me][1] = dim, val
            nodes[me][2] = build(r_left, s_idx[s_coord < val], o_idx[o_coord < val], mass * frac, k1, depth + 1)
            nodes[me][3] = build(r_right, s_idx[s_coord >= val], o_idx[o_coord >= val], mass * (1 - frac), k2,
                                 depth + 1)
            return me

        build(root, np.arange(len(subs)), np.arange(n_obj), 1.0, int(n_workers), 0)
        return DSkypeLocationRouter(int(n_workers), *zip(*nodes))
