"""Algorithm 1 with the paper's textual partitioning (SSTD Sec. 4.1.2, l.188): a textual split
assigns the node's objects one at a time, in stream order, to the child of least Eq. 2 increment
(onecopy.split_objects), so each object is in exactly one child; queries reach every textual child
(l.225), so every child keeps all the node's queries. A node's cost is paper_cost's Eq. 2 with H
from its objects' keywords. Then the flattened tree becomes a `OneCopyRouter` whose textual
children start from the keyword lists the build gave them (l.214: "SSTD stores the keyword list
for nodes whose parent node is textually partitioned").
"""

from __future__ import annotations

import numpy as np

from harness.core.allocate import karmarkar_karp
from harness.core.events import csr_take
from strategies.sstd.qttree.builder import QTTreeBuilder, _Node
from strategies.sstd.qttree.onecopy import split_objects
from strategies.sstd.qttree.onecopy_router import OneCopyRouter, TextLists
from strategies.sstd.qttree.paper_cost import PaperCostModel
from strategies.sstd.qttree.route import LEAF, TEXT


def keyword_index(terms: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each keyword's index into the sorted M `terms`, -1 for keywords without mass there."""
    values = np.asarray(values, np.int64)
    pos = np.searchsorted(terms, values)
    ok = pos < len(terms)
    ok[ok] = terms[pos[ok]] == values[ok]
    return np.where(ok, pos, -1).astype(np.int64)


def split_by_increment(params: tuple, o_off: np.ndarray, o_val: np.ndarray) -> np.ndarray:
    """The child (0-3) of each object (CSR, in stream order) under a textual split of a node whose
    cell has `params` (c0, ps, pk, M terms, M_srq, M_skq): Algorithm 1's textualPartitioning."""
    c0, ps, pk, terms, ms, mk = params
    child, _ = split_objects(np.asarray(o_off, np.int64), keyword_index(terms, o_val), np.asarray(ms, np.float64),
                             np.asarray(mk, np.float64), float(c0), np.asarray(ps, np.float64)[None, :],
                             np.asarray(pk, np.float64)[None, :])
    return child


class OneCopyBuilder(QTTreeBuilder):
    """Algorithm 1 over J with the paper's cost model and textual partitioning."""

    model: PaperCostModel

    def _make(self, cell, constrained, objs, masks, ents, depth) -> _Node:
        node = _Node(cell, constrained, objs, masks, ents, depth=depth)
        _, vals = csr_take(self.stats.o_off, self.stats.o_val, objs)
        node.kw = np.unique(vals.astype(np.int64))  # P.phi (l.136)
        node.n_obj = len(objs)
        node.cost = self.model.cost(cell, len(objs), node.kw)
        return node

    def text_children(self, node: _Node, node_id: int) -> tuple[list[_Node], None]:
        off, vals = csr_take(self.stats.o_off, self.stats.o_val, node.objs)
        child = split_by_increment(self.model.cell_terms(node.cell), off, vals)
        out = [self._make(node.cell, True, node.objs[child == c], node.masks[child == c], node.ents, node.depth + 1)
               for c in range(4)]
        return out, None


def assemble_onecopy(n_workers, kind, first_child, mid_x, mid_y, regions, params: dict, lists: dict, leaf_worker,
                     leaf_cost) -> OneCopyRouter:
    """A one-copy router from a node table (children contiguous, root first), per textual node its
    cell's Eq. 2 terms and M (`params`), per textual child its keyword list and object count."""
    kind = np.asarray(kind, np.int64)
    first_child = np.asarray(first_child, np.int64)
    node_leaf = np.full(len(kind), -1, np.int64)
    leaves = np.flatnonzero(kind == LEAF)
    node_leaf[leaves] = np.arange(len(leaves))
    return OneCopyRouter(n_workers, kind, first_child, mid_x, mid_y, node_leaf, leaf_worker, regions, leaf_cost,
                         TextLists(first_child, params, lists))


def to_onecopy_router(nodes: list[_Node], n_workers: int, model: PaperCostModel) -> OneCopyRouter:
    """Flatten a built tree and allocate its leaves by Karmarkar-Karp on their Eq. 2 costs."""
    kind = np.array([nd.kind for nd in nodes], np.int64)
    leaves = np.flatnonzero(kind == LEAF)
    leaf_cost = np.array([nodes[i].cost for i in leaves], np.float64)
    params = {v: model.cell_terms(nodes[v].cell) for v in np.flatnonzero(kind == TEXT).tolist()}
    lists = {c: (nodes[c].kw, nodes[c].n_obj) for v in params for c in range(nodes[v].first_child, nodes[v].first_child + 4)}
    return assemble_onecopy(n_workers, kind, [nd.first_child for nd in nodes], [nd.cell.mid[0] for nd in nodes],
                            [nd.cell.mid[1] for nd in nodes], [nd.cell.region for nd in nodes], params, lists,
                            karmarkar_karp(leaf_cost, n_workers), leaf_cost)
