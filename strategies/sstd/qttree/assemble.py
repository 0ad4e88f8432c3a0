"""Tree assembly: a node table (children contiguous, root first) -> `QTTreeRouter`, compiling each
run of textual nodes into one term -> exit table. Used at fit (`to_router`, leaves allocated by
Karmarkar-Karp on their Eq. 2 costs) and by FG's rebuild of a split/merged tree (`assemble`).
"""

from __future__ import annotations

import numpy as np

from harness.core.allocate import karmarkar_karp
from strategies.sstd.qttree.builder import _Node
from strategies.sstd.qttree.route import LEAF, TEXT
from strategies.sstd.qttree.router import QTTreeRouter


def _compile_text_runs(kind, first_child, map_off, map_len, term_child):
    """Per textual node that starts a run (its parent is not textual): the exit of every term id
    below the run's longest map, and the exit of a term-less row (first children)."""
    n = len(kind)
    parent_text = np.zeros(n, bool)
    for v in np.flatnonzero(kind == TEXT):
        parent_text[first_child[v]:first_child[v] + 4] = True
    exit_len = np.zeros(n, np.int64)
    tables = []
    empty_exit = np.arange(n, dtype=np.int64)
    leaf_run = np.zeros(n, np.bool_)
    for v in np.flatnonzero((kind == TEXT) & ~parent_text):
        run = [v]
        for u in run:  # grows while iterating: the run's textual nodes
            run.extend(c for c in range(first_child[u], first_child[u] + 4) if kind[c] == TEXT)
        length = int(max(map_len[u] for u in run))
        leaf_run[v] = all(kind[c] == LEAF for u in run for c in range(first_child[u], first_child[u] + 4)
                          if kind[c] != TEXT)
        w = np.arange(length, dtype=np.int64)
        cur = np.full(length, v, np.int64)
        while True:
            t = kind[cur] == TEXT
            if not t.any():
                break
            cu, wu = cur[t], w[t]
            inside = wu < map_len[cu]
            ch = ((((wu * 2654435761) ^ (cu * 40503)) & 0xFFFFFFFF) >> 30).astype(np.int64)
            ch[inside] = term_child[map_off[cu[inside]] + wu[inside]]
            cur[t] = first_child[cu] + ch
        exit_len[v] = length
        tables.append((v, cur))
        e = v
        while kind[e] == TEXT:
            e = first_child[e]
        empty_exit[v] = e
    exit_off = np.zeros(n, np.int64)
    flat = []
    pos = 0
    for v, cur in tables:
        exit_off[v] = pos
        flat.append(cur.astype(np.int32))
        pos += len(cur)
    exit_table = np.concatenate(flat) if flat else np.zeros(0, np.int32)
    return exit_off, exit_len, exit_table, empty_exit, leaf_run


def assemble(n_workers, kind, first_child, mid_x, mid_y, regions, term_maps: dict[int, np.ndarray], leaf_worker,
             leaf_cost) -> QTTreeRouter:
    """A router from a node table (children contiguous, root first; leaf ids = leaves in node
    order) and per textual node a term -> child map: how FG rebuilds a split/merged tree."""
    kind = np.asarray(kind, np.int64)
    first_child = np.asarray(first_child, np.int64)
    n = len(kind)
    map_len = np.zeros(n, np.int64)
    for v, m in term_maps.items():
        map_len[v] = len(m)
    map_off = np.concatenate([[0], np.cumsum(map_len)[:-1]]).astype(np.int64)
    parts = [np.asarray(term_maps[v], np.int64) for v in range(n) if map_len[v]]
    term_child = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    node_leaf = np.full(n, -1, np.int64)
    leaves = np.flatnonzero(kind == LEAF)
    node_leaf[leaves] = np.arange(len(leaves))
    return QTTreeRouter(n_workers, kind, first_child, mid_x, mid_y,
                        *_compile_text_runs(kind, first_child, map_off, map_len, term_child), node_leaf, leaf_worker,
                        regions, leaf_cost)


def to_router(nodes: list[_Node], n_workers: int) -> QTTreeRouter:
    """Flatten a built tree (children contiguous, root first) and allocate its leaves by KK."""
    n = len(nodes)
    kind = np.array([nd.kind for nd in nodes], np.int64)
    node_leaf = np.full(n, -1, np.int64)
    leaves = np.flatnonzero(kind == LEAF)
    node_leaf[leaves] = np.arange(len(leaves))
    leaf_cost = np.array([nodes[i].cost for i in leaves], np.float64)
    map_len = np.array([len(nd.term_map) for nd in nodes], np.int64)
    map_off = np.concatenate([[0], np.cumsum(map_len)[:-1]]).astype(np.int64)
    term_child = np.concatenate([nd.term_map for nd in nodes]).astype(np.int64)
    first_child = np.array([nd.first_child for nd in nodes], np.int64)
    return QTTreeRouter(
        n_workers, kind, first_child, [nd.cell.mid[0] for nd in nodes], [nd.cell.mid[1] for nd in nodes],
        *_compile_text_runs(kind, first_child, map_off, map_len, term_child), node_leaf,
        karmarkar_karp(leaf_cost, n_workers), [nd.cell.region for nd in nodes], leaf_cost,
    )
