"""SOP, DkM-SKS's space-oriented baseline (Tsuruoka et al., arXiv 2101.12417, Sec. 3.2), applied
to range subscriptions.

The space (the data set's extent) is split like a quadtree: split into four equal quadrants, then
repeatedly split the subspace of largest C(S_r) = P(R) * |S_r| (Eq. 2-3), where S_r holds the
subscriptions located in r and R encloses their regions (for a range subscription its rectangle,
for kNN the ball B(s)), until there are theta * m subspaces. The subsets S_r are then placed
whole by Algorithm 1 (LPT on C(S_r)). A later subscription costs P(R) of its own region (Eq. 3
with S_r = {s}) and goes online to argmin C(w); the paper itself shows this makes new
subscriptions pile onto one worker (Fig. 7, Table 3), and that is kept. Objects are broadcast.

Decisions (the paper leaves them open): the root space is the FitContext extent; a subscription
is located at its point (the rectangle's centre); empty quadrants are dropped and do not count
towards theta * m; a subspace with one subscription (or at MAX_DEPTH) is not split, and the loop
also stops when nothing can be split; a fitted subscription's own cost, subtracted from C(w) when
it is deleted, is C(S_r) / |S_r| = P(R).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from harness.core.events import Events
from harness.core import allocate
from strategies.base import FitContext, Router, Strategy
from strategies.dkmsks.balls import with_balls
from strategies.dkmsks.counts import ObjectStats
from strategies.dkmsks.partition import MAX_DEPTH, quadrants
from strategies.dkmsks.regions import regions
from strategies.load import locations
from strategies.routers.subscription_table import SubscriptionTableRouter, finish, sample_state
from strategies.load import sample_parts


class SopRouter(SubscriptionTableRouter):
    cost_model = "SOP Eq. (2)-(3): P(R) * |S_r|"

    def __init__(self, n_workers: int, stats: ObjectStats, leaf_box, leaf_rect, leaf_cost, leaf_size, leaf_worker,
                 **state):
        super().__init__(n_workers, **state)
        self.stats = stats
        self.leaf_box = np.asarray(leaf_box, np.float64).reshape(-1, 4)
        self.leaf_rect = np.asarray(leaf_rect, np.float64).reshape(-1, 4)
        self.leaf_cost = np.asarray(leaf_cost, np.float64)
        self.leaf_size = np.asarray(leaf_size, np.int64)
        self.leaf_worker = np.asarray(leaf_worker, np.int64)

    def new_costs(self, ev: Events, rows: np.ndarray) -> np.ndarray:
        ev = with_balls(ev, rows, self.stats)  # a kNN subscription's R: its ball over O_init (Sec. 3.2)
        return self.stats.p(self.stats.rect_counts(regions(ev, rows)))

    def describe(self) -> dict:
        return {
            **super().describe(),
            "subspaces": [
                {"worker": int(w), "space": b.tolist(), "R": r.tolist(), "cost": float(c), "subscriptions": int(s)}
                for w, b, r, c, s in zip(self.leaf_worker, self.leaf_box, self.leaf_rect, self.leaf_cost, self.leaf_size)
            ],
        }


def quadtree_subspaces(stats: ObjectStats, cx, cy, rects, space, n_target: int):
    """SOP's space partitioning: split the costliest subspace (ties: the older one) until there are
    n_target non-empty subspaces or none can split. Returns per leaf (member rows, box r, R, cost)."""
    n = len(cx)
    if n == 0:
        return []
    box0 = np.asarray(space, np.float64)
    members0 = np.arange(n)

    def node(mem, box, depth):
        r = np.array([rects[mem, 0].min(), rects[mem, 1].min(), rects[mem, 2].max(), rects[mem, 3].max()])
        return mem, box, r, depth

    def cost(nodes):
        counts = stats.rect_counts(np.stack([nd[2] for nd in nodes])) if nodes else np.zeros(0)
        return [float(c) * len(nd[0]) for c, nd in zip(counts, nodes)]  # Eq. (3) times |O_init|

    root = node(members0, box0, 0)
    leaves, heap = [], []
    tick = 0

    def push(nd, c):
        nonlocal tick
        if len(nd[0]) >= 2 and nd[3] < MAX_DEPTH:
            heapq.heappush(heap, (-c, tick, nd))
        else:
            leaves.append((tick, nd, c))
        tick += 1

    push(root, cost([root])[0])
    count = 1
    while count < n_target and heap:
        _, _, (mem, box, _, depth) = heapq.heappop(heap)
        mid_x, mid_y = (box[0] + box[2]) / 2.0, (box[1] + box[3]) / 2.0
        quad = (cy[mem] >= mid_y).astype(np.int64) * 2 + (cx[mem] >= mid_x)
        quads = quadrants(box[None, :])[0]
        kids = [node(mem[quad == q], quads[q], depth + 1) for q in np.unique(quad)]
        for nd, c in zip(kids, cost(kids)):
            push(nd, c)
        count += len(kids) - 1
    out = sorted(leaves + [(t, nd, -negc) for negc, t, nd in heap], key=lambda e: e[0])
    return [(nd[0], nd[1], nd[2], c) for _, nd, c in out]


class SopStrategy(Strategy):
    name = "sop"
    families = frozenset({"range", "knn", "frequent_terms"})
    # the paper's worker index (DkM-SKS Sec. 3.2, index.knn.layout=paper): per subset its rectangle R
    # and an inverted file, theta subsets per worker (harness/families/knn/subsets.py)
    paper_index = {"knn": {"subsets": 20}}

    @dataclass
    class Params:
        theta: int = 20  # split until theta * m subspaces (the paper's default)

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        objs, qs = sample_parts(sample)
        stats = ObjectStats.from_events(sample, objs)
        rects = regions(sample, qs)
        cx, cy = locations(sample, qs)
        leaves = quadtree_subspaces(stats, cx, cy, rects, context.extent, params.theta * n_workers)
        leaf_cost = stats.p([c for *_, c in leaves])
        leaf_worker = allocate.lpt_assign(leaf_cost, n_workers)
        leaf_of = np.zeros(len(qs), np.int64)
        for i, (mem, *_) in enumerate(leaves):
            leaf_of[mem] = i
        sizes = np.array([len(m) for m, *_ in leaves], np.int64)
        own = leaf_cost / np.maximum(sizes, 1)  # C(S_r) / |S_r| = P(R)
        router = SopRouter(
            n_workers, stats, [b for _, b, _, _ in leaves], [r for _, _, r, _ in leaves], leaf_cost, sizes,
            leaf_worker, **sample_state(sample, qs, leaf_worker[leaf_of], own[leaf_of], n_workers),
        )
        return finish(router, sample)
