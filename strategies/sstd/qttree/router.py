"""`QTTreeRouter`: the flattened QT-tree as plain data, routing through the compiled kernels and
exposing its leaves as the migration units SSTD's load balancing moves (Section 5)."""

from __future__ import annotations

import numpy as np

from harness.core.events import AND, KNN, OBJECT, TERMS, Events
from strategies.base import Pairs, Router
from strategies.sstd.qttree.route import (
    LEAF,
    SPATIAL,
    TEXT,
    FlatTree,
    RouteRows,
    _route_points_spatial,
    fallback_children,
    route_kernel,
    route_rects_every_child,
)

LAZY_PAIRS = 1 << 24  # output buffers are sized for the worst case up to this many pairs, then grow


class QTTreeRouter(Router):
    """The flattened QT-tree: per node its kind, first child (children are contiguous), split
    midpoints (spatial) or, at the head of a run of textual nodes, its term -> exit table, and
    leaf -> worker (`leaf_worker`, the movable unit map an adjuster rewrites).

    kNN subscriptions (SSTD's CKQ): `knn_to_all` routes them to every worker, as SSTD does ("since
    each leaf node may contribute to the result of q, SSTD routes q to all workers", Sec. 4.2);
    otherwise like a CRQ on the rectangle they carry (the whole space while the ball is unbounded,
    the ball's square once feedback narrowed it), keyword routing at textual nodes included.
    Objects reach one leaf either way, so both are exact with the kNN replay merge."""

    knn_to_all = False  # set by the strategy (ckq_routing: all) and kept by with_assignment

    def __init__(self, n_workers, kind, first_child, mid_x, mid_y, exit_off, exit_len, exit_table, empty_exit,
                 leaf_run, node_leaf, leaf_worker, regions, leaf_cost):
        super().__init__(n_workers)
        self.kind = np.asarray(kind, np.int8)
        self.first_child = np.asarray(first_child, np.int64)
        self.mid_x = np.asarray(mid_x, np.float64)
        self.mid_y = np.asarray(mid_y, np.float64)
        self.exit_off = np.asarray(exit_off, np.int64)
        self.exit_len = np.asarray(exit_len, np.int64)
        self.exit_table = np.asarray(exit_table, np.int32)
        self.empty_exit = np.asarray(empty_exit, np.int64)
        self.leaf_run = np.asarray(leaf_run, np.bool_)  # run heads whose exits are all leaves
        self.node_leaf = np.asarray(node_leaf, np.int64)
        self.leaf_worker = np.asarray(leaf_worker, np.int64)
        self.regions = np.asarray(regions, np.float64).reshape(-1, 4)  # per node (for plots)
        self.leaf_cost = np.asarray(leaf_cost, np.float64)
        self.has_text = bool((self.kind == TEXT).any())
        # Derived from leaf_worker (recomputed when leaves move): the worker of each exit-table
        # entry whose exit is a leaf, so all-leaf runs route like a term -> worker map.
        exits = self.exit_table.astype(np.int64)
        self.exit_worker = np.where(self.kind[exits] == LEAF, self.leaf_worker[self.node_leaf[exits]], -1).astype(np.int32)

    def _route(self, ev: Events, objs: np.ndarray, qs: np.ndarray) -> Pairs:
        """Pairs of objects `objs` and range queries `qs`, written into one output: sized for every
        row reaching n_workers (the worst case; pages never written cost nothing, so no guess of
        the pairs per row, no resumption and no concatenation), grown only past LAZY_PAIRS."""
        objs = np.asarray(objs, np.int64)
        qs = np.asarray(qs, np.int64)
        cap = min((len(objs) + len(qs)) * self.n_workers, LAZY_PAIRS) + self.n_workers + 1
        out_r, out_w = np.empty(cap, np.int64), np.empty(cap, np.int64)
        total = 0
        tree = FlatTree(self.kind, self.first_child, self.mid_x, self.mid_y, self.exit_off, self.exit_len,
                        self.exit_table, self.empty_exit, self.leaf_run, self.exit_worker, self.node_leaf,
                        self.leaf_worker)
        jobs = ((RouteRows(objs, ev.x, ev.y, ev.x, ev.y, ev.offsets, ev.values, np.zeros(len(objs), np.bool_)), True),
                (RouteRows(qs, ev.xmin, ev.ymin, ev.xmax, ev.ymax, ev.offsets, ev.values, ev.op[qs] == AND), False))
        for batch, points in jobs:
            begin = 0
            while begin < len(batch.rows):
                begin, total = route_kernel(batch, begin, points, tree, self.n_workers, out_r, out_w, total)
                if begin < len(batch.rows):  # out of room: double the buffer
                    out_r, out_w = (np.concatenate([a[:total], np.empty(len(a), np.int64)]) for a in (out_r, out_w))
        return out_r[:total], out_w[:total]

    def route(self, ev: Events) -> Pairs:
        if not self.has_text:  # objects reach one leaf each: the spatial kernel, then the queries
            return super().route(ev)
        objs, qs = self.objects_and_queries(ev)
        fam = ev.family[qs]
        own = (fam == TERMS) | ((fam == KNN) & self.knn_to_all)  # families with rules of their own
        if not own.any():
            return self._route(ev, objs, qs)
        ro, wo = self._route(ev, objs, qs[~own])
        rk, wk = self.route_queries(ev, qs[own])
        return np.concatenate([ro, rk]), np.concatenate([wo, wk])

    def route_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        if not self.has_text:
            rows = np.asarray(rows, np.int64)
            return rows, _route_points_spatial(rows, ev.x, ev.y, self.kind, self.first_child, self.mid_x, self.mid_y,
                                               self.node_leaf, self.leaf_worker)
        return self._route(ev, rows, np.zeros(0, np.int64))

    def route_range(self, ev: Events, rows: np.ndarray) -> Pairs:
        return self._route(ev, np.zeros(0, np.int64), rows)

    def route_knn(self, ev: Events, rows: np.ndarray) -> Pairs:
        if not self.knn_to_all:
            return self.route_range(ev, rows)
        return self.to_every_worker(ev, rows)

    def route_frequent_terms(self, ev: Events, rows: np.ndarray) -> Pairs:
        """A top-k-terms query (no keywords) to every leaf its rectangle reaches, every textual child
        included: an object with any term may be stored there (SSTD: "finds out all leaf nodes
        that overlap q spatially")."""
        return route_rects_every_child(np.asarray(rows, np.int64), ev.xmin, ev.ymin, ev.xmax, ev.ymax, self.kind,
                                       self.first_child, self.mid_x, self.mid_y, self.node_leaf, self.leaf_worker,
                                       self.n_workers)

    def with_assignment(self, leaf_worker: np.ndarray) -> QTTreeRouter:
        """The same tree with leaves moved to other workers (for load adjustment)."""
        return self.same_rules(QTTreeRouter(
            self.n_workers, self.kind, self.first_child, self.mid_x, self.mid_y, self.exit_off, self.exit_len,
            self.exit_table, self.empty_exit, self.leaf_run, self.node_leaf, leaf_worker, self.regions, self.leaf_cost))

    def same_rules(self, other: QTTreeRouter) -> QTTreeRouter:
        """`other` (this tree rebuilt or reassigned) with this router's kNN rule."""
        other.knn_to_all = self.knn_to_all
        return other

    # -- migration units: the leaves (SSTD Section 5 moves leaves; strategies/sstd/balance.py) --------

    @property
    def n_leaves(self) -> int:
        return len(self.leaf_worker)

    def _by_leaf(self) -> QTTreeRouter:
        """This tree with one 'worker' per leaf: the routing kernel then emits leaf ids, so units
        and routing cannot disagree (cached; dropped when pickled)."""
        r = self.__dict__.get("_leaf_router")
        if r is None:
            r = self.same_rules(QTTreeRouter(
                self.n_leaves, self.kind, self.first_child, self.mid_x, self.mid_y, self.exit_off, self.exit_len,
                self.exit_table, self.empty_exit, self.leaf_run, self.node_leaf, np.arange(self.n_leaves),
                self.regions, self.leaf_cost))
            self.__dict__["_leaf_router"] = r
        return r

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_leaf_router"}

    def units(self, ev: Events, rows: np.ndarray) -> Pairs:
        """(row, leaf) pairs: the leaves each event reaches (objects: one per live-term exit)."""
        rows = np.asarray(rows, np.int64)
        by_leaf = self._by_leaf()
        is_obj = ev.kind[rows] == OBJECT
        ro, lo = by_leaf.route_objects(ev, rows[is_obj])
        rq, lq = by_leaf.route_queries(ev, rows[~is_obj])
        return np.concatenate([ro, rq]), np.concatenate([lo, lq])

    def unit_owner(self) -> np.ndarray:
        return self.leaf_worker.copy()

    def with_unit_owner(self, owner: np.ndarray) -> QTTreeRouter:
        owner = np.asarray(owner, np.int64)
        if owner.shape != self.leaf_worker.shape:
            raise ValueError(f"with_unit_owner: {len(owner)} owners for {self.n_leaves} leaves")
        return self.with_assignment(owner)

    def parents(self) -> np.ndarray:
        """Parent of each node (-1 for the root and for nodes no internal node points to)."""
        parent = np.full(len(self.kind), -1, np.int64)
        for v in np.flatnonzero(self.kind != LEAF):
            parent[self.first_child[v]:self.first_child[v] + 4] = v
        return parent

    def term_maps(self, length: int = 0) -> dict[int, np.ndarray]:
        """Per textual node, a term -> child map (int8) over ids [0, max(length, its run's table
        length)) that routes exactly as the compiled exit tables do: the child on each tabled
        term's path, the fallback hash of (term, this node id) elsewhere. With `assemble` this
        rebuilds the tree (FG's split and merge), even after node ids change, for every term id
        below `length`."""
        parent = self.parents()
        is_text = self.kind == TEXT
        out: dict[int, np.ndarray] = {}
        for h in np.flatnonzero(is_text & ~((parent >= 0) & is_text[np.maximum(parent, 0)])):
            run = [int(h)]
            for u in run:  # grows while iterating
                run.extend(c for c in range(self.first_child[u], self.first_child[u] + 4) if is_text[c])
            n_tab = int(self.exit_len[h])
            w_all = np.arange(max(int(length), n_tab), dtype=np.int64)
            for v in run:
                out[v] = fallback_children(w_all, v)
            cur = self.exit_table[self.exit_off[h]:self.exit_off[h] + n_tab].astype(np.int64)
            w = np.arange(n_tab, dtype=np.int64)
            while True:  # climb every tabled term's path from its exit to the head, one level a step
                act = cur != h
                if not act.any():
                    break
                cu, wu = cur[act], w[act]
                p = parent[cu]
                for v in np.unique(p):
                    sel = p == v
                    out[int(v)][wu[sel]] = cu[sel] - self.first_child[v]
                cur[act] = p
        return out

    def describe(self) -> dict:
        leaves = np.flatnonzero(self.kind == LEAF)
        return {
            **super().describe(),
            "splits": {"spatial": int((self.kind == SPATIAL).sum()), "text": int((self.kind == TEXT).sum())},
            "leaves": [
                {"leaf": int(self.node_leaf[i]), "worker": int(self.leaf_worker[self.node_leaf[i]]),
                 "region": self.regions[i].tolist(), "cost": float(self.leaf_cost[self.node_leaf[i]])}
                for i in leaves
            ],
        }
