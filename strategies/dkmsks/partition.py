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

    parent = [np.array([-1])]
    depth = [np.array([0])]
    box = [np.asarray(space, np.float64).reshape(1, 4)]
    rect = [group_mbr(np.zeros(n, np.int64), 1, rects)]
    cost = [eq6_numerators(stats, np.zeros(n, np.int64), rect[0], offsets, values)]
    size = [np.array([n])]
    n_nodes = 1
    split_nodes, split_nchild, split_space = [], [], []
    kind_count = {"space": 0, "hybrid": 0}
    cur = np.zeros(n, np.int64)
    # flat views, refreshed per level
    f_depth, f_box, f_rect, f_size = depth[0], box[0], rect[0], size[0]
    frontier = np.array([0]) if n >= 2 and target > 1 else np.zeros(0, np.int64)
    deferred = np.zeros(0, np.int64)  # splittable subsets the loop will never reach
    while len(frontier):
        active = np.zeros(n_nodes, bool)
        active[frontier] = True
        mem = np.flatnonzero(active[cur])
        par = cur[mem]
        space_ok = f_depth[par] < MAX_DEPTH
        hyb_ok = (f_size[par] <= gamma2) | ~space_ok
        # Space-only-Partition: the quadrant of r holding each subscription's location.
        ms, ps = mem[space_ok], par[space_ok]
        pb = f_box[ps]
        quad = (cy[ms] >= (pb[:, 1] + pb[:, 3]) / 2.0).astype(np.int64) * 2 + (cx[ms] >= (pb[:, 0] + pb[:, 2]) / 2.0)
        s_keys, s_inv = np.unique(ps * 4 + quad, return_inverse=True)
        s_rect = group_mbr(s_inv, len(s_keys), rects[ms])
        s_off, s_val = csr_take(offsets, values, ms)
        s_cost = eq6_numerators(stats, s_inv, s_rect, s_off, s_val)
        c_s = np.zeros(n_nodes, np.int64)
        np.add.at(c_s, s_keys // 4, s_cost)
        # Hybrid-Partition: greedy into four subsets by Eq. (5) under the parent's R.
        mh, ph = mem[hyb_ok], par[hyb_ok]
        h_off, h_val = csr_take(offsets, values, mh)
        c5 = eq5_numerators(stats, f_rect, h_off, h_val, group=ph)
        order = np.lexsort((mh, -c5, ph))
        bins = np.empty(len(mh), np.int64)
        bins[order] = allocate.greedy_per_group(ph[order], c5[order], 4)
        h_keys, h_inv = np.unique(ph * 4 + bins, return_inverse=True)
        h_rect = group_mbr(h_inv, len(h_keys), rects[mh])
        h_cost = eq6_numerators(stats, h_inv, h_rect, h_off, h_val)
        c_h = np.zeros(n_nodes, np.int64)
        np.add.at(c_h, h_keys // 4, h_cost)
        # The better split per subset: Space-only when C_s < C_h (ties: Hybrid, as the paper).
        use_space = np.zeros(n_nodes, bool)
        sp_ok_node = np.zeros(n_nodes, bool)
        sp_ok_node[ps] = True
        hy_ok_node = np.zeros(n_nodes, bool)
        hy_ok_node[ph] = True
        use_space[frontier] = sp_ok_node[frontier] & (~hy_ok_node[frontier] | (c_s[frontier] < c_h[frontier]))
        keep_s = use_space[s_keys // 4]
        keep_h = ~use_space[h_keys // 4]
        ck = np.concatenate([s_keys[keep_s], h_keys[keep_h]])
        cpar = ck // 4
        crect = np.concatenate([s_rect[keep_s], h_rect[keep_h]])
        ccost = np.concatenate([s_cost[keep_s], h_cost[keep_h]])
        quads = quadrants(f_box[cpar])
        n_s = int(keep_s.sum())
        cbox = np.concatenate([quads[np.arange(n_s), ck[:n_s] % 4], f_box[cpar[n_s:]]])
        order = np.lexsort((ck % 4, cpar))  # children numbered by parent, then position
        ck, cpar, crect, ccost, cbox = ck[order], cpar[order], crect[order], ccost[order], cbox[order]
        new_ids = n_nodes + np.arange(len(ck))
        # move members: each member's chosen child key, then its new node id
        key_of = np.empty(len(mem), np.int64)
        key_of[space_ok] = ps * 4 + quad
        via_h = np.zeros(len(mem), np.int64)
        via_h[hyb_ok] = ph * 4 + bins
        key_of = np.where(use_space[par], key_of, via_h)
        # Within one parent, keys are unique per child; key -> id by search in (parent, key) order.
        sort_keys = ck  # parent*4+position is increasing in the (parent, position) order
        cur[mem] = new_ids[np.searchsorted(sort_keys, key_of)]
        csize = np.bincount(cur[mem] - n_nodes, minlength=len(ck))
        up, uc = np.unique(cpar, return_counts=True)
        split_nodes.append(up)
        split_nchild.append(uc)
        split_space.append(use_space[up])
        parent.append(cpar)
        depth.append(f_depth[cpar] + 1)
        box.append(cbox)
        rect.append(crect)
        cost.append(ccost)
        size.append(csize)
        n_nodes += len(ck)
        f_depth, f_box, f_rect, f_size = (np.concatenate(a) for a in (depth, box, rect, size))
        pending = np.concatenate([deferred, new_ids[csize >= 2]])
        need = _needed(np.concatenate(split_nodes), np.concatenate(split_nchild), pending, f_depth,
                       np.concatenate(cost), target)
        frontier, deferred = pending[need], pending[~need]

    node_parent = np.concatenate(parent)
    node_depth = f_depth
    node_cost = np.concatenate(cost)
    # Cut the tree where the paper's loop stops: splits in descending cost order until target.
    internal = np.concatenate(split_nodes) if split_nodes else np.zeros(0, np.int64)
    nchild = np.concatenate(split_nchild) if split_nchild else np.zeros(0, np.int64)
    split = np.zeros(n_nodes, bool)
    if len(internal):
        order = np.lexsort((internal, node_depth[internal], -node_cost[internal]))
        gained = 1 + np.cumsum(nchild[order] - 1)  # |collection| after each split
        reach = np.flatnonzero(gained >= target)
        k = int(reach[0]) + 1 if len(reach) else len(order)
        if target <= 1:
            k = 0
        split[internal[order[:k]]] = True
        was_space = np.concatenate(split_space)[order[:k]]
        kind_count = {"space": int(was_space.sum()), "hybrid": int(k - was_space.sum())}
    # Each subscription's subset: the topmost node on its path whose parent was split (or root).
    node = cur.copy()
    for _ in range(int(node_depth.max()) + 1):
        p = node_parent[node]
        up = (p >= 0) & ~split[np.maximum(p, 0)]
        if not up.any():
            break
        node = np.where(up, p, node)
    leaves, subset_of = np.unique(node, return_inverse=True)
    s_rects = f_rect[leaves]
    member_cost = eq5_numerators(stats, s_rects, offsets, values, group=subset_of)
    order_key = np.full(len(leaves), n, np.int64)
    np.minimum.at(order_key, subset_of, np.arange(n))
    return SubsetPartition(subset_of, s_rects, node_cost[leaves], member_cost, order_key, kind_count)


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
