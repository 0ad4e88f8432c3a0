"""Algorithm 1 of SSTD (Section 4.1): a max-heap of nodes by cost; the heaviest node is split both
ways and the cheaper children kept (ties go spatial, as in the paper's `<=`), until there are
theta leaves.

`qttree_termmap`'s textual split (ADR-0019; `qttree` splits as the paper does, by
onecopy_build.OneCopyBuilder, which reuses this heap loop) = a static term -> child map fixed at fit (the paper assigns
each *object* to the child of least cost increase, mutating per-router keyword lists while
routing, and sends every query to all four textual children). Here the node's terms are assigned
greedily, heaviest first, to the child of least Eq. 2 increase; an object goes to every child
owning one of its (still live) terms, an AND query to the child of its least frequent keyword,
an OR query to the children of all its keywords (PS2Stream's text routing). Every matching pair
meets, and the router is plain data. Objects may be stored more than once; each child's E
counts them.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from strategies.sstd.qttree.cost import CostModel, term_children
from strategies.sstd.qttree.route import ALL_LIVE, LEAF, SPATIAL, TEXT, TRACKED, _fallback_child
from strategies.sstd.qttree.stats import QueryStats, StatsCell

# --- build kernels --------------------------------------------------------------------------------


@njit(cache=True)
def _live_pairs(objs, masks, o_off, o_val):
    """(term, local object) of every live term of the node's objects."""
    n = 0
    for i in range(len(objs)):
        o = objs[i]
        for j in range(o_off[o], o_off[o + 1]):
            p = j - o_off[o]
            if p >= TRACKED or (masks[i] >> p) & 1:
                n += 1
    terms = np.empty(n, np.int64)
    local = np.empty(n, np.int64)
    n = 0
    for i in range(len(objs)):
        o = objs[i]
        for j in range(o_off[o], o_off[o + 1]):
            p = j - o_off[o]
            if p >= TRACKED or (masks[i] >> p) & 1:
                terms[n] = o_val[j]
                local[n] = i
                n += 1
    return terms, local


@njit(cache=True)
def _child_masks(objs, masks, o_off, o_val, term_map, node):
    """Live-term masks of the node's objects in each textual child, and which children they reach."""
    n = len(objs)
    out = np.zeros((4, n), np.int64)
    reach = np.zeros((4, n), np.bool_)
    for i in range(n):
        o = objs[i]
        lo, hi = o_off[o], o_off[o + 1]
        if hi == lo:
            reach[0, i] = True  # a term-less object is stored once, in the first child
            out[0, i] = masks[i]
            continue
        for j in range(lo, hi):
            p = j - lo
            if p >= TRACKED or (masks[i] >> p) & 1:
                w = o_val[j]
                c = term_map[w] if w < len(term_map) else _fallback_child(w, node)
                reach[c, i] = True
                if p < TRACKED:
                    out[c, i] |= 1 << p
    return out, reach


# --- construction (Algorithm 1) -------------------------------------------------------------------


@dataclass
class _Node:
    cell: StatsCell
    constrained: bool  # has a textual ancestor (H < 1 possible)
    objs: np.ndarray  # object positions reaching the node
    masks: np.ndarray  # their live-term masks
    ents: np.ndarray  # routing entries reaching the node
    cost: float = 0.0
    depth: int = 0
    kind: int = LEAF
    first_child: int = -1
    term_map: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))


class QTTreeBuilder:
    """Algorithm 1 over a sample; `split_kinds` restricts the splits (the ablations)."""

    def __init__(self, stats: QueryStats, model: CostModel, split_kinds: tuple[str, ...]):
        self.stats, self.model, self.split_kinds = stats, model, split_kinds
        self.nodes: list[_Node] = []
        self.cost_trace: list[float] = []  # total leaf cost after each split (for tests/plots)

    def _make(self, cell, constrained, objs, masks, ents, depth) -> _Node:
        node = _Node(cell, constrained, objs, masks, ents, depth=depth)
        node.cost = self.model.cost(cell, len(objs), len(ents), constrained)
        return node

    def spatial_children(self, node: _Node) -> list[_Node]:
        st = self.stats
        cells = st.children(node.cell.key)
        mx, my = node.cell.mid
        quad = (st.oy[node.objs] >= my) * 2 + (st.ox[node.objs] >= mx)
        eq = st.e_q[node.ents]
        ex = (st.rect[eq, 0] < mx, st.rect[eq, 2] >= mx)
        ey = (st.rect[eq, 1] < my, st.rect[eq, 3] >= my)
        out = []
        for c in range(4):
            sel = quad == c
            out.append(self._make(cells[c], node.constrained, node.objs[sel], node.masks[sel],
                                  node.ents[ex[c & 1] & ey[c >> 1]], node.depth + 1))
        return out

    def text_children(self, node: _Node, node_id: int) -> tuple[list[_Node], np.ndarray]:
        st = self.stats
        terms, local = _live_pairs(node.objs, node.masks, st.o_off, st.o_val)
        e_terms = st.e_t[node.ents]
        uniq, child = term_children(terms, local, e_terms, len(node.objs), node.cell.n_entries, self.model.poly(node.cell))
        length = int(uniq[-1]) + 1 if len(uniq) else 0
        w_all = np.arange(length, dtype=np.int64)
        term_map = ((((w_all * 2654435761) ^ (node_id * 40503)) & 0xFFFFFFFF) >> 30).astype(np.int8)
        term_map[uniq] = child
        masks, reach = _child_masks(node.objs, node.masks, st.o_off, st.o_val, term_map, node_id)
        e_child = term_map[e_terms] if length else np.zeros(0, np.int8)
        out = [self._make(node.cell, True, node.objs[reach[c]], masks[c][reach[c]], node.ents[e_child == c], node.depth + 1)
               for c in range(4)]
        return out, term_map

    def choose(self, node: _Node, options: list[tuple]) -> tuple:
        """Algorithm 1, line 8: the option whose children cost least; ties go spatial (listed
        first). A subclass may choose otherwise (e.g. FG's Eq. 3 heuristic, or tests)."""
        return min(options, key=lambda o: sum(c.cost for c in o[1]))

    def build(self, n_leaves: int) -> list[_Node]:
        st = self.stats
        root = self._make(st.cell((0, 0, 0)), False, np.arange(len(st.objs)), np.full(len(st.objs), ALL_LIVE, np.int64),
                          np.arange(len(st.e_q)), 0)
        self.nodes = [root]
        heap = [(-root.cost, 0)]
        leaves = 1
        total = root.cost
        self.cost_trace = [total]
        while leaves < n_leaves:
            _, nid = heapq.heappop(heap)
            node = self.nodes[nid]
            options = []
            if "spatial" in self.split_kinds:
                options.append((SPATIAL, self.spatial_children(node), None))
            if "text" in self.split_kinds:
                options.append((TEXT, *self.text_children(node, nid)))
            kind, children, term_map = self.choose(node, options)
            node.kind, node.first_child = kind, len(self.nodes)
            if term_map is not None:
                node.term_map = term_map
            for c in children:
                heapq.heappush(heap, (-c.cost, len(self.nodes)))
                self.nodes.append(c)
            node.objs = node.masks = node.ents = None  # type: ignore[assignment]  # free memory
            leaves += 3
            total += sum(c.cost for c in children) - node.cost
            self.cost_trace.append(total)
        return self.nodes
