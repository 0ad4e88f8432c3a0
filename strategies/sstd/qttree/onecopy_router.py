"""`OneCopyRouter`: the QT-tree routed as SSTD routes it (Sec. 4.2, l.219-230).

- Objects: a spatial node sends an object to the quadrant of its point; a textual node to the ONE
  child whose Eq. 2 workload grows least if it takes the object, under the router's own keyword
  lists, which the object then updates (l.221). Every object is stored once.
- Queries are routed by space only, to every leaf they overlap, every textual child included (l.225:
  "we do not check query keywords"); a kNN subscription (CKQ) to every worker (l.223) unless
  `ckq_routing: ball` (then like a range query on its ball's square).
- Routers: each dispatcher keeps its own keyword lists, evolved by the objects it routes (l.227);
  the engine deals events to dispatchers round-robin by seq (l.219: seq % n_dispatchers, as the
  latency model, harness/measure/latency.py). Exactness per event whatever Spark partition an
  object lands in: the driver decides every object's leaf before its epoch is dispatched
  (`observe_objects`, in seq order, per dispatcher), and `route_objects` looks the leaf up by seq.
  An object outside the decided span (a caller that routes without the hook) is decided from the
  current lists without changing them.
"""

from __future__ import annotations

import copy

import numpy as np

from harness.core.events import SNAPSHOT, Events
from strategies.base import Pairs, Router
from strategies.sstd.qttree.onecopy import EMPTY, assign_objects, hash_rehash, text_depth
from strategies.sstd.qttree.route import TEXT, _route_points_spatial, route_rects_every_child
from strategies.sstd.qttree.router import QTTreeRouter


class TextLists:
    """The textual nodes' routing data (plain arrays, per node of the flattened tree):
    per textual node its cell's M (`m_off` CSR into sorted `m_terms` with masses `m_s`, `m_k`) and
    Eq. 2's coefficients (`c0`, rows of `ps`, `pk`); per child of a textual node its keyword list
    from the fit (`base_off` CSR into sorted `base_terms`, only keywords with mass) and its
    objects, H_srq, H_skq (`base_n`, `base_hs`, `base_hk`)."""

    FIELDS = ("m_off", "m_terms", "m_s", "m_k", "c0", "ps", "pk", "base_off", "base_terms", "base_n", "base_hs",
              "base_hk")

    def __init__(self, first_child, params: dict, lists: dict):
        """`first_child` of each node; `params`: textual node -> (c0, ps, pk, M terms, M_srq,
        M_skq); `lists`: child of a textual node -> (its keywords, its object count)."""
        n_nodes = len(first_child)
        width = max([len(p[1]) for p in params.values()] + [len(p[2]) for p in params.values()] + [1])
        self.c0 = np.zeros(n_nodes)
        self.ps = np.zeros((n_nodes, width))
        self.pk = np.zeros((n_nodes, width))
        m_len = np.zeros(n_nodes, np.int64)
        m_parts: list = [[], [], []]
        for v in range(n_nodes):
            if v in params:
                c0, ps, pk, terms, ms, mk = params[v]
                self.c0[v] = c0
                self.ps[v, :len(ps)] = ps
                self.pk[v, :len(pk)] = pk
                m_len[v] = len(terms)
                for part, a in zip(m_parts, (terms, ms, mk)):
                    part.append(np.asarray(a))
        self.m_off = np.concatenate([[0], np.cumsum(m_len)]).astype(np.int64)
        self.m_terms = np.concatenate(m_parts[0]).astype(np.int64) if m_parts[0] else np.zeros(0, np.int64)
        self.m_s = np.concatenate(m_parts[1]).astype(np.float64) if m_parts[1] else np.zeros(0)
        self.m_k = np.concatenate(m_parts[2]).astype(np.float64) if m_parts[2] else np.zeros(0)
        self.base_n = np.zeros(n_nodes)
        self.base_hs = np.zeros(n_nodes)
        self.base_hk = np.zeros(n_nodes)
        b_len = np.zeros(n_nodes, np.int64)
        b_parts = []
        parent = {c: v for v in params for c in range(int(first_child[v]), int(first_child[v]) + 4)}
        for v in range(n_nodes):
            if v not in lists:
                continue
            terms, n_obj = lists[v]
            p = parent.get(v, -1)
            lo, hi = (self.m_off[p], self.m_off[p + 1]) if p >= 0 else (0, 0)
            mt = self.m_terms[lo:hi]
            terms = np.unique(np.asarray(terms, np.int64))
            pos = np.searchsorted(mt, terms)
            hit = pos < len(mt)
            hit[hit] = mt[pos[hit]] == terms[hit]
            b_parts.append(terms[hit])
            b_len[v] = int(hit.sum())
            self.base_n[v] = float(n_obj)
            self.base_hs[v] = float(self.m_s[lo:hi][pos[hit]].sum())
            self.base_hk[v] = float(self.m_k[lo:hi][pos[hit]].sum())
        self.base_off = np.concatenate([[0], np.cumsum(b_len)]).astype(np.int64)
        self.base_terms = np.concatenate(b_parts).astype(np.int64) if b_parts else np.zeros(0, np.int64)

    def params_of(self, v: int) -> tuple:
        lo, hi = self.m_off[v], self.m_off[v + 1]
        return float(self.c0[v]), self.ps[v].copy(), self.pk[v].copy(), self.m_terms[lo:hi].copy(), \
            self.m_s[lo:hi].copy(), self.m_k[lo:hi].copy()

    def base_of(self, v: int) -> np.ndarray:
        return self.base_terms[self.base_off[v]:self.base_off[v + 1]]


class OneCopyRouter(QTTreeRouter):
    """The flattened QT-tree with SSTD's one-copy textual routing (module docstring). Shares the
    tree encoding, migration units (leaves) and kNN rule with `QTTreeRouter`; has no term maps."""

    knn_to_all = True  # SSTD: a CKQ goes to every worker (l.223); the strategy may set ball

    def __init__(self, n_workers, kind, first_child, mid_x, mid_y, node_leaf, leaf_worker, regions, leaf_cost,
                 text: TextLists):
        n = len(kind)
        super().__init__(n_workers, kind, first_child, mid_x, mid_y, np.zeros(n, np.int64), np.zeros(n, np.int64),
                         np.zeros(0, np.int32), np.arange(n, dtype=np.int64), np.zeros(n, np.bool_), node_leaf,
                         leaf_worker, regions, leaf_cost)
        self.text = text
        self.max_text_depth = int(text_depth(self.kind.astype(np.int64), self.first_child))
        self.n_dispatchers = 0  # the dispatchers' state is made at the first observe_objects
        self.span_lo = 0
        self.span_leaf = np.zeros(0, np.int32)  # the leaf of each object seq from span_lo on (-1: none)

    # -- the dispatchers' keyword lists ------------------------------------------------------------

    def _init_state(self, n_dispatchers: int) -> None:
        n = len(self.kind)
        t = self.text
        self.n_dispatchers = int(n_dispatchers)
        self.d_n = np.tile(t.base_n, (n_dispatchers, 1))
        self.d_hs = np.tile(t.base_hs, (n_dispatchers, 1))
        self.d_hk = np.tile(t.base_hk, (n_dispatchers, 1))
        self.table = np.full(1024, EMPTY, np.int64)
        self.used = np.zeros(1, np.int64)
        assert n < (1 << 31) // max(n_dispatchers, 1)

    def _assign(self, ev: Events, rows: np.ndarray) -> np.ndarray:
        """The leaf of each object row (rows in seq order), updating the dispatchers' lists."""
        seq = ev.seq[rows].astype(np.int64)
        disp = seq % self.n_dispatchers
        bound = int((ev.offsets[rows + 1] - ev.offsets[rows]).sum()) * max(self.max_text_depth, 1)
        # at most every (dispatcher, textual child, keyword with mass at its parent) key
        t = self.text
        m_len = np.diff(t.m_off)[self.kind == TEXT]
        most = self.n_dispatchers * 4 * int(m_len.sum())
        need = 2 * min(int(self.used[0]) + bound, most) + 2
        if need > len(self.table):
            cap = 1 << int(need).bit_length()
            self.table = hash_rehash(self.table, cap)
        return assign_objects(rows, disp, ev.x, ev.y, ev.offsets, ev.values, self.kind.astype(np.int64),
                              self.first_child, self.mid_x, self.mid_y, self.node_leaf, t.m_off, t.m_terms, t.m_s,
                              t.m_k, t.c0, t.ps, t.pk, t.base_off, t.base_terms, self.d_n, self.d_hs, self.d_hk,
                              self.table, self.used, np.int64(len(self.kind)))

    def observe_objects(self, ev: Events, rows: np.ndarray, n_dispatchers: int) -> None:
        """Decide the leaf of each of an epoch's objects (`rows` in seq order) as its dispatcher
        (seq % n_dispatchers) routes it, its keyword lists evolving in seq order (l.221, l.227)."""
        rows = np.asarray(rows, np.int64)
        if not hasattr(self, "d_n"):
            self._init_state(max(int(n_dispatchers), 1))
        elif self.n_dispatchers != max(int(n_dispatchers), 1):
            raise ValueError(f"observe_objects: n_dispatchers={n_dispatchers} after {self.n_dispatchers}; "
                             "a run keeps its dispatchers")
        if not self.has_text or len(rows) == 0:
            return
        self.decided(ev, rows, self._assign(ev, rows))

    def decided(self, ev: Events, rows: np.ndarray, leaves: np.ndarray, keep: bool = True) -> None:
        """Record `leaves` as the decided leaves of the object `rows`, besides the earlier decisions
        (`keep`) or instead of them. Every decision is kept: a worker re-routes the objects it
        stores to learn where their copies went (the terms family's counting once,
        harness/families/terms/index.py), so an object routes by its own decision for as long
        as it is stored. The harness's bookkeeping (the dispatchers know where they sent an
        object), so not counted as dispatcher memory (`size_bytes`)."""
        rows = np.asarray(rows, np.int64)
        if len(rows) == 0:
            if not keep:
                self.span_lo, self.span_leaf = 0, np.zeros(0, np.int32)
            return
        seq = ev.seq[rows].astype(np.int64)
        lo, hi = int(seq.min()), int(seq.max()) + 1
        if keep and len(self.span_leaf):
            lo, hi = min(lo, self.span_lo), max(hi, self.span_lo + len(self.span_leaf))
        span = np.full(hi - lo, -1, np.int32)
        if keep and len(self.span_leaf):
            span[self.span_lo - lo:self.span_lo - lo + len(self.span_leaf)] = self.span_leaf
        span[seq - lo] = np.asarray(leaves, np.int32)
        self.span_lo, self.span_leaf = lo, span

    def size_bytes(self) -> int:
        """Dispatcher memory: the router's arrays but the decided leaves (`decided`)."""
        return super().size_bytes() - int(self.span_leaf.nbytes)

    def leaves_of(self, ev: Events, rows: np.ndarray) -> np.ndarray:
        """The leaf of each object row: decided at observe_objects, else from the current lists
        (unchanged; in seq order)."""
        rows = np.asarray(rows, np.int64)
        if not self.has_text:
            return self.node_leaf[self._spatial_nodes(ev, rows)]
        pos = ev.seq[rows].astype(np.int64) - self.span_lo
        inside = (pos >= 0) & (pos < len(self.span_leaf))
        out = np.full(len(rows), -1, np.int64)
        out[inside] = self.span_leaf[pos[inside]]
        miss = np.flatnonzero(out < 0)
        if len(miss):
            trial = copy.copy(self)
            if not hasattr(self, "d_n"):
                trial._init_state(1)
            else:
                for a in ("d_n", "d_hs", "d_hk", "table", "used"):
                    setattr(trial, a, getattr(self, a).copy())
            order = miss[np.argsort(ev.seq[rows[miss]], kind="stable")]
            out[order] = trial._assign(ev, rows[order])
        return out

    def _spatial_nodes(self, ev: Events, rows: np.ndarray) -> np.ndarray:
        return _route_points_spatial(rows, ev.x, ev.y, self.kind, self.first_child, self.mid_x, self.mid_y,
                                     np.arange(len(self.kind)), np.arange(len(self.kind)))

    # -- routing -----------------------------------------------------------------------------------

    def route(self, ev: Events) -> Pairs:
        return Router.route(self, ev)

    def route_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        rows = np.asarray(rows, np.int64)
        return rows, self.leaf_worker[self.leaves_of(ev, rows)]

    def route_range(self, ev: Events, rows: np.ndarray) -> Pairs:
        """Every leaf the rectangle overlaps, every textual child included (l.225)."""
        return route_rects_every_child(np.asarray(rows, np.int64), ev.xmin, ev.ymin, ev.xmax, ev.ymax, self.kind,
                                       self.first_child, self.mid_x, self.mid_y, self.node_leaf, self.leaf_worker,
                                       self.n_workers)

    def route_knn(self, ev: Events, rows: np.ndarray) -> Pairs:
        """A CKQ to every worker (l.223; `ckq_routing: ball`: like a range query on its ball's
        square). An SKQ by its rectangle, as a range query: SSTD routes SKQs by Section 6.2's two
        phases, not to every worker (l.222), and its rectangle is the extent in one phase, the
        square around the first phase's k-th distance in the second (harness/engine/rounds.py)."""
        rows = np.asarray(rows, np.int64)
        if not self.knn_to_all:
            return self.route_range(ev, rows)
        snap = ev.kind[rows] == SNAPSHOT
        ra, wa = self.to_every_worker(ev, rows[~snap])
        rs, ws = self.route_range(ev, rows[snap])
        return np.concatenate([ra, rs]), np.concatenate([wa, ws])

    # -- copies --------------------------------------------------------------------------------------

    def _copy_with(self, n_workers: int, leaf_worker: np.ndarray) -> OneCopyRouter:
        other = copy.copy(self)
        other.__dict__.pop("_leaf_router", None)
        other.n_workers = int(n_workers)
        other.leaf_worker = np.asarray(leaf_worker, np.int64)
        other.exit_worker = np.zeros(0, np.int32)
        for a in ("d_n", "d_hs", "d_hk", "table", "used", "span_leaf"):
            if hasattr(self, a):
                setattr(other, a, getattr(self, a).copy())
        return other

    def with_assignment(self, leaf_worker: np.ndarray) -> OneCopyRouter:
        """The same tree, keyword lists and decided objects, with leaves on other workers."""
        return self._copy_with(self.n_workers, leaf_worker)

    def _by_leaf(self) -> OneCopyRouter:
        r = self.__dict__.get("_leaf_router")
        if r is None:
            r = self._copy_with(self.n_leaves, np.arange(self.n_leaves))
            self.__dict__["_leaf_router"] = r
        return r

    def units(self, ev: Events, rows: np.ndarray) -> Pairs:
        """(row, leaf): an object's one leaf, a query's leaves (all of them for a CKQ to all)."""
        rows = np.asarray(rows, np.int64)
        is_obj = ev.kind[rows] == 0
        ro = rows[is_obj]
        rq, lq = self._by_leaf().route_queries(ev, rows[~is_obj])
        return np.concatenate([ro, rq]), np.concatenate([self.leaves_of(ev, ro), lq])

    def term_maps(self, length: int = 0) -> dict[int, np.ndarray]:
        raise TypeError("a one-copy QT-tree has no term maps (its textual children take objects by Eq. 2's "
                        "increment, strategies/sstd/qttree/onecopy.py)")

    def describe(self) -> dict:
        return {**super().describe(), "textual_routing": "one copy (SSTD Sec. 4.2)"}
