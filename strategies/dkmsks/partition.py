"""DkM-SKS's subscription partitioning (Tsuruoka et al., arXiv 2101.12417, Sec. 4.2): Algorithm 2
splits the costliest subset (Space-only or Hybrid) until there are gamma1 * m subsets, and
Algorithm 3 deals their members out, each to the least loaded worker. The quadrant split and its
depth limit are shared with SOP's quadtree (Sec. 3.2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from harness.core.events import csr_take
from harness.core import allocate
from strategies.dkmsks.cost import eq5_numerators, eq6_numerators
from strategies.dkmsks.counts import ObjectStats, rect_columns

MAX_DEPTH = 32  # quadtree levels before a space split is refused (subscriptions at one point)


@njit(cache=True)
def _group_mbr(inv, k, xmin, ymin, xmax, ymax):
    out = np.empty((k, 4), np.float64)
    out[:, 0] = np.inf
    out[:, 1] = np.inf
    out[:, 2] = -np.inf
    out[:, 3] = -np.inf
    for i in range(len(inv)):
        g = inv[i]
        out[g, 0] = min(out[g, 0], xmin[i])
        out[g, 1] = min(out[g, 1], ymin[i])
        out[g, 2] = max(out[g, 2], xmax[i])
        out[g, 3] = max(out[g, 3], ymax[i])
    return out


def group_mbr(inv: np.ndarray, k: int, rects: np.ndarray) -> np.ndarray:
    """The rectangle R enclosing every member region of each group."""
    return _group_mbr(np.asarray(inv, np.int64), int(k), *rect_columns(rects))


@dataclass
class SubsetPartition:
    """Algorithm 2's collection of subsets: which subset each subscription is in, each subset's
    rectangle R and cost (Eq. 6 numerator), and each member's cost within its subset (Eq. 5)."""

    subset_of: np.ndarray  # (n,) subset index per subscription
    rects: np.ndarray  # (k, 4) R per subset
    cost: np.ndarray  # (k,) Eq. (6) numerators
    member_cost: np.ndarray  # (n,) Eq. (5) numerators with the subset's R
    order_key: np.ndarray  # (k,) smallest member index: the tie-break of the descending cost order
    splits: dict  # how many Space-only / Hybrid splits the loop performed


def quadrants(r: np.ndarray) -> np.ndarray:
    """(n, 4, 4): the four equal quadrants of each box, indexed by (y >= mid) * 2 + (x >= mid)."""
    mx = (r[:, 0] + r[:, 2]) / 2.0
    my = (r[:, 1] + r[:, 3]) / 2.0
    q = np.repeat(r[:, None, :], 4, axis=1).copy()
    q[:, [1, 3], 0] = mx[:, None]
    q[:, [0, 2], 2] = mx[:, None]
    q[:, [2, 3], 1] = my[:, None]
    q[:, [0, 1], 3] = my[:, None]
    return q


def _needed(internal, nchild, pending, node_depth, node_cost, target) -> np.ndarray:
    """Which pending (splittable, not yet grown) subsets the paper's loop might still split.

    The loop splits in (cost desc, shallower, older) order and stops once |collection| >= target.
    Counting a pending subset as gaining nothing gives the latest possible stopping split; a pending
    subset ordered after it is never split, and neither is anything below it (costs only fall)."""
    if target <= 1 or len(pending) == 0:
        return np.zeros(len(pending), bool)
    nodes = np.concatenate([internal, pending])
    gain = np.concatenate([nchild - 1, np.zeros(len(pending), np.int64)])
    order = np.lexsort((nodes, node_depth[nodes], -node_cost[nodes]))
    reach = np.flatnonzero(1 + np.cumsum(gain[order]) >= target)
    stop = int(reach[0]) if len(reach) else len(order)
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return rank[len(internal):] < stop


@dataclass
class _Children:
    """One level's candidate children by one kind of split: each member's child key (its node * 4 +
    the child's position), the distinct keys, each child's R and Eq. (6) cost, and the cost per
    parent node (the split's C_s or C_h)."""

    key: np.ndarray
    keys: np.ndarray
    rect: np.ndarray
    cost: np.ndarray
    total: np.ndarray


def _children(stats: ObjectStats, rects, offsets, values, mem, key, n_nodes: int, off=None, val=None) -> _Children:
    """The children that `key` puts the members `mem` in (their terms as CSR when already taken)."""
    keys, inv = np.unique(key, return_inverse=True)
    rect = group_mbr(inv, len(keys), rects[mem])
    if off is None:
        off, val = csr_take(offsets, values, mem)
    cost = eq6_numerators(stats, inv, rect, off, val)
    total = np.zeros(n_nodes, np.int64)
    np.add.at(total, keys // 4, cost)
    return _Children(key, keys, rect, cost, total)


def _space_children(stats, cx, cy, rects, offsets, values, mem, par, box, n_nodes) -> _Children:
    """Space-only-Partition of the members `mem` of nodes `par`: the quadrant of their node's box
    r holding each subscription's location."""
    pb = box[par]
    quad = (cy[mem] >= (pb[:, 1] + pb[:, 3]) / 2.0).astype(np.int64) * 2 + (cx[mem] >= (pb[:, 0] + pb[:, 2]) / 2.0)
    return _children(stats, rects, offsets, values, mem, par * 4 + quad, n_nodes)


def _hybrid_children(stats, rects, offsets, values, mem, par, node_rect, n_nodes) -> _Children:
    """Hybrid-Partition of the members `mem` of nodes `par`: greedy into four subsets by Eq. (5)
    under the node's R."""
    off, val = csr_take(offsets, values, mem)
    c5 = eq5_numerators(stats, node_rect, off, val, group=par)
    order = np.lexsort((mem, -c5, par))
    bins = np.empty(len(mem), np.int64)
    bins[order] = allocate.greedy_per_group(par[order], c5[order], 4)
    return _children(stats, rects, offsets, values, mem, par * 4 + bins, n_nodes, off, val)


class _Tree:
    """Algorithm 2's tree as it is grown, level by level: per node its parent, depth, box r,
    rectangle R, cost and size (flat views over the levels), each subscription's current node,
    and the splits made (node, number of children, whether Space-only)."""

    def __init__(self, stats: ObjectStats, rects, offsets, values, space, n: int):
        self.cur = np.zeros(n, np.int64)
        rect = group_mbr(self.cur, 1, rects)
        self.levels = {"parent": [np.array([-1])], "depth": [np.array([0])],
                       "box": [np.asarray(space, np.float64).reshape(1, 4)], "rect": [rect],
                       "cost": [eq6_numerators(stats, self.cur, rect, offsets, values)], "size": [np.array([n])]}
        self.split_nodes, self.split_nchild, self.split_space = [], [], []
        self.n_nodes = 1
        self.depth, self.box, self.rect, self.size = (self.levels[c][0] for c in ("depth", "box", "rect", "size"))

    def grow(self, frontier, mem, par, space_ok, hyb_ok, sp: _Children, hy: _Children) -> np.ndarray:
        """Split every frontier node the better way (Space-only when C_s < C_h; ties: Hybrid, as
        the paper), move its members to the children; returns the new nodes' ids."""
        n_nodes = self.n_nodes
        use_space = np.zeros(n_nodes, bool)
        sp_ok_node = np.zeros(n_nodes, bool)
        sp_ok_node[par[space_ok]] = True
        hy_ok_node = np.zeros(n_nodes, bool)
        hy_ok_node[par[hyb_ok]] = True
        use_space[frontier] = sp_ok_node[frontier] & (~hy_ok_node[frontier] | (sp.total[frontier] < hy.total[frontier]))
        keep_s = use_space[sp.keys // 4]
        keep_h = ~use_space[hy.keys // 4]
        ck = np.concatenate([sp.keys[keep_s], hy.keys[keep_h]])
        cpar = ck // 4
        crect = np.concatenate([sp.rect[keep_s], hy.rect[keep_h]])
        ccost = np.concatenate([sp.cost[keep_s], hy.cost[keep_h]])
        quads = quadrants(self.box[cpar])
        n_s = int(keep_s.sum())
        cbox = np.concatenate([quads[np.arange(n_s), ck[:n_s] % 4], self.box[cpar[n_s:]]])
        order = np.lexsort((ck % 4, cpar))  # children numbered by parent, then position
        ck, cpar, crect, ccost, cbox = ck[order], cpar[order], crect[order], ccost[order], cbox[order]
        new_ids = n_nodes + np.arange(len(ck))
        # move members: each member's chosen child key, then its new node id
        key_of = np.empty(len(mem), np.int64)
        key_of[space_ok] = sp.key
        via_h = np.zeros(len(mem), np.int64)
        via_h[hyb_ok] = hy.key
        key_of = np.where(use_space[par], key_of, via_h)
        # Within one parent, keys are unique per child; key -> id by search in (parent, key) order
        # (parent*4+position is increasing in the (parent, position) order).
        self.cur[mem] = new_ids[np.searchsorted(ck, key_of)]
        csize = np.bincount(self.cur[mem] - n_nodes, minlength=len(ck))
        up, uc = np.unique(cpar, return_counts=True)
        self.split_nodes.append(up)
        self.split_nchild.append(uc)
        self.split_space.append(use_space[up])
        for c, v in (("parent", cpar), ("depth", self.depth[cpar] + 1), ("box", cbox), ("rect", crect),
                     ("cost", ccost), ("size", csize)):
            self.levels[c].append(v)
        self.n_nodes += len(ck)
        self.depth, self.box, self.rect, self.size = (np.concatenate(self.levels[c])
                                                      for c in ("depth", "box", "rect", "size"))
        return new_ids

    def splits(self):
        """The splits made so far: nodes, their numbers of children, whether Space-only."""
        if not self.split_nodes:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool)
        return tuple(np.concatenate(a) for a in (self.split_nodes, self.split_nchild, self.split_space))


def _cut(tree: _Tree, target: int) -> tuple[np.ndarray, dict]:
    """Where the paper's loop stops: the grown splits in descending cost order until the
    collection holds `target`. Returns which nodes are split and the splits by kind."""
    internal, nchild, was_space = tree.splits()
    node_depth, node_cost = tree.depth, np.concatenate(tree.levels["cost"])
    split = np.zeros(tree.n_nodes, bool)
    if not len(internal):
        return split, {"space": 0, "hybrid": 0}
    order = np.lexsort((internal, node_depth[internal], -node_cost[internal]))
    gained = 1 + np.cumsum(nchild[order] - 1)  # |collection| after each split
    reach = np.flatnonzero(gained >= target)
    k = int(reach[0]) + 1 if len(reach) else len(order)
    if target <= 1:
        k = 0
    split[internal[order[:k]]] = True
    chosen = was_space[order[:k]]
    return split, {"space": int(chosen.sum()), "hybrid": int(k - chosen.sum())}


def _subsets(tree: _Tree, split: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each subscription's subset: the topmost node on its path whose parent was split (or the
    root). Returns the subsets' nodes and each subscription's subset index."""
    node_parent = np.concatenate(tree.levels["parent"])
    node = tree.cur.copy()
    for _ in range(int(tree.depth.max()) + 1):
        p = node_parent[node]
        up = (p >= 0) & ~split[np.maximum(p, 0)]
        if not up.any():
            break
        node = np.where(up, p, node)
    return np.unique(node, return_inverse=True)


def partition_subsets(stats: ObjectStats, cx: np.ndarray, cy: np.ndarray, rects: np.ndarray, offsets: np.ndarray,
                      values: np.ndarray, space: tuple, target: int, gamma2: int,
                      force_tree: bool = False) -> SubsetPartition:
    """Algorithm 2 until the collection holds `target` (= gamma1 * m) subsets or none can split.

    A subset of more than gamma2 subscriptions is split Space-only (quadrants of its space r by
    subscription location); a smaller one both ways, Hybrid when C_s >= C_h. Every split's children
    get their own R and cost, so children never cost more than their parent, and the paper's loop
    (always the costliest subset next) splits in (cost desc, shallower, older) order. The tree is
    grown level by level, vectorised, only where that order can still reach before the collection
    is full (`_needed`), then cut where the loop stops. With no more subscriptions than `target`
    the loop can only end with singletons, so that case is answered directly (`force_tree` grows
    the tree anyway, for tests)."""
    n = len(cx)
    rects = np.asarray(rects, np.float64).reshape(-1, 4)
    offsets = np.asarray(offsets, np.int64)
    if n == 0:
        z = np.zeros(0, np.int64)
        return SubsetPartition(z, np.zeros((0, 4)), z, z, z, {"space": 0, "hybrid": 0})
    if n <= target and not force_tree:
        cost = eq5_numerators(stats, rects, offsets, values)
        idx = np.arange(n)
        return SubsetPartition(idx, rects.copy(), cost, cost.copy(), idx, {"space": 0, "hybrid": 0, "singletons": n})

    tree = _Tree(stats, rects, offsets, values, space, n)
    frontier = np.array([0]) if n >= 2 and target > 1 else np.zeros(0, np.int64)
    deferred = np.zeros(0, np.int64)  # splittable subsets the loop will never reach
    while len(frontier):
        active = np.zeros(tree.n_nodes, bool)
        active[frontier] = True
        mem = np.flatnonzero(active[tree.cur])
        par = tree.cur[mem]
        space_ok = tree.depth[par] < MAX_DEPTH
        hyb_ok = (tree.size[par] <= gamma2) | ~space_ok
        sp = _space_children(stats, cx, cy, rects, offsets, values, mem[space_ok], par[space_ok], tree.box,
                             tree.n_nodes)
        hy = _hybrid_children(stats, rects, offsets, values, mem[hyb_ok], par[hyb_ok], tree.rect, tree.n_nodes)
        new_ids = tree.grow(frontier, mem, par, space_ok, hyb_ok, sp, hy)
        csize = tree.levels["size"][-1]
        pending = np.concatenate([deferred, new_ids[csize >= 2]])
        internal, nchild, _ = tree.splits()
        need = _needed(internal, nchild, pending, tree.depth, np.concatenate(tree.levels["cost"]), target)
        frontier, deferred = pending[need], pending[~need]

    split, kind_count = _cut(tree, target)
    leaves, subset_of = _subsets(tree, split)
    s_rects = tree.rect[leaves]
    member_cost = eq5_numerators(stats, s_rects, offsets, values, group=subset_of)
    order_key = np.full(len(leaves), n, np.int64)
    np.minimum.at(order_key, subset_of, np.arange(n))
    return SubsetPartition(subset_of, s_rects, np.concatenate(tree.levels["cost"])[leaves], member_cost, order_key,
                           kind_count)


def assign_members(part: SubsetPartition, n_workers: int) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 3: subsets by cost descending, each one's members by cost descending, every
    subscription to the least loaded worker. Returns (worker per subscription, C(w))."""
    n = len(part.subset_of)
    rank = np.empty(len(part.cost), np.int64)
    rank[np.lexsort((part.order_key, -part.cost))] = np.arange(len(part.cost))
    order = np.lexsort((np.arange(n), -part.member_cost, rank[part.subset_of]))
    loads = np.zeros(n_workers, np.float64)
    worker = allocate.greedy_least_loaded(order, part.member_cost.astype(np.float64), loads)
    return worker, loads
