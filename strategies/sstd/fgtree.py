"""FG, SSTD's QT-tree adjustment (Chen et al., PVLDB 2020, Section 5.3): split the most loaded leaf
(spatially if Eq. 3's h-hat <= epsilon, else textually), merge the least loaded group of four
sibling leaves, until KK over the leaves meets lambda; then FM on the new tree.

The tree is rebuilt (qttree, quadtree, text_only, qttree_termmap; a split respects the strategy's
split kinds) from the epoch's objects (`stats.recent`) and the live subscriptions (`stats.live`),
which stand in for J's statistics (the paper refreshes J "periodically based on the received
objects and queries").

A one-copy tree (qttree and its ablations, strategies/sstd/qttree/onecopy_router.py) splits a leaf
textually as Algorithm 1 does (sstd.txt l.188): the leaf's objects, in seq order, each to the child
of least Eq. 2 increment, with Eq. 2's terms and M from the epoch's snapshot queries and the live
subscriptions reaching the leaf (`_region_params`); every query and update reaches all four
children (l.225). The new router's keyword lists are synchronised (l.229): a textual child that
existed keeps the union of every dispatcher's list and all the objects they gave it; a new one
starts from the objects the split gave it. A term-map tree (qttree_termmap) splits by its term map.
"""

from __future__ import annotations

import heapq

import numpy as np

from harness.core.allocate import karmarkar_karp, subset_loads
from harness.core.events import AND, DELETE, INSERT, KNN, OBJECT, OR, RANGE, SNAPSHOT, TERMS, Events, csr_take
from strategies.adjust_base import MigrationPlan
from strategies.sstd.qttree.assemble import assemble
from strategies.sstd.qttree.cost import term_children, text_factor_poly
from strategies.sstd.qttree.onecopy_build import assemble_onecopy, split_by_increment
from strategies.sstd.qttree.onecopy_router import OneCopyRouter
from strategies.sstd.qttree.paper_cost import TEXT_TYPES, eq1_poly
from strategies.sstd.qttree.stats import TYPES
from strategies.sstd.qttree.route import LEAF, SPATIAL, TEXT, TRACKED, fallback_children
from strategies.sstd.qttree.router import QTTreeRouter
from strategies.sstd.reallocation import fm_owner, imbalance


def _entries(ev: Events, rows: np.ndarray, every_term: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(local row, term, position) of the terms a router follows: all of an object's or OR
    query's terms, the last (least frequent) one of an AND query's (the routing kernel's rule)."""
    off, vals = csr_take(ev.offsets, ev.values, rows)
    n = np.diff(off)
    local = np.repeat(np.arange(len(rows), dtype=np.int64), n)
    pos = np.arange(len(vals), dtype=np.int64) - off[local]
    keep = every_term[local] | (pos == n[local] - 1)
    return local[keep], vals[keep].astype(np.int64), pos[keep]


class FGTree:
    """A mutable copy of a QT-tree for Section 5.3's split/merge loop.

    Per leaf it keeps the rows that reach it: the epoch's objects and updates (rows of `recent`)
    and the live subscriptions (rows of `live`), obtained once from `router.units` and then
    divided by the same comparisons the routing kernel makes (quadrants; a term's path through
    the textual nodes), so a leaf's load = objects * queries + objects + updates, the monitor's
    formula, is known for leaves that do not exist yet. New nodes are appended; `to_router`
    flattens the reachable ones.
    """

    def __init__(self, router: QTTreeRouter, recent: Events, live: Events, split_kinds, params):
        self.router, self.recent, self.live, self.params = router, recent, live, params
        self.split_kinds = tuple(split_kinds)
        self.obj_rows = np.flatnonzero(recent.kind == OBJECT)
        self.upd_rows = np.flatnonzero(((recent.kind == INSERT) | (recent.kind == DELETE)) & (recent.family == RANGE))
        self.q_rows = np.flatnonzero(live.family == RANGE)
        top = max(int(recent.values.max(initial=-1)), int(live.values.max(initial=-1))) + 1
        self.n_terms = top  # every term map covers [0, n_terms): stored subscriptions keep their paths
        self.kind = [int(k) for k in router.kind]
        self.first_child = [int(c) for c in router.first_child]
        self.parent = [int(p) for p in router.parents()]
        self.mid = [(float(x), float(y)) for x, y in zip(router.mid_x, router.mid_y)]
        self.region = [tuple(float(v) for v in r) for r in router.regions]
        self.one_copy = isinstance(router, OneCopyRouter)
        self.term_map = {} if self.one_copy else router.term_maps(top)
        self.text_params: dict[int, tuple] = {}  # one copy: per textual node, Eq. 2's terms and M
        self.text_lists: dict[int, tuple] = {}  # one copy: per textual child, (keywords, objects)
        if self.one_copy:
            self._synchronised_lists(router)
        self.extent = self.region[0]
        leaf_node = np.flatnonzero(router.kind == LEAF)
        self.origin = [-1] * len(self.kind)  # the one worker a node's subscriptions are on (-1: several)
        for leaf, v in enumerate(leaf_node):
            self.origin[v] = int(router.leaf_worker[leaf])
        self.items: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        parts = [self._group(router.units(ev, rows), len(leaf_node))
                 for ev, rows in ((recent, self.obj_rows), (live, self.q_rows), (recent, self.upd_rows))]
        for leaf, v in enumerate(leaf_node):
            self.items[int(v)] = (parts[0][leaf], parts[1][leaf], parts[2][leaf])
        self.load = {v: self._load(it) for v, it in self.items.items()}
        # Global query statistics for Eq. 3 and the textual split (J refreshed from the live set).
        self.live_rect = np.stack([live.xmin, live.ymin, live.xmax, live.ymax], 1).astype(np.float64)
        self.recent_rect = np.stack([recent.xmin, recent.ymin, recent.xmax, recent.ymax], 1).astype(np.float64)
        self.q_rect = self.live_rect[self.q_rows]
        e_local, _, _ = _entries(live, self.q_rows, live.op[self.q_rows] != AND)
        self.q_entries = np.bincount(e_local, minlength=len(self.q_rows))  # routing keywords per query
        # Pr(l), l = routing keywords of a query (Eq. 1, global as in the fit); no queries: l = 1
        pr_l = np.bincount(self.q_entries) / len(self.q_rows) if len(self.q_rows) else np.array([0.0, 1.0])
        self.coef = text_factor_poly(pr_l)
        self.splits = {"spatial": 0, "text": 0}
        self.merges = 0

    def _synchronised_lists(self, router: OneCopyRouter) -> None:
        """The textual nodes' Eq. 2 terms, and per textual child the union of every dispatcher's
        keyword list with all the objects they sent it (SSTD synchronises the routers' QT-trees
        when it changes the tree, sstd.txt l.229)."""
        t = router.text
        n_nodes = len(router.kind)
        extra_terms = np.zeros(0, np.int64)
        extra_node = np.zeros(0, np.int64)
        if hasattr(router, "d_n"):
            keys = router.table[router.table != -1]
            extra_node = (keys >> 32) % n_nodes
            extra_terms = keys & 0xFFFFFFFF
        for v in np.flatnonzero(router.kind == TEXT).tolist():
            self.text_params[v] = t.params_of(v)
            for c in range(int(router.first_child[v]), int(router.first_child[v]) + 4):
                terms = np.union1d(t.base_of(c), extra_terms[extra_node == c])
                n = float(t.base_n[c])
                if hasattr(router, "d_n"):
                    n += float((router.d_n[:, c] - t.base_n[c]).sum())
                self.text_lists[c] = (terms, n)

    def _region_params(self, v: int) -> tuple:
        """Eq. 2's terms of leaf v's region (paper_cost.PaperCostModel.cell_terms) over FG's
        statistics: the epoch's snapshot queries and the live subscriptions, p_t = the share of
        type t's queries reaching v, Pr(t) = type t's share, M = the keywords of the SRQs (SKQs)
        reaching v, Eq. 1's Pr(l) over each type's queries."""
        parts = []
        for ev, rows in ((self.recent, np.flatnonzero(self.recent.kind == SNAPSHOT)),
                         (self.live, np.flatnonzero(self.live.kind == INSERT))):
            rows = rows[np.isin(ev.family[rows], (RANGE, KNN, TERMS))]
            if ev is self.recent:
                rows = rows[~((ev.family[rows] == TERMS) & np.isfinite(ev.step[rows]))]  # CTQ reports
            parts.append((ev, rows))
        counts = {name: 0 for name in TYPES.values()}
        reach = {name: 0 for name in TYPES.values()}
        kws = {t: [] for t in TEXT_TYPES}
        lens = {t: ([], []) for t in TEXT_TYPES}
        for ev, rows in parts:
            rect = np.stack([ev.xmin[rows], ev.ymin[rows], ev.xmax[rows], ev.ymax[rows]], 1).astype(np.float64)
            ok = self._reach(rect, v)
            for (fam, kind), name in TYPES.items():
                mine = (ev.family[rows] == fam) & (ev.kind[rows] == kind)
                counts[name] += int(mine.sum())
                reach[name] += int((mine & ok).sum())
                if name in TEXT_TYPES:
                    q = rows[mine]
                    lens[name][0].append((ev.offsets[q + 1] - ev.offsets[q]).astype(np.int64))
                    lens[name][1].append(ev.op[q] == OR)
                    for r in rows[mine & ok].tolist():
                        kws[name].append(ev.values[ev.offsets[r]:ev.offsets[r + 1]].astype(np.int64))
        total = sum(counts.values())
        pr = {t: c / total for t, c in counts.items()} if total else {}
        share = {t: reach[t] / counts[t] if counts[t] else 0.0 for t in counts}
        c0 = sum(pr.get(t, 0.0) * share[t] for t in counts if t not in TEXT_TYPES)
        polys = [eq1_poly(np.concatenate(lens[t][0]), np.concatenate(lens[t][1])) * pr.get(t, 0.0) * share[t]
                 for t in TEXT_TYPES]
        width = max(len(p) for p in polys)
        polys = [np.pad(p, (0, width - len(p))) for p in polys]
        flat = [np.concatenate(kws[t]) if kws[t] else np.zeros(0, np.int64) for t in TEXT_TYPES]
        terms = np.unique(np.concatenate(flat))
        m = [np.bincount(np.searchsorted(terms, f), minlength=len(terms)) / max(len(f), 1) for f in flat]
        return float(c0), polys[0], polys[1], terms, m[0].astype(np.float64), m[1].astype(np.float64)

    @staticmethod
    def _group(pairs, n_leaves: int) -> list[np.ndarray]:
        rows, leaf = pairs
        order = np.lexsort((rows, leaf))
        bounds = np.searchsorted(leaf[order], np.arange(n_leaves + 1))
        rows = rows[order]
        return [rows[bounds[i]:bounds[i + 1]] for i in range(n_leaves)]

    @staticmethod
    def _load(items) -> float:
        o, q, u = (float(len(a)) for a in items)
        return o * q + o + u

    # -- geometry and text, mirroring the routing kernel --

    def _reach(self, rect: np.ndarray, v: int) -> np.ndarray:
        """Which rectangles overlap node v's region as routing decides it (low side closed, high
        side open, the extent's outer edges unbounded)."""
        x0, y0, x1, y1 = self.region[v]
        ex0, ey0, ex1, ey1 = self.extent
        ok = np.ones(len(rect), bool)
        if x1 < ex1:
            ok &= rect[:, 0] < x1
        if x0 > ex0:
            ok &= rect[:, 2] >= x0
        if y1 < ey1:
            ok &= rect[:, 1] < y1
        if y0 > ey0:
            ok &= rect[:, 3] >= y0
        return ok

    @staticmethod
    def _quadrants(rect: np.ndarray, mx: float, my: float) -> np.ndarray:
        """(4, n): rectangle reaches quadrant c = 2 * north + east (the kernel's comparisons)."""
        xs = (rect[:, 0] < mx, rect[:, 2] >= mx)
        ys = (rect[:, 1] < my, rect[:, 3] >= my)
        return np.stack([xs[c & 1] & ys[c >> 1] for c in range(4)])

    def h_hat(self, v: int) -> float:
        """Eq. 3's h-hat: sum over v's four quadrants of p(quadrant) / (4 p(v)), p = share of the
        live subscriptions overlapping the cell (per type, globally normalised, so 1/4 when each
        query falls in one quadrant, 1 when each covers all four). 0 without queries."""
        rect = self.q_rect[self._reach(self.q_rect, v)]
        if len(rect) == 0:
            return 0.0
        return float(self._quadrants(rect, *self.mid[v]).sum()) / (4.0 * len(rect))

    def _text_path(self, v: int) -> list[tuple[int, int]]:
        """(textual ancestor, child index on the way to v)."""
        path = []
        while self.parent[v] >= 0:
            p = self.parent[v]
            if self.kind[p] == TEXT:
                path.append((p, v - self.first_child[p]))
            v = p
        return path

    def _child_of(self, v: int, terms: np.ndarray) -> np.ndarray:
        tm = self.term_map[v]
        out = fallback_children(terms, v)
        inside = terms < len(tm)
        out[inside] = tm[terms[inside]]
        return out.astype(np.int64)

    def _live(self, path, terms: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """A term is live at a node when every textual ancestor sent it down this path; terms past
        the tracked bitmask are live everywhere (as in the kernel)."""
        ok = np.ones(len(terms), bool)
        for p, c in path:
            ok &= self._child_of(p, terms) == c
        return ok | (pos >= TRACKED)

    def _live_entries(self, v: int, ev: Events, rows: np.ndarray, every_term: np.ndarray):
        local, terms, pos = _entries(ev, rows, every_term)
        keep = self._live(self._text_path(v), terms, pos)
        return local[keep], terms[keep]

    def _divide_text(self, v: int, ev: Events, rows: np.ndarray, every_term: np.ndarray, tm: np.ndarray) -> list[np.ndarray]:
        """Rows of a node being split textually, per child: each live followed term's child; rows
        with none take the first child (the kernel's empty exit)."""
        local, terms = self._live_entries(v, ev, rows, every_term)
        child = tm[terms].astype(np.int64)
        hit = np.zeros((4, len(rows)), bool)
        hit[child, local] = True
        hit[0] |= ~hit.any(axis=0)
        return [rows[hit[c]] for c in range(4)]

    # -- split and merge --

    def split_children(self, v: int, how: str):
        """(children items, term map or None) of splitting leaf v one way, without changing the tree."""
        obj, qry, upd = self.items[v]
        rc, lv = self.recent, self.live
        if how == "spatial":
            mx, my = self.mid[v]
            quad = (rc.y[obj] >= my) * 2 + (rc.x[obj] >= mx)
            qq = self._quadrants(self.live_rect[qry], mx, my)
            uq = self._quadrants(self.recent_rect[upd], mx, my)
            return [(obj[quad == c], qry[qq[c]], upd[uq[c]]) for c in range(4)], None
        if self.one_copy:  # Algorithm 1's textual partitioning; queries and updates reach every child
            params = self._region_params(v)
            off, vals = csr_take(rc.offsets, rc.values, obj)
            child = split_by_increment(params, off, vals)
            lists = []
            for c in range(4):
                o_off, o_vals = csr_take(rc.offsets, rc.values, obj[child == c])
                lists.append((np.unique(o_vals.astype(np.int64)), float((child == c).sum())))
            return [(obj[child == c], qry, upd) for c in range(4)], (params, lists)
        o_local, o_terms = self._live_entries(v, rc, obj, np.ones(len(obj), bool))
        _, e_terms = self._live_entries(v, lv, qry, lv.op[qry] != AND)
        n_cell = int(self.q_entries[self._reach(self.q_rect, v)].sum())
        uniq, child = term_children(o_terms, o_local, e_terms, len(obj), n_cell, self.coef)
        tm = fallback_children(np.arange(self.n_terms), len(self.kind))
        tm[uniq] = child
        parts = [self._divide_text(v, rc, obj, np.ones(len(obj), bool), tm),
                 self._divide_text(v, lv, qry, lv.op[qry] != AND, tm),
                 self._divide_text(v, rc, upd, rc.op[upd] != AND, tm)]
        return [tuple(p[c] for p in parts) for c in range(4)], tm

    def split(self, v: int) -> bool:
        """Split leaf v (Eq. 3 picks the kind; a kind that leaves one child as loaded as v yields
        to the other, and a leaf neither can divide is not split). True if split."""
        kinds = [k for k in ("spatial", "text") if k in self.split_kinds]
        if len(kinds) == 2 and self.h_hat(v) > float(self.params.epsilon):
            kinds.reverse()
        for how in kinds:
            children, tm = self.split_children(v, how)
            if max(self._load(c) for c in children) < self.load[v]:
                self._apply_split(v, how, children, tm)
                return True
        return False

    def _apply_split(self, v: int, how: str, children, tm) -> None:
        first = len(self.kind)
        x0, y0, x1, y1 = self.region[v]
        mx, my = self.mid[v]
        for c in range(4):
            if how == "spatial":
                r = ((x0, mx)[c & 1], (y0, my)[c >> 1], (mx, x1)[c & 1], (my, y1)[c >> 1])
            else:
                r = self.region[v]
            self.kind.append(LEAF)
            self.first_child.append(-1)
            self.parent.append(v)
            self.region.append(r)
            self.mid.append(((r[0] + r[2]) * 0.5, (r[1] + r[3]) * 0.5))
            self.origin.append(self.origin[v])
            self.items[first + c] = children[c]
            self.load[first + c] = self._load(children[c])
        self.kind[v] = SPATIAL if how == "spatial" else TEXT
        self.first_child[v] = first
        if tm is not None and self.one_copy:
            self.text_params[v] = tm[0]
            for c in range(4):
                self.text_lists[first + c] = tm[1][c]
        elif tm is not None:
            self.term_map[v] = tm
        del self.items[v], self.load[v]
        self.splits[how] += 1

    def merge_candidate(self, v: int) -> bool:
        """A node whose four children are all leaves (Section 5.3's merge applies only there)."""
        if v < 0 or self.kind[v] == LEAF:
            return False
        return all(self.kind[c] == LEAF for c in range(self.first_child[v], self.first_child[v] + 4))

    def merged_items(self, v: int):
        kids = [self.items[c] for c in range(self.first_child[v], self.first_child[v] + 4)]
        return tuple(np.unique(np.concatenate([k[i] for k in kids])) for i in range(3))

    def merge(self, v: int) -> None:
        kids = range(self.first_child[v], self.first_child[v] + 4)
        origins = {self.origin[c] for c in kids}
        self.items[v] = self.merged_items(v)
        self.load[v] = self._load(self.items[v])
        for c in kids:
            del self.items[c], self.load[c]
            self.parent[c] = -1
        self.origin[v] = origins.pop() if len(origins) == 1 else -1
        self.kind[v] = LEAF
        self.first_child[v] = -1
        self.term_map.pop(v, None)
        self.text_params.pop(v, None)
        for c in kids:
            self.text_lists.pop(c, None)
        self.merges += 1

    def balanced(self, m: int) -> tuple[bool, float]:
        """Section 5.3's stop test: KK over the leaves' loads into m subsets meets lambda."""
        loads = np.array(list(self.load.values()))
        r = imbalance(subset_loads(loads, karmarkar_karp(loads, m), m))
        return r <= float(self.params.lam), r

    def rebalance(self, m: int) -> int:
        """Section 5.3's loop: split the most loaded leaf, merge the least loaded candidate whose
        load is below L_max (stop when the next one is above it), until KK meets lambda. With no
        merge candidate left the loop keeps splitting. Returns the rounds run."""
        l_max = max(self.load.values())
        heap = []
        for v in range(len(self.kind)):
            if self.merge_candidate(v):
                w = self._load(self.merged_items(v))
                if w < l_max:
                    heap.append((w, v))
        heapq.heapify(heap)
        frozen: set[int] = set()
        rounds = 0
        while rounds < int(self.params.max_rounds) and not self.balanced(m)[0]:
            rounds += 1
            open_leaves = [(load, -v) for v, load in self.load.items() if v not in frozen]
            if not open_leaves:
                break
            _, v = max(open_leaves)
            v = -v
            if not self.split(v):
                frozen.add(v)
                continue
            l_max = max(self.load.values())
            while heap and not self.merge_candidate(heap[0][1]):
                heapq.heappop(heap)  # stale: a child was split or the node merged since
            if heap:
                _, u = heapq.heappop(heap)
                w = self._load(self.merged_items(u))  # its children may have changed and come back
                if w > l_max:
                    break
                self.merge(u)
                p = self.parent[u]
                if self.merge_candidate(p):
                    heapq.heappush(heap, (self._load(self.merged_items(p)), p))
        return rounds

    # -- back to a router and a plan --

    def to_router(self, n_workers: int) -> tuple[QTTreeRouter, np.ndarray]:
        """The reachable tree flattened breadth-first (children contiguous); returns the router
        (every leaf on worker 0) and the old node id of each new leaf."""
        order = [0]
        for v in order:
            if self.kind[v] != LEAF:
                order.extend(range(self.first_child[v], self.first_child[v] + 4))
        new_id = {v: i for i, v in enumerate(order)}
        kind = np.array([self.kind[v] for v in order], np.int64)
        first_child = np.array([new_id[self.first_child[v]] if self.kind[v] != LEAF else -1 for v in order], np.int64)
        leaves = np.array([v for v in order if self.kind[v] == LEAF], np.int64)
        if self.one_copy:
            params = {new_id[v]: self.text_params[v] for v in order if self.kind[v] == TEXT}
            lists = {new_id[c]: self.text_lists[c] for v in order if self.kind[v] == TEXT
                     for c in range(self.first_child[v], self.first_child[v] + 4)}
            router = assemble_onecopy(n_workers, kind, first_child, [self.mid[v][0] for v in order],
                                      [self.mid[v][1] for v in order], [self.region[v] for v in order], params, lists,
                                      np.zeros(len(leaves), np.int64), [self.load[v] for v in leaves])
            router = self.router.same_rules(router)
            router.decided(self.recent, self.obj_rows, self._object_leaves(leaves), keep=False)
            return router, leaves
        term_maps = {new_id[v]: self.term_map[v] for v in order if self.kind[v] == TEXT}
        router = assemble(n_workers, kind, first_child, [self.mid[v][0] for v in order], [self.mid[v][1] for v in order],
                          [self.region[v] for v in order], term_maps, np.zeros(len(leaves), np.int64),
                          [self.load[v] for v in leaves])
        return self.router.same_rules(router), leaves

    def _object_leaves(self, leaves: np.ndarray) -> np.ndarray:
        """The new leaf of each of the epoch's objects (`obj_rows` order), where the loop put it."""
        out = np.full(len(self.recent), -1, np.int64)
        for i, v in enumerate(leaves.tolist()):
            out[self.items[v][0]] = i
        return out[self.obj_rows]

    def adjust(self, m: int) -> MigrationPlan | None:
        """Run the loop, then FM on the new tree with loads and holdings counted by routing the
        epoch's events and the live subscriptions through it (exact, whatever the loop estimated)."""
        rounds = self.rebalance(m)
        new, old_of = self.to_router(m)
        n = new.n_leaves
        rc, lv = self.recent, self.live
        _, lo = new.units(rc, self.obj_rows)
        _, lu = new.units(rc, self.upd_rows)
        q_r, q_l = new.units(lv, self.q_rows)
        o = np.bincount(lo, minlength=n).astype(np.float64)
        q = np.bincount(q_l, minlength=n).astype(np.float64)
        load = o * q + o + np.bincount(lu, minlength=n)
        held = self.holdings(q_r, q_l, n, m, self.q_rows)
        cost = q[:, None] - held
        origin = np.array([self.origin[v] for v in old_of], np.int64)
        owner = fm_owner(load, cost, origin, m)
        router = new.with_assignment(owner)
        router.leaf_cost = load
        # A leaf moves unless its new worker already stores all its subscriptions, of every family
        # (an empty leaf: unless it stays where it came from). Its source: the worker that stores
        # them all (its origin first), else -1 (gathered from several workers). The loads above are
        # Eq. 2's CRQ term over range subscriptions; the moves count every live subscription, or a
        # kNN or frequent-terms one lands on a worker the plan does not declare (validate_plan).
        every = np.arange(len(lv), dtype=np.int64)
        a_r, a_l = new.units(lv, every)
        q = np.bincount(a_l, minlength=n).astype(np.float64)
        held = self.holdings(a_r, a_l, n, m, every)
        full = q > 0
        stays = np.where(full, held[np.arange(n), owner] >= q, origin == owner)
        single = np.where(held >= q[:, None], np.arange(m)[None, :], m).min(axis=1)
        src = np.where(full, np.where(single < m, single, -1), origin)
        src = np.where(full & (origin >= 0) & (held[np.arange(n), np.maximum(origin, 0)] >= q), origin, src)
        moved = np.flatnonzero(~stays)
        after = np.bincount(owner, weights=load, minlength=m)
        info = {"operation": "fg", "ratio_predicted": imbalance(after), "rounds": rounds,
                "splits": dict(self.splits), "merges": self.merges, "leaves": int(n),
                "moved_queries_predicted": float(cost[np.arange(n), owner].sum())}
        if len(moved) == 0 and self.splits == {"spatial": 0, "text": 0} and self.merges == 0:
            return None
        return MigrationPlan(router, moved, src[moved], owner[moved], info)

    def holdings(self, q_r: np.ndarray, q_l: np.ndarray, n: int, m: int, rows: np.ndarray) -> np.ndarray:
        """held[leaf, w]: how many of the new leaf's subscriptions (`rows` of the live ones, routed
        to leaves as (q_r, q_l)) worker w stores already (under the old router)."""
        old_r, old_l = self.router.units(self.live, rows)
        key = np.unique(old_r * m + self.router.leaf_worker[old_l])
        k_row, k_w = key // m, key % m
        start = np.searchsorted(k_row, q_r, "left")
        count = np.searchsorted(k_row, q_r, "right") - start
        idx = np.repeat(start - np.concatenate([[0], np.cumsum(count)[:-1]]), count) + np.arange(count.sum())
        held = np.bincount(np.repeat(q_l, count) * m + k_w[idx], minlength=n * m)
        return held.reshape(n, m).astype(np.float64)
