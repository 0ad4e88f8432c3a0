"""PS2Stream's hybrid partitioning: the kdt-tree (Chen et al., Section IV-B, Algorithm 1 "Partition
Workload") routed by the gridt index (Section IV-C, strategies/gridt.py).

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
- Load of a leaf: Definition 1 with every c = 1, counting the comparisons where GI2 makes them:
  sum over its gridt cells and terms of f_o(c, t) * f_q(c, t) (objects of the cell holding t times
  queries over the cell posted under t: Definition 3 per posting list), plus the objects and the
  queries the leaf receives. A text leaf receives the queries over its region whose routing term
  (least frequent keyword of a conjunct) is in its term set, and the objects there holding one of
  those queries' routing terms (gridt drops the others); its worker posts an OR query under every
  keyword and probes every term of an object, which is what the count charges. The cruder
  region-wide product n_o * n_q made space cuts always win, the per-cell product text cuts always
  (measured); this model makes the choice turn on duplication, as the paper's Figure 2 argues.
- A partition's load is the sum of its leaves' loads minus the objects and queries it already
  holds (each is sent to a worker once): what makes "minimum load increase" differ between
  partitions. While a partition is empty, leaves fill empty partitions first (L_min = 0).
- sim_t: cosine of the term-count vector of O_n and the keyword-count vector of Q_n; 1 when
  either side is empty (nothing to gain from text-partitioning).
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

from harness.core.events import INSERT, Events, csr_take, splitmix64
from harness.core import allocate
from strategies.base import FitContext, Router, Strategy
from strategies.ps2stream.gridt import GridtRouter
from strategies.load import routing_terms, sample_parts
from harness.core.grid import UniformGrid

INF = float("inf")


# --- the sample in cell coordinates ----------------------------------------------------------------

@dataclass
class Sample:
    """The fit sample: objects (cell coordinates, terms) and queries (cell ranges, keywords, the
    terms each is indexed under), all term lists as CSR over int64."""

    nx: int
    ny: int
    ox: np.ndarray
    oy: np.ndarray
    o_ptr: np.ndarray
    o_val: np.ndarray
    qx0: np.ndarray
    qx1: np.ndarray
    qy0: np.ndarray
    qy1: np.ndarray
    k_ptr: np.ndarray  # all keywords (text similarity)
    k_val: np.ndarray
    r_ptr: np.ndarray  # routing terms (load, routing)
    r_val: np.ndarray
    vocab: int

    @property
    def n_objects(self) -> int:
        return len(self.ox)

    @property
    def n_queries(self) -> int:
        return len(self.qx0)

    @classmethod
    def of(cls, ev: Events, grid: UniformGrid) -> Sample:
        objs, qs = sample_parts(ev)
        cells = grid.cells_of(ev.x[objs], ev.y[objs])
        o_ptr, o_val = csr_take(ev.offsets, ev.values, objs)
        rng = grid.cell_ranges(ev.xmin[qs], ev.ymin[qs], ev.xmax[qs], ev.ymax[qs])
        k_ptr, k_val = csr_take(ev.offsets, ev.values, qs)
        r_rows, r_terms = routing_terms(ev, qs)  # rows of qs (AND first, then OR): regroup per query
        pos = np.searchsorted(qs, r_rows)
        order = np.lexsort((r_terms, pos))
        r_ptr = np.zeros(len(qs) + 1, np.int64)
        np.cumsum(np.bincount(pos, minlength=len(qs)), out=r_ptr[1:])
        vals = [o_val, k_val]
        vocab = int(max((int(v.max()) for v in vals if len(v)), default=-1)) + 1
        return cls(grid.nx, grid.ny, cells % grid.nx, cells // grid.nx, o_ptr, o_val.astype(np.int64),
                   rng[:, 0].copy(), rng[:, 1].copy(), rng[:, 2].copy(), rng[:, 3].copy(), k_ptr,
                   k_val.astype(np.int64), r_ptr, r_terms[order].astype(np.int64), max(vocab, 1))


def gather(ptr: np.ndarray, val: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(owner, value) pairs of the CSR rows idx."""
    new_ptr, values = csr_take(ptr, val, idx)
    return np.repeat(idx, np.diff(new_ptr)), values


def in_sorted(a: np.ndarray, sorted_b: np.ndarray) -> np.ndarray:
    if len(sorted_b) == 0:
        return np.zeros(len(a), bool)
    pos = np.minimum(np.searchsorted(sorted_b, a), len(sorted_b) - 1)
    return sorted_b[pos] == a


def present(a: np.ndarray, n: int) -> np.ndarray:
    """Which of 0..n-1 occur in a (a boolean mask; ids are small, so no sort)."""
    return np.bincount(a, minlength=n)[:n] > 0


def key_counts(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys and their counts by sort plus a neighbour mask."""
    keys = np.sort(keys)
    if len(keys) == 0:
        return keys, np.zeros(0, np.int64)
    start = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    return keys[start], np.diff(np.append(start, len(keys)))


def posting_products(s: Sample, region, qo, qt, oo, ot):
    """The GI2 comparisons of a node: for every (cell, term) of the region, f_o(c, t) * f_q(c, t),
    the objects of cell c holding term t times the queries over c indexed under t. (qo, qt) are
    (query, routing term) pairs, (oo, ot) (object, term) pairs. Returns (term, cell, product)."""
    ncell = s.nx * s.ny
    x0, x1, y0, y1 = region
    ax0, ax1 = np.maximum(s.qx0[qo], x0), np.minimum(s.qx1[qo], x1)
    ay0, ay1 = np.maximum(s.qy0[qo], y0), np.minimum(s.qy1[qo], y1)
    w = ax1 - ax0 + 1
    n = np.maximum(w, 0) * np.maximum(ay1 - ay0 + 1, 0)
    rep = np.repeat(np.arange(len(qo)), n)
    off = np.arange(len(rep)) - np.repeat(np.cumsum(n) - n, n)
    cells = (ay0[rep] + off // w[rep]) * s.nx + ax0[rep] + off % w[rep]
    qkeys, qcnt = key_counts(qt[rep] * ncell + cells)
    okeys, ocnt = key_counts(ot * ncell + s.oy[oo] * s.nx + s.ox[oo])
    if len(qkeys) == 0 or len(okeys) == 0:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0)
    pos = np.minimum(np.searchsorted(qkeys, okeys), len(qkeys) - 1)
    hit = qkeys[pos] == okeys
    keys = okeys[hit]
    return keys // ncell, keys % ncell, (ocnt[hit] * qcnt[pos[hit]]).astype(np.float64)


def text_similarity(s: Sample, objs: np.ndarray, qrys: np.ndarray) -> float:
    """sim_t(O_n, Q_n): cosine of the objects' term counts and the queries' keyword counts (1 when
    either side is empty: nothing there to gain from text-partitioning)."""
    _, ot = gather(s.o_ptr, s.o_val, objs)
    _, qt = gather(s.k_ptr, s.k_val, qrys)
    if len(ot) == 0 or len(qt) == 0:
        return 1.0
    a = np.bincount(ot, minlength=s.vocab).astype(np.float64)
    b = np.bincount(qt, minlength=s.vocab).astype(np.float64)
    return float(a @ b / np.sqrt((a @ a) * (b @ b)))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of two count vectors (exposed for tests)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    den = np.sqrt((a @ a) * (b @ b))
    return 1.0 if den == 0 else float(a @ b / den)


# --- kdt-tree nodes ---------------------------------------------------------------------------------

class Node:
    """A kdt-tree node: a region of gridt cells (ix0, ix1, iy0, iy1 inclusive) and a term set (None
    = every term, a space node; else the sorted terms of a text leaf). `objs` / `qrys` are the
    sample objects inside the region and the queries overlapping it; `routed` = (objects, queries)
    the node actually receives. `base` caches the region's gathered term pairs, shared by text
    siblings (same region)."""

    __slots__ = ("_base", "_load", "_routed", "label", "objs", "qrys", "region", "s", "splittable", "terms")

    def __init__(self, s: Sample, region, objs, qrys, terms=None, label="s", routed=None, base=None):
        self.s = s
        self.region = tuple(int(v) for v in region)
        self.objs = objs
        self.qrys = qrys
        self.terms = terms
        self.label = label
        self._routed = routed
        self._load = None
        self._base = base
        self.splittable = True

    @property
    def base(self):
        """(query, routing term) and (object, term) pairs of every query / object of the region."""
        if self._base is None:
            s = self.s
            self._base = (*gather(s.r_ptr, s.r_val, self.qrys), *gather(s.o_ptr, s.o_val, self.objs))
        return self._base

    def pairs(self):
        """What the node's worker indexes and probes: (query, posting term) pairs of the queries it
        receives (all their GI2 postings: an OR query under every keyword), (object, term) pairs
        of the objects it receives (all their terms: GI2 probes each), and `used`, the routing
        terms that bring queries here (a mask over the vocabulary). A space node receives every
        query over its region; a text node those with a routing term in its set. Objects are
        received when they hold a term in `used` (gridt drops the others)."""
        s = self.s
        qo, qt, oo, ot = self.base
        if self.terms is None:
            used = present(qt, s.vocab)
        else:
            mine = np.zeros(s.vocab, bool)
            mine[self.terms] = True
            keep = mine[qt]
            used = present(qt[keep], s.vocab)
            got = present(qo[keep], s.n_queries)[qo]
            qo, qt = qo[got], qt[got]
        got = present(oo[used[ot]], s.n_objects)[oo]
        return qo, qt, oo[got], ot[got], used

    @property
    def routed(self) -> tuple[np.ndarray, np.ndarray]:
        if self._routed is None:
            qo, _, oo, _, _ = self.pairs()
            s = self.s
            self._routed = (np.flatnonzero(present(oo, s.n_objects)), np.flatnonzero(present(qo, s.n_queries)))
        return self._routed

    @property
    def ro(self) -> np.ndarray:
        return self.routed[0]

    @property
    def rq(self) -> np.ndarray:
        return self.routed[1]

    @property
    def load(self) -> float:
        """Definition 1 with c = 1: GI2 comparisons + objects received + queries received."""
        if self._load is None:
            qo, qt, oo, ot, _ = self.pairs()
            s = self.s
            if self._routed is None:
                self._routed = (np.flatnonzero(present(oo, s.n_objects)), np.flatnonzero(present(qo, s.n_queries)))
            prod = posting_products(s, self.region, qo, qt, oo, ot)[2].sum()
            self._load = float(prod) + len(self._routed[0]) + len(self._routed[1])
        return self._load

    @property
    def n_cells(self) -> int:
        x0, x1, y0, y1 = self.region
        return (x1 - x0 + 1) * (y1 - y0 + 1)

    def child(self, region, terms=None, routed=None, same_region=False) -> Node:
        if same_region:
            return Node(self.s, region, self.objs, self.qrys, terms, self.label, routed, self._base)
        s = self.s
        x0, x1, y0, y1 = region
        o, q = self.objs, self.qrys
        o = o[(s.ox[o] >= x0) & (s.ox[o] <= x1) & (s.oy[o] >= y0) & (s.oy[o] <= y1)]
        q = q[(s.qx0[q] <= x1) & (s.qx1[q] >= x0) & (s.qy0[q] <= y1) & (s.qy1[q] >= y0)]
        return Node(s, region, o, q, self.terms if terms is None else terms, self.label, routed)


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
    okeys = np.flatnonzero(present(oo * p + bin_of[ot], node.s.n_objects * p))
    qkeys = np.flatnonzero(present(qo * p + bin_of[qt], node.s.n_queries * p))
    return [
        node.child(node.region, universe[bins == k], (okeys[okeys % p == k] // p, qkeys[qkeys % p == k] // p),
                   same_region=True)
        for k in range(p)
    ]


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

def balance_factor(loads: np.ndarray) -> float:
    lo, hi = loads.min(), loads.max()
    if hi <= 0:
        return 1.0
    return INF if lo <= 0 else float(hi / lo)


def merge_nodes(leaves: list[Node], m: int, n_objects: int, n_queries: int):
    """Leaves by load descending; each to the partition whose load increases least (ties: the less
    loaded, then the lower id) unless that raises L_max / L_min, else to the least loaded one.
    While a partition is empty the balance factor is undefined, so leaves fill empty partitions
    first. Returns (partition of each leaf, partition loads)."""
    loads = np.array([n.load for n in leaves])
    part = np.zeros(m)
    filled = np.zeros(m, np.int64)
    q_on = np.zeros((n_queries, m), bool)
    o_on = np.zeros((n_objects, m), bool)
    out = np.empty(len(leaves), np.int64)
    ids = np.arange(m)
    for i in np.argsort(-loads, kind="stable"):
        n = leaves[i]
        inc = loads[i] - q_on[n.rq].sum(axis=0) - o_on[n.ro].sum(axis=0)
        if (filled == 0).any():
            target = int(np.flatnonzero(filled == 0)[0])
        else:
            cand = int(np.lexsort((ids, part, inc))[0])
            after = part.copy()
            after[cand] += inc[cand]
            target = cand if balance_factor(after) <= balance_factor(part) else int(np.argmin(part))
        part[target] += inc[target]
        filled[target] += 1
        q_on[n.rq, target] = True
        o_on[n.ro, target] = True
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


# --- gridt from the kdt-tree ------------------------------------------------------------------------

def build_gridt(grid: UniformGrid, plan: KdtPlan, n_workers: int) -> GridtRouter:
    """Cells of space leaves get the leaf's worker; cells of text leaves a term map, one per
    distinct set of covering text leaves (their term sets are disjoint: two leaves over one cell
    part at a text split)."""
    nx, ny = grid.nx, grid.ny
    cell_worker = np.full((ny, nx), -1, np.int64)
    text = [i for i, n in enumerate(plan.leaves) if n.terms is not None]
    sig = np.zeros((ny, nx), np.uint64)  # per cell: a hash of the set of text leaves covering it
    n_text = np.zeros((ny, nx), np.int64)
    for i, n in enumerate(plan.leaves):
        x0, x1, y0, y1 = n.region
        if n.terms is None:
            cell_worker[y0:y1 + 1, x0:x1 + 1] = plan.assign[i]
    if text:
        h = splitmix64(np.asarray(text, np.int64))
        with np.errstate(over="ignore"):
            for i, hv in zip(text, h):
                x0, x1, y0, y1 = plan.leaves[i].region
                sig[y0:y1 + 1, x0:x1 + 1] += hv
                n_text[y0:y1 + 1, x0:x1 + 1] += 1
    sig = sig.ravel()
    is_text = n_text.ravel() > 0
    cell_tmap = np.full(nx * ny, -1, np.int64)
    tm_terms, tm_workers, tmc, units = [], [], [], []
    if is_text.any():
        _, first, inv = np.unique(sig[is_text], return_index=True, return_inverse=True)
        cell_tmap[is_text] = inv
        text_cells = np.flatnonzero(is_text)
        regions = np.array([plan.leaves[i].region for i in text])
        for j, f in enumerate(first):
            c = text_cells[f]
            cx, cy = c % nx, c // nx
            cover = [text[k] for k in np.flatnonzero((regions[:, 0] <= cx) & (regions[:, 1] >= cx)
                                                     & (regions[:, 2] <= cy) & (regions[:, 3] >= cy))]
            terms = np.concatenate([plan.leaves[i].terms for i in cover])
            workers = np.concatenate([np.full(len(plan.leaves[i].terms), plan.assign[i]) for i in cover])
            order = np.argsort(terms, kind="stable")
            if len(terms) > 1 and np.any(np.diff(terms[order]) == 0):
                raise AssertionError("kdt: text leaves over one cell share a term")
            tm_terms.append(terms[order])
            tm_workers.append(workers[order])
            tmc.append(np.unique(plan.assign[cover]))
            units.append(sum(plan.leaves[i].load for i in cover) / max(len(terms), 1))
    cell_worker = cell_worker.ravel()
    if np.any((cell_worker < 0) & ~is_text) or np.any((cell_worker >= 0) & is_text):
        raise AssertionError("kdt: leaves must tile the grid, each cell under one space leaf or text leaves only")
    ptr = lambda parts: np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
    cat = lambda parts: np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
    leaves = [
        {"region": list(n.region), "worker": int(plan.assign[i]), "kind": "space" if n.terms is None else "text",
         "terms": None if n.terms is None else len(n.terms), "label": n.label, "load": n.load}
        for i, n in enumerate(plan.leaves)
    ]
    bf = balance_factor(plan.part_load)
    info = {
        "leaves": leaves,
        "partition_load": plan.part_load.tolist(),
        "balance_factor": bf if np.isfinite(bf) else None,
        "phase1": {"n_t": plan.n_t, "n_s": plan.n_s},
        "dp_parts": plan.dp_parts,
        "sigma_splits": plan.sigma_splits,
    }
    return GridtRouter(n_workers, grid, cell_worker, cell_tmap, ptr(tm_terms), cat(tm_terms), cat(tm_workers),
                       ptr(tmc), cat(tmc), np.asarray(units, np.float64), plan.part_load, info)


class KdtStrategy(Strategy):
    name = "kdt"
    families = frozenset({"range"})
    filters_objects = True  # gridt drops an object whose terms no query of its cell is indexed under
    unit_router = True  # gridt cells and text parts are migration units (strategies/gridt.py)

    @dataclass
    class Params:
        delta: float = 0.5  # text similarity threshold (line 5); the paper gives no value
        sigma: float = 1.5  # load balance constraint L_max / L_min (line 21), "a small constant > 1"
        theta: int = 256  # maximum number of kdt-tree leaves (line 26)
        sim_tolerance: float = 0.05  # "|alpha - sim_t(O_n, Q_n)| ~ 0" (line 9)
        min_split_objects: int = 64  # phase 1: a node with fewer sample objects is not split
        cells_per_side: int = 64  # gridt granularity (the grid baseline's and GI2's 2^6)

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        grid = UniformGrid.over(context.extent, params.cells_per_side)
        s = Sample.of(sample, grid)
        plan = partition_workload(s, n_workers, params.delta, params.sigma, params.theta, params.sim_tolerance,
                                  params.min_split_objects)
        router = build_gridt(grid, plan, n_workers)
        router.observe_inserts(sample, np.flatnonzero(sample.kind == INSERT))  # H2 from the sample's queries
        return router
