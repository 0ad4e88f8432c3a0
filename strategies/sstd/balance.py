"""SSTD's load balancing (Chen et al., PVLDB 2020, Section 5): PM, FM and FG.

- Detection (Definition 4): imbalance when L_max / L_min > lambda (default 6, Section 7.6), with
  L_w the sum of w's leaf loads in the last epoch, leaf load = objects * stored queries +
  objects + updates (the unit statistics' `load`): Eq. 2's CRQ term p_crq * E_{P,O} with the
  monitor's counts in place of J's probabilities, per leaf as Definition 4 says, rather than the
  worker-level |O_w| * q_w of `stats.workers` (docs/decisions.md).
- FM (Section 5.2, "workload reallocation"): Karmarkar-Karp splits all leaves (units) into m
  subsets, then the assignment subsets -> workers that moves the fewest continuous queries
  (Hungarian / Jonker-Volgenant, `scipy.optimize.linear_sum_assignment`), cost(X_j -> W_i) = sum
  over leaves P in X_j of P's queries not already on W_i.
- PM (Section 5.2): the same on the leaves of the most and the least loaded worker only, 2-way KK
  and the cheaper of the two 2x2 assignments.
- FG (Section 5.3, "QT-tree adjustment"): split the most loaded leaf (spatially if Eq. 3's
  h-hat <= epsilon, else textually), merge the least loaded group of four sibling leaves, until
  KK over the leaves meets lambda; then FM on the new tree. `fg` escalates as SSTD recommends
  (PM, then FM, then FG: "PM+FM+FG", Section 7.6); `escalate: false` gives FG alone, and `fm`
  with `escalate: true` gives PM+FM, so all of Fig. 14's plans can be run.

PM and FM only read per-unit statistics, so they work on any router with units. FG rebuilds a
QT-tree (qttree, quadtree, text_only; a split respects the strategy's split kinds) from the
epoch's objects (`stats.recent`) and the live subscriptions (`stats.live`), which stand in for
J's statistics (the paper refreshes J "periodically based on the received objects and queries").
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from harness.core.events import AND, DELETE, INSERT, OBJECT, RANGE, Events, csr_take
from strategies import registry
from strategies.adjust_base import (
    Adjuster,
    EpochStats,
    MigrationPlan,
    reassignment,
    unit_table,
)
from strategies.base import Router
from harness.core.allocate import karmarkar_karp, subset_loads
from strategies.sstd.qttree import (
    LEAF,
    SPATIAL,
    TEXT,
    TRACKED,
    QTTreeRouter,
    assemble,
    fallback_children,
    term_children,
    text_factor_poly,
)

# --- shared pieces --------------------------------------------------------------------------------


def imbalance(loads: np.ndarray) -> float:
    """L_max / L_min (Definition 4): inf when some worker has no load and another has, 1 when none has."""
    loads = np.asarray(loads, np.float64)
    if len(loads) == 0 or loads.max() <= 0.0:
        return 1.0
    hi, lo = float(loads.max()), float(loads.min())
    if hi <= 0.0:
        return 1.0
    return hi / lo if lo > 0.0 else float("inf")


def unit_stats(stats: EpochStats, n_units: int) -> tuple[np.ndarray, np.ndarray]:
    """Per unit: load, and the continuous queries it stores now (queries_end: what moving it costs)."""
    table = unit_table(stats)
    load = np.zeros(n_units)
    queries = np.zeros(n_units)
    if len(table):
        idx = table.index.to_numpy(np.int64)
        ok = (idx >= 0) & (idx < n_units)
        load[idx[ok]] = table["load"].to_numpy(np.float64)[ok]
        queries[idx[ok]] = table["queries_end"].to_numpy(np.float64)[ok]
    return load, queries


def worker_unit_loads(stats: EpochStats) -> np.ndarray:
    """Per worker, the sum of the loads of the units it held in the epoch."""
    u = stats.units
    if len(u) == 0:
        return np.zeros(stats.n_workers)
    return np.bincount(u["worker"].to_numpy(np.int64), weights=u["load"].to_numpy(np.float64),
                       minlength=stats.n_workers)[:stats.n_workers]


def leafwise_cost(queries: np.ndarray, owner: np.ndarray, m: int) -> np.ndarray:
    """cost[u, i] = queries of unit u not on worker i: all of them unless i owns u (Section 5.2's
    transfer cost, the sum of |P.Q| over the leaves that change worker)."""
    cost = np.repeat(np.asarray(queries, np.float64)[:, None], m, axis=1)
    cost[np.arange(len(owner)), owner] = 0.0
    return cost


def assign_subsets(subset: np.ndarray, cost: np.ndarray, k: int, workers: np.ndarray) -> np.ndarray:
    """The bijection subsets -> `workers` (k of each) of least summed cost[u, worker] (the
    assignment problem; scipy's linear_sum_assignment is the Jonker-Volgenant solver the paper
    cites as [9]). Returns the worker of each subset."""
    c = np.zeros((k, len(workers)))
    for i, w in enumerate(workers):
        c[:, i] = np.bincount(subset, weights=cost[:, w], minlength=k)[:k]
    rows, cols = linear_sum_assignment(c)
    out = np.empty(k, np.int64)
    out[rows] = np.asarray(workers, np.int64)[cols]
    return out


def fm_owner(load: np.ndarray, cost: np.ndarray, home: np.ndarray, m: int) -> np.ndarray:
    """FM: KK over the units with load into m subsets, then the least-cost assignment. Units
    without load do not matter to balance, so they stay home (their current worker, when it
    has one; else the worker already holding most of their queries)."""
    owner = np.where(home >= 0, home, np.argmin(cost, axis=1)).astype(np.int64)
    pos = np.flatnonzero(load > 0)
    if len(pos):
        sub = karmarkar_karp(load[pos], m)
        owner[pos] = assign_subsets(sub, cost[pos], m, np.arange(m))[sub]
    return owner


def pm_owner(load: np.ndarray, cost: np.ndarray, owner: np.ndarray, m: int) -> np.ndarray | None:
    """PM: the leaves of the most and the least loaded worker re-split by 2-way KK, and the
    cheaper of the two ways to give the halves to those workers. None if they are one worker."""
    wl = np.bincount(owner, weights=load, minlength=m)
    hot, cold = int(np.argmax(wl)), int(np.argmin(wl))
    if hot == cold:
        return None
    both = np.flatnonzero(((owner == hot) | (owner == cold)) & (load > 0))
    new = owner.copy()
    if len(both):
        sub = karmarkar_karp(load[both], 2)
        new[both] = assign_subsets(sub, cost[both], 2, np.array([hot, cold]))[sub]
    return new


def ordered(ratio: float, loads: np.ndarray) -> tuple[float, float]:
    """What 'better balanced' compares: the ratio, then L_max (the ratio is inf while a worker is idle)."""
    return ratio, float(np.max(loads, initial=0.0))


# --- the adjusters --------------------------------------------------------------------------------


class _Reallocation(Adjuster):
    """Detection and the two workload reallocations over per-unit statistics."""

    strategies = None

    @dataclass
    class Params:
        lam: float = 6.0  # lambda of Definition 4 (Section 7.6: 6)

    def detect(self, stats: EpochStats) -> tuple[bool, float]:
        """Definition 4 on L_w = sum of w's leaf loads (Eq. 2 per leaf, from the unit statistics;
        the same measure the predictions use, so a plan predicted to meet lambda stops the
        detection until the workload drifts again)."""
        r = imbalance(worker_unit_loads(stats))
        return r > float(self.params.lam), r

    def _reallocate(self, op: str, router: Router, stats: EpochStats) -> tuple[np.ndarray | None, dict]:
        """New owners by PM or FM, with the predicted balance (None if nothing would improve)."""
        owner = router.unit_owner()
        m = self.n_workers
        load, queries = unit_stats(stats, len(owner))
        cost = leafwise_cost(queries, owner, m)
        new = pm_owner(load, cost, owner, m) if op == "pm" else fm_owner(load, cost, owner, m)
        before = np.bincount(owner, weights=load, minlength=m)
        info: dict[str, Any] = {"operation": op, "ratio_units": imbalance(before)}
        if new is None:
            return None, info
        after = np.bincount(new, weights=load, minlength=m)
        info.update(ratio_predicted=imbalance(after), moved_queries_predicted=float(cost[np.arange(len(new)), new].sum()))
        if np.array_equal(new, owner) or ordered(imbalance(after), after) >= ordered(imbalance(before), before):
            return None, info
        return new, info

    def _plan(self, router: Router, new: np.ndarray, info: dict, tried: list) -> MigrationPlan | None:
        return reassignment(router, new, **info, tried=tried)

    def _escalate(self, ops: tuple[str, ...], router: Router, stats: EpochStats, ratio: float):
        """Try the reallocations in order (SSTD: PM before FM, each from the current placement);
        the first whose predicted ratio meets lambda wins, else the last one that improves
        anything. Returns ((owner, info) or None, what was tried)."""
        tried: list[dict] = []
        best = None
        for op in ops:
            new, info = self._reallocate(op, router, stats)
            info["ratio"] = ratio
            tried.append({k: info[k] for k in ("operation", "ratio_predicted") if k in info})
            if new is not None:
                best = (new, info)
                if info["ratio_predicted"] <= float(self.params.lam):
                    break
        return best, tried


class PMAdjuster(_Reallocation):
    """`pm`: SSTD's partial reallocation (Section 5.2) between the most and least loaded workers."""

    name = "pm"

    def adjust(self, router: Router, stats: EpochStats) -> MigrationPlan | None:
        hit, ratio = self.detect(stats)
        if not hit:
            return None
        best, tried = self._escalate(("pm",), router, stats, ratio)
        return None if best is None else self._plan(router, *best, tried)


class FMAdjuster(_Reallocation):
    """`fm`: SSTD's full reallocation (Section 5.2); `escalate` tries PM first (PM+FM)."""

    name = "fm"

    @dataclass
    class Params:
        lam: float = 6.0  # lambda of Definition 4 (Section 7.6: 6)
        escalate: bool = False  # PM first, FM only if PM's predicted ratio stays > lambda

    def adjust(self, router: Router, stats: EpochStats) -> MigrationPlan | None:
        hit, ratio = self.detect(stats)
        if not hit:
            return None
        best, tried = self._escalate(("pm", "fm") if self.params.escalate else ("fm",), router, stats, ratio)
        return None if best is None else self._plan(router, *best, tried)


class FGAdjuster(_Reallocation):
    """`fg`: QT-tree adjustment (Section 5.3) then FM on the new tree; by default escalating
    PM -> FM -> FG (SSTD's recommended PM+FM+FG), `escalate: false` for FG alone."""

    name = "fg"
    strategies = frozenset({"qttree", "quadtree", "text_only"})

    @dataclass
    class Params:
        lam: float = 6.0  # lambda of Definition 4 (Section 7.6: 6)
        epsilon: float = 0.5  # Eq. 3: spatial split if h-hat <= epsilon (Section 7.6: 0.5)
        escalate: bool = True  # PM, then FM, then FG (Section 5.3's summary; Section 7.6's PM+FM+FG)
        max_rounds: int = 64  # split/merge rounds at most (the paper argues termination only)

    def adjust(self, router: Router, stats: EpochStats) -> MigrationPlan | None:
        if not isinstance(router, QTTreeRouter):
            raise TypeError(f"fg adjusts QT-trees (qttree, quadtree, text_only), not {type(router).__name__}")
        hit, ratio = self.detect(stats)
        if not hit:
            return None
        tried: list[dict] = []
        fallback = None
        if self.params.escalate:
            fallback, tried = self._escalate(("pm", "fm"), router, stats, ratio)
            if fallback is not None and fallback[1]["ratio_predicted"] <= float(self.params.lam):
                return self._plan(router, *fallback, tried)
        plan = FGTree(router, stats.recent, stats.live, self.split_kinds(), self.params).adjust(self.n_workers)
        if plan is None:
            return None if fallback is None else self._plan(router, *fallback, tried)
        plan.info.update(ratio=ratio, tried=[*tried, {"operation": "fg", "ratio_predicted": plan.info["ratio_predicted"]}])
        return plan

    def split_kinds(self) -> tuple[str, ...]:
        try:
            return tuple(getattr(registry.get(self.strategy), "split_kinds", ("spatial", "text")))
        except ValueError:
            return ("spatial", "text")


# --- FG: the QT-tree adjustment -------------------------------------------------------------------


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
        self.term_map = router.term_maps(top)
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
        if tm is not None:
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
        term_maps = {new_id[v]: self.term_map[v] for v in order if self.kind[v] == TEXT}
        leaves = np.array([v for v in order if self.kind[v] == LEAF], np.int64)
        router = assemble(n_workers, kind, first_child, [self.mid[v][0] for v in order], [self.mid[v][1] for v in order],
                          [self.region[v] for v in order], term_maps, np.zeros(len(leaves), np.int64),
                          [self.load[v] for v in leaves])
        return router, leaves

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
        held = self.holdings(q_r, q_l, n, m)
        cost = q[:, None] - held
        origin = np.array([self.origin[v] for v in old_of], np.int64)
        owner = fm_owner(load, cost, origin, m)
        router = new.with_assignment(owner)
        router.leaf_cost = load
        # A leaf moves unless its new worker already stores all its subscriptions (an empty leaf:
        # unless it stays where it came from). Its source: the worker that stores them all (its
        # origin first), else -1 (gathered from several workers).
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

    def holdings(self, q_r: np.ndarray, q_l: np.ndarray, n: int, m: int) -> np.ndarray:
        """held[leaf, w]: how many of the new leaf's subscriptions worker w stores already (under
        the old router)."""
        old_r, old_l = self.router.units(self.live, self.q_rows)
        key = np.unique(old_r * m + self.router.leaf_worker[old_l])
        k_row, k_w = key // m, key % m
        start = np.searchsorted(k_row, q_r, "left")
        count = np.searchsorted(k_row, q_r, "right") - start
        idx = np.repeat(start - np.concatenate([[0], np.cumsum(count)[:-1]]), count) + np.arange(count.sum())
        held = np.bincount(np.repeat(q_l, count) * m + k_w[idx], minlength=n * m)
        return held.reshape(n, m).astype(np.float64)
