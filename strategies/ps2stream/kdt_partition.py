"""The kdt-tree's partitioning: PS2Stream's Algorithm 1 "Partition Workload" (Chen et al., Section
IV-B) on the load model of strategies/ps2stream/kdt_load.py.

Phase 1 (lines 1-12) splits space where objects and queries differ in text: a node whose cosine
text similarity sim_t(O_n, Q_n) >= delta goes to N_s; otherwise it is split at the objects' median
along x or y, the axis whose children have the smaller alpha = min(sim(n1), sim(n2)); when
|alpha - sim(n)| <= sim_tolerance the node is text-consistent and goes to N_t, else both children
are examined in turn. Phase 2: with fewer nodes than workers, ComputeNumberPartitions (a dynamic
programme over C[i, k] = total load of node i cut into k parts by a dry run of PartitionNode)
decides how many parts each node gets and PartitionNode cuts it; then MergeNodesIntoPartitions
groups the leaves into m partitions, and while L_max / L_min > sigma the most loaded leaf is cut
in two, until the leaf count reaches theta. PartitionNode cuts an N_t node by text, an N_s node by
text or by space, whichever gives the smaller total load. Partition i is worker i.

Decisions where the paper is silent (each also in the notes file):
- A partition's load is the sum of its leaves' loads minus the objects and queries it already
  holds (each is sent to a worker once): what makes "minimum load increase" differ between
  partitions. While a partition is empty, leaves fill empty partitions first (L_min = 0).
- Space cuts run along gridt cell boundaries, so every cell lies in one leaf region (the grid's
  granularity "decided by the leaves"); a space cut into p parts is recursive binary, p//2 and
  p - p//2 leaves per side at the boundary that best balances the per-leaf load. A text cut into
  p parts is longest-processing-time greedy of the node's terms on their own load (the
  frequency-based text baseline). Children keep their parent's N_t / N_s label.
- Phase 1 also stops at theta nodes and at nodes with fewer than `min_split_objects` sample
  objects (sampling noise would otherwise split down to single cells). When theta stops the
  balance loop the leaves are merged once more so that every leaf has a worker.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
from numba import njit

from harness.core import allocate
from harness.core.events import csr_of
from strategies.ps2stream.kdt_load import Node, Sample, posting_products, present, text_similarity

INF = float("inf")


def split_region(region, axis: int, at: int):
    """Cut a cell region before cell `at` along axis (0 = x, 1 = y)."""
    x0, x1, y0, y1 = region
    if axis == 0:
        return (x0, at - 1, y0, y1), (at, x1, y0, y1)
    return (x0, x1, y0, at - 1), (x0, x1, at, y1)


# --- Phase 1: text-similarity splits (Algorithm 1, lines 1-12) -------------------------------------

def median_split(node: Node, axis: int):
    """The kd split of line 8: at the median object along the axis, on a cell boundary."""
    s = node.s
    lo, hi = (node.region[0], node.region[1]) if axis == 0 else (node.region[2], node.region[3])
    if hi <= lo:
        return None
    c = (s.ox if axis == 0 else s.oy)[node.objs]
    at = int(np.sort(c)[len(c) // 2]) if len(c) else (lo + hi + 1) // 2
    at = min(max(at, lo + 1), hi)
    r1, r2 = split_region(node.region, axis, at)
    return node.child(r1), node.child(r2)


def similarity_split(node: Node):
    """(alpha, n1, n2) for the axis whose children have the smaller min similarity, or None."""
    best = None
    for axis in (0, 1):
        kids = median_split(node, axis)
        if kids is None:
            continue
        alpha = min(text_similarity(k.s, k.objs, k.qrys) for k in kids)
        if best is None or alpha < best[0]:
            best = (alpha, *kids)
    return best


def phase1(s: Sample, delta: float, tolerance: float, theta: int, min_split_objects: int):
    """N_t and N_s: the text-dissimilar consistent subspaces and the text-similar ones."""
    root = Node(s, (0, s.nx - 1, 0, s.ny - 1), np.arange(s.n_objects), np.arange(s.n_queries))
    todo, n_t, n_s = deque([root]), [], []
    while todo:
        n = todo.popleft()
        sim = text_similarity(s, n.objs, n.qrys)
        if sim >= delta:
            n.label = "s"
            n_s.append(n)
            continue
        n.label = "t"
        budget = len(todo) + len(n_t) + len(n_s) + 2 <= theta
        split = similarity_split(n) if budget and len(n.objs) >= min_split_objects else None
        if split is None or abs(split[0] - sim) <= tolerance:
            n_t.append(n)
        else:
            todo.extend(split[1:])
    return n_t, n_s


# --- PartitionNode ---------------------------------------------------------------------------------

def text_split(node: Node, p: int):
    """p text leaves over the node's region: its terms by LPT on their own load, the GI2
    comparisons f_o(c, t) * f_q(c, t) summed over cells plus f_o + f_q (queries routed by t,
    objects holding t). Terms of the node's set that no sample query uses have load 0."""
    qo, qt, oo, ot, used = node.pairs()
    used_terms = np.flatnonzero(used)
    universe = used_terms if node.terms is None else node.terms
    if len(universe) < p:
        return None
    mq, mo = used[qt], used[ot]
    if node.terms is not None:  # keep only the routing pairs that bring queries here
        mine = np.zeros(node.s.vocab, bool)
        mine[node.terms] = True
        mq &= mine[qt]
    qo, qt, oo, ot = qo[mq], qt[mq], oo[mo], ot[mo]
    v = node.s.vocab
    t, _, prod = posting_products(node.s, node.region, qo, qt, oo, ot)
    term_load = np.bincount(t, prod, v)[:v] + np.bincount(qt, minlength=v)[:v] + np.bincount(ot, minlength=v)[:v]
    loads = term_load[universe]
    bins = allocate.lpt_spread(loads, p)
    # every child's received objects and queries in one pass: distinct (item, bin) keys
    bin_of = np.zeros(v, np.int64)
    bin_of[universe] = bins
    objs = by_bin(np.flatnonzero(present(oo * p + bin_of[ot], node.s.n_objects * p)), p)
    qrys = by_bin(np.flatnonzero(present(qo * p + bin_of[qt], node.s.n_queries * p)), p)
    terms = by_bin(universe * p + bins, p)
    return [node.child(node.region, terms[k], (objs[k], qrys[k]), same_region=True) for k in range(p)]


def by_bin(keys: np.ndarray, p: int) -> list[np.ndarray]:
    """Split item * p + bin keys into each bin's items, in their order (one stable sort, not p
    masks over every key: a text cut into 32 parts made 32 passes)."""
    b = keys % p
    order = np.argsort(b, kind="stable")
    cut = np.searchsorted(b[order], np.arange(p + 1))
    items = keys[order] // p
    return [items[cut[k]:cut[k + 1]] for k in range(p)]


def split_regions(region, p, prod, no, qx0, qx1, qy0, qy1):
    """Recursive binary cut of a cell region into p regions, each cut at the cell boundary that
    minimises the larger per-leaf load of its two sides (k//2 and k - k//2 leaves). `prod` and
    `no` are the node's per-cell GI2 comparisons and objects; the queries are those it receives."""
    if p == 1:
        return [region]
    kl, kr = p // 2, p - p // 2
    x0, x1, y0, y1 = region
    sub_p = prod[y0:y1 + 1, x0:x1 + 1]
    sub_o = no[y0:y1 + 1, x0:x1 + 1]
    best = None
    for axis in (0, 1):
        lo, hi = (x0, x1) if axis == 0 else (y0, y1)
        other = (y1 - y0 + 1) if axis == 0 else (x1 - x0 + 1)
        cand = np.arange(lo + 1, hi + 1)
        cand = cand[((cand - lo) * other >= kl) & ((hi - cand + 1) * other >= kr)]
        if len(cand) == 0:
            continue
        # per line of cells along the axis: cumulative matching load and objects before the cut
        cp = np.concatenate([[0.0], np.cumsum(sub_p.sum(axis=axis))])
        co = np.concatenate([[0.0], np.cumsum(sub_o.sum(axis=axis))])
        a, b = (qx0, qx1) if axis == 0 else (qy0, qy1)
        p_l, o_l = cp[cand - lo], co[cand - lo]
        n_ql = np.searchsorted(np.sort(a), cand, side="left")
        n_qr = len(b) - np.searchsorted(np.sort(b), cand, side="left")
        cost = np.maximum((p_l + o_l + n_ql) / kl, (cp[-1] - p_l + co[-1] - o_l + n_qr) / kr)
        i = int(np.argmin(cost))
        if best is None or cost[i] < best[0]:
            best = (cost[i], axis, int(cand[i]))
    if best is None:
        return None
    _, axis, at = best
    r1, r2 = split_region(region, axis, at)
    a, b = (qx0, qx1) if axis == 0 else (qy0, qy1)
    lq, rq = a < at, b >= at
    left = split_regions(r1, kl, prod, no, qx0[lq], qx1[lq], qy0[lq], qy1[lq])
    right = split_regions(r2, kr, prod, no, qx0[rq], qx1[rq], qy0[rq], qy1[rq])
    if left is None or right is None:
        return None
    return left + right


def space_split(node: Node, p: int):
    s = node.s
    if node.n_cells < p:
        return None
    qo, qt, oo, ot, _ = node.pairs()
    _, cells, prod = posting_products(s, node.region, qo, qt, oo, ot)
    ro, rq = node.routed
    ncell = s.nx * s.ny
    prod = np.bincount(cells, prod, ncell).reshape(s.ny, s.nx)
    no = np.bincount(s.oy[ro] * s.nx + s.ox[ro], minlength=ncell).reshape(s.ny, s.nx).astype(np.float64)
    regions = split_regions(node.region, p, prod, no, s.qx0[rq], s.qx1[rq], s.qy0[rq], s.qy1[rq])
    if regions is None:
        return None
    return [node.child(r) for r in regions]


def partition_node(node: Node, p: int):
    """PartitionNode(n, N_t, N_s, p): p children replacing n (None if n cannot be cut in p).
    N_t nodes are cut by text; N_s nodes by text or space, whichever has the smaller total load."""
    if p == 1:
        return [node]
    options = [text_split(node, p)]
    if node.label == "s":
        options.append(space_split(node, p))
    options = [o for o in options if o is not None]
    if not options:
        return None
    return min(options, key=lambda kids: sum(k.load for k in kids))  # ties: text first


# --- ComputeNumberPartitions -----------------------------------------------------------------------

def compute_number_partitions(cost: np.ndarray, m: int):
    """The dynamic programme: cost[i, k] = total load of node i cut into k parts (k = 1..m, INF
    when impossible); L[i, j] = min over 1 <= k <= j - i + 1 of L[i-1, j-k] + C[i, k]. Returns the
    part counts (summing to m) minimising the total load, or None when no split reaches m."""
    n = cost.shape[0]
    L = np.full((n + 1, m + 1), INF)
    K = np.zeros((n + 1, m + 1), np.int64)
    L[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(i, m + 1):
            for k in range(1, j - i + 2):
                v = L[i - 1, j - k] + cost[i - 1, k]
                if v < L[i, j]:
                    L[i, j], K[i, j] = v, k
    if not np.isfinite(L[n, m]):
        return None
    parts, j = [], m
    for i in range(n, 0, -1):
        parts.append(int(K[i, j]))
        j -= K[i, j]
    return parts[::-1]


# --- MergeNodesIntoPartitions ----------------------------------------------------------------------

@njit(cache=True)  # also called inside the compiled greedy pass
def balance_factor(loads: np.ndarray) -> float:
    lo, hi = loads.min(), loads.max()
    if hi <= 0:
        return 1.0
    return np.inf if lo <= 0 else hi / lo


def merge_nodes(leaves: list[Node], m: int, n_objects: int, n_queries: int):
    """Leaves by load descending; each to the partition whose load increases least (ties: the less
    loaded, then the lower id) unless that raises L_max / L_min, else to the least loaded one.
    While a partition is empty the balance factor is undefined, so leaves fill empty partitions
    first. Returns (partition of each leaf, partition loads). The balance loop calls this once per
    cut, with up to theta leaves, so the greedy pass is compiled (`_greedy_merge`)."""
    loads = np.array([n.load for n in leaves], np.float64)
    rq_ptr, rq_val = csr_of([n.rq for n in leaves])
    ro_ptr, ro_val = csr_of([n.ro for n in leaves])
    order = np.argsort(-loads, kind="stable")
    return _greedy_merge(order, loads, rq_ptr, rq_val, ro_ptr, ro_val, n_queries, n_objects, m)


@njit(cache=True)
def _greedy_merge(order, loads, rq_ptr, rq_val, ro_ptr, ro_val, n_queries, n_objects, m):
    part = np.zeros(m)
    filled = np.zeros(m, np.int64)
    q_on = np.zeros((n_queries, m), np.bool_)  # which partitions already hold each sample query
    o_on = np.zeros((n_objects, m), np.bool_)
    out = np.empty(len(loads), np.int64)
    inc = np.empty(m)
    q_held = np.empty(m, np.int64)
    o_held = np.empty(m, np.int64)
    q_n = np.zeros(n_queries, np.int64)  # how many partitions hold each: most hold none yet, skipped
    o_n = np.zeros(n_objects, np.int64)
    for i in order:
        q_held[:] = 0
        o_held[:] = 0
        for j in range(rq_ptr[i], rq_ptr[i + 1]):
            if q_n[rq_val[j]]:
                for p in range(m):
                    q_held[p] += q_on[rq_val[j], p]
        for j in range(ro_ptr[i], ro_ptr[i + 1]):
            if o_n[ro_val[j]]:
                for p in range(m):
                    o_held[p] += o_on[ro_val[j], p]
        for p in range(m):
            inc[p] = loads[i] - q_held[p] - o_held[p]
        target = -1
        for p in range(m):
            if filled[p] == 0:
                target = p
                break
        if target < 0:
            cand = 0  # least increase, then least loaded, then lowest id
            for p in range(1, m):
                if inc[p] < inc[cand] or (inc[p] == inc[cand] and part[p] < part[cand]):
                    cand = p
            after = part.copy()
            after[cand] += inc[cand]
            target = cand if balance_factor(after) <= balance_factor(part) else int(np.argmin(part))
        part[target] += inc[target]
        filled[target] += 1
        for j in range(rq_ptr[i], rq_ptr[i + 1]):
            q_n[rq_val[j]] += not q_on[rq_val[j], target]
            q_on[rq_val[j], target] = True
        for j in range(ro_ptr[i], ro_ptr[i + 1]):
            o_n[ro_val[j]] += not o_on[ro_val[j], target]
            o_on[ro_val[j], target] = True
        out[i] = target
    return out, part


# --- Algorithm 1 -----------------------------------------------------------------------------------

@dataclass
class KdtPlan:
    leaves: list
    assign: np.ndarray
    part_load: np.ndarray
    n_t: int  # phase-1 node counts
    n_s: int
    dp_parts: list | None
    sigma_splits: int


def partition_workload(s: Sample, m: int, delta: float, sigma: float, theta: int, tolerance: float,
                       min_split_objects: int, balance_loop: bool = True) -> KdtPlan:
    """Algorithm 1 on a sample; `balance_loop=False` stops after the first merge (for tests)."""
    n_t, n_s = phase1(s, delta, tolerance, theta, min_split_objects)
    leaves = n_t + n_s
    dp_parts = None
    if len(leaves) < m:  # lines 13-16
        cost = np.full((len(leaves), m + 1), INF)
        cuts: dict = {}
        for i, n in enumerate(leaves):
            cost[i, 1] = n.load
            for k in range(2, m - len(leaves) + 2):
                kids = partition_node(n, k)
                if kids is not None:
                    cuts[i, k] = kids
                    cost[i, k] = sum(c.load for c in kids)
        dp_parts = compute_number_partitions(cost, m)
        if dp_parts is not None:
            leaves = [c for i, n in enumerate(leaves) for c in (cuts[i, dp_parts[i]] if dp_parts[i] > 1 else [n])]
    splits = 0
    while True:  # lines 17-27, with a final merge when theta stops the loop
        assign, part = merge_nodes(leaves, m, s.n_objects, s.n_queries)
        if not balance_loop or m == 1 or balance_factor(part) <= sigma or len(leaves) >= theta:
            break
        for n in sorted(leaves, key=lambda n: -n.load):  # the most loaded leaf that can be cut
            if not n.splittable:
                continue
            kids = partition_node(n, 2)
            if kids is None:
                n.splittable = False
                continue
            k = leaves.index(n)
            leaves[k:k + 1] = kids
            splits += 1
            break
        else:
            break
    return KdtPlan(leaves, assign, part, len(n_t), len(n_s), dp_parts, splits)
