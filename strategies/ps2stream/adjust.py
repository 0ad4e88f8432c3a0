"""PS2Stream's dynamic load adjustment (Chen et al., Section V): adjusters `dp`, `gr`, `si`, `ra`.

Local adjustment (Section V-A). When the monitor's worker loads violate L_max / L_min <= sigma, the
most loaded worker w_o hands load to the least loaded w_l in two phases:
- Phase I (gridt routers only, whose cells can be cut by text): among the p most loaded cells
  (units) of w_o, a space cell is text-split in two and the smaller part (fewer stored
  subscriptions) moves to w_l when the split lowers the total load; a text part of w_o whose cell
  also has a part on w_l is merged into that part when merging lowers the total load.
- Phase II, if the constraint is still violated: Minimum Cost Migration (Definition 4), i.e.
  choose cells G_s of w_o with sum L_g >= tau at the least sum S_g (S_g = bytes of the cell's
  subscriptions), and move them to w_l. The four adjusters differ only here: `dp` the exact
  knapsack DP of Section V-A1, `gr` the greedy of Section V-A2 (Figure 5), `si` largest cells
  first and `ra` random cells (the comparison methods of Section VI-D).
Phase II needs only units: it works on any router with `units`/`with_unit_owner` (grid, kdt, ...).

Global adjustment (Section V-B), when `global_period` > 0: every global_period epochs the same
strategy is re-fitted on a recent sample (the objects of the last global_period epochs and the
live subscriptions); if the new partitioning lowers the estimated maximum worker load, a
`DualRouter` takes over (old router for the subscriptions alive at the switch, new router for
later ones, objects to both), and once few old subscriptions are left (or at the next periodic
check) a final plan moves them onto the new router alone.

Decisions where the paper is silent (each also in /work/drafts/ps2_adjust.md): sigma = 1.5 (the kdt
fit's constant); cell loads L_g are the monitor's per-unit Definition 3 loads; tau = the cell load
whose move equalises w_o and w_l under the monitor's Definition 1 worker load (`PairModel`); a move
that would leave w_l at or above w_o's load is not made (Phase I and II alike); Phase I models a
part with Definition 3 over the epoch's objects and the live subscriptions and cuts terms by LPT;
DP sizes are bucketed to `size_unit` bytes (rounded up), P is the greedy's bucketed cost, and the
DP refuses (SelectionRefused) when its n x P table would exceed `max_table_bytes`.
"""

from __future__ import annotations

import time

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from harness.core.events import DELETE, INSERT, OBJECT, RANGE, Events, csr_take
from strategies.adjust_base import Adjuster, EpochStats, MigrationPlan, unit_table
from harness.core import allocate
from strategies.base import Pairs, Router
from strategies.ps2stream.gridt import TERM_BITS, TERM_MASK, GridtRouter
from strategies.load import routing_terms

MEASURES = ("load", "checks", "busy_s")
EMPTY = np.zeros(0, np.int64)


class SelectionRefused(ValueError):
    """The DP would need more memory than its budget (Section VI-D: DP runs out of memory)."""


# --- cell selection for Minimum Cost Migration (Definition 4) -----------------------------------------
#
# All four take per-cell loads L_g and sizes S_g and the load tau to move, and return the chosen
# indices. Only cells with L_g > 0 are candidates (a cell without load cannot help). When tau <= 0
# nothing is needed, and when even all cells together carry less than tau no set satisfies
# Definition 4: both return an empty selection.

def _candidates(load: np.ndarray, tau: float) -> np.ndarray | None:
    load = np.asarray(load, np.float64)
    cand = np.flatnonzero(load > 0)
    if tau <= 0 or len(cand) == 0 or load[cand].sum() < tau:
        return None
    return cand


def _prefix_until(order: np.ndarray, load: np.ndarray, tau: float) -> np.ndarray:
    """The shortest prefix of `order` whose load reaches tau."""
    k = int(np.searchsorted(np.cumsum(load[order]), tau, side="left"))
    return order[: k + 1]


@njit(cache=True)
def _greedy_scan(order, load, size, tau):
    """Section V-A2: scan by relative cost; a cell that keeps the running load below tau joins GS,
    any other cell g' is a GL candidate, GS_1..GS_t + {g'}; keep the cheapest candidate. Stops when
    the GS cost alone reaches the best candidate's (no later candidate can be cheaper)."""
    acc_l = 0.0
    acc_s = 0.0
    best_s = np.inf
    best_n = -1
    best_g = -1
    gs = np.empty(len(order), np.int64)
    n_gs = 0
    for g in order:
        if acc_s >= best_s:
            break
        if acc_l + load[g] < tau:
            gs[n_gs] = g
            n_gs += 1
            acc_l += load[g]
            acc_s += size[g]
        elif acc_s + size[g] < best_s:
            best_s = acc_s + size[g]
            best_n = n_gs
            best_g = g
    if best_g < 0:
        return np.empty(0, np.int64)
    out = np.empty(best_n + 1, np.int64)
    out[:best_n] = gs[:best_n]
    out[best_n] = best_g
    return out


def select_gr(load, size, tau: float) -> np.ndarray:
    """GR (Section V-A2): cells in ascending S_g / L_g (ties by index), GS/GL candidates of Fig. 5."""
    load = np.asarray(load, np.float64)
    size = np.asarray(size, np.float64)
    cand = _candidates(load, tau)
    if cand is None:
        return EMPTY
    order = cand[np.argsort(size[cand] / load[cand], kind="stable")]
    return np.sort(_greedy_scan(order, load, size, float(tau)))


def select_si(load, size, tau: float) -> np.ndarray:
    """SI (Section VI-D): cells in descending size until the load reaches tau."""
    load = np.asarray(load, np.float64)
    cand = _candidates(load, tau)
    if cand is None:
        return EMPTY
    order = cand[np.argsort(-np.asarray(size, np.float64)[cand], kind="stable")]
    return np.sort(_prefix_until(order, load, tau))


def select_ra(load, size, tau: float, rng: np.random.Generator) -> np.ndarray:
    """RA (Section VI-D): cells in random order until the load reaches tau."""
    load = np.asarray(load, np.float64)
    cand = _candidates(load, tau)
    if cand is None:
        return EMPTY
    return np.sort(_prefix_until(cand[rng.permutation(len(cand))], load, tau))


def dp_table_bytes(n: int, p: int) -> int:
    """Memory of the DP's A(i, j) table: (n + 1) x (P + 1) float64."""
    return (n + 1) * (p + 1) * 8


def select_dp(load, size, tau: float, size_unit: float = 1.0, max_table_bytes: int = 256 << 20) -> np.ndarray:
    """DP (Section V-A1): A(i, j) = the largest load of a subset of cells 1..i of total size <= j,
    A(i, j) = A(i-1, j) if j < S_i else max(A(i-1, j), A(i-1, j - S_i) + L_i) (the paper's "j <= S_i"
    would forbid a cell that exactly fills j: read as the knapsack's "<"), for j in [0, P]; the
    answer is the smallest j with A(n, j) >= tau, recovered by back-tracking. Sizes are bucketed to
    integers, ceil(S_g / size_unit), so the result is optimal for the bucketed sizes; P is the GR
    solution's bucketed cost (an upper bound of the minimum). Raises SelectionRefused when the
    table would exceed max_table_bytes."""
    load = np.asarray(load, np.float64)
    cand = _candidates(load, tau)
    if cand is None:
        return EMPTY
    sizes = np.ceil(np.maximum(np.asarray(size, np.float64)[cand], 0.0) / float(size_unit)).astype(np.int64)
    loads = load[cand]
    n = len(cand)
    upper = int(sizes[select_gr(loads, sizes, tau)].sum())
    need = dp_table_bytes(n, upper)
    if need > max_table_bytes:
        raise SelectionRefused(
            f"dp: the knapsack table would need {n + 1} x {upper + 1} entries = {need / 2**20:.1f} MiB "
            f"({n} cells, P = {upper} size units of {size_unit:g} bytes), above the budget "
            f"max_table_bytes = {max_table_bytes / 2**20:.1f} MiB; use adjust=gr, or raise size_unit or "
            f"max_table_bytes")
    a = np.zeros((n + 1, upper + 1))
    for i in range(1, n + 1):
        s = sizes[i - 1]
        a[i] = a[i - 1]
        if s <= upper:
            np.maximum(a[i - 1, s:], a[i - 1, : upper + 1 - s] + loads[i - 1], out=a[i, s:])
    slack = 1e-12 * float(loads.sum())  # sums in another order may differ in the last bits
    reach = np.flatnonzero(a[n] >= tau - slack)
    j = int(reach[0])
    chosen = []
    for i in range(n, 0, -1):
        if a[i, j] != a[i - 1, j]:
            chosen.append(i - 1)
            j -= int(sizes[i - 1])
    return np.sort(cand[np.asarray(chosen, np.int64)]) if chosen else EMPTY


# --- the dual router of the global adjustment (Section V-B) -----------------------------------------

class DualRouter(Router):
    """Two partitionings at once: subscriptions alive at the switch (`old_qids`, sorted) are routed,
    inserted and deleted by `old`, every later one by `new`; objects go to both (deduplicated).
    Units: the new router's, then the old router's shifted by the new router's unit count, so local
    adjustment keeps working during the transition."""

    def __init__(self, old: Router, new: Router, old_qids: np.ndarray, n_old: int | None = None):
        super().__init__(new.n_workers)
        self.old = old
        self.new = new
        self.old_qids = np.unique(np.asarray(old_qids, np.int64))
        self.n_old = len(self.old_qids) if n_old is None else int(n_old)  # old subscriptions at the switch
        self.families = frozenset(old.families) & frozenset(new.families)

    def _is_old(self, ev: Events, rows: np.ndarray) -> np.ndarray:
        ids = ev.id[rows]
        pos = np.minimum(np.searchsorted(self.old_qids, ids), max(len(self.old_qids) - 1, 0))
        return (self.old_qids[pos] == ids) if len(self.old_qids) else np.zeros(len(rows), bool)

    def observe_inserts(self, ev: Events, rows: np.ndarray) -> None:
        rows = np.asarray(rows, np.int64)
        self.new.observe_inserts(ev, rows[~self._is_old(ev, rows)])

    def route_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        r0, w0 = self.old.route_objects(ev, rows)
        r1, w1 = self.new.route_objects(ev, rows)
        key = np.unique(np.concatenate([r0, r1]) * self.n_workers + np.concatenate([w0, w1]))
        return key // self.n_workers, key % self.n_workers

    def route_queries(self, ev: Events, rows: np.ndarray) -> Pairs:
        rows = np.asarray(rows, np.int64)
        old = self._is_old(ev, rows)
        r0, w0 = self.old.route_queries(ev, rows[old])
        r1, w1 = self.new.route_queries(ev, rows[~old])
        return np.concatenate([r0, r1]), np.concatenate([w0, w1])

    def units(self, ev: Events, rows: np.ndarray) -> Pairs:
        rows = np.asarray(rows, np.int64)
        shift = len(self.new.unit_owner())
        is_obj = ev.kind[rows] == OBJECT
        old = self._is_old(ev, rows) & ~is_obj
        r0, u0 = self.old.units(ev, rows[old | is_obj])
        r1, u1 = self.new.units(ev, rows[~old])
        return np.concatenate([r0, r1]), np.concatenate([u0 + shift, u1])

    def unit_owner(self) -> np.ndarray:
        return np.concatenate([self.new.unit_owner(), self.old.unit_owner()])

    def with_unit_owner(self, owner: np.ndarray) -> DualRouter:
        k = len(self.new.unit_owner())
        return DualRouter(self.old.with_unit_owner(owner[k:]), self.new.with_unit_owner(owner[:k]), self.old_qids,
                          self.n_old)

    def size_bytes(self) -> int:
        return self.old.size_bytes() + self.new.size_bytes() + self.old_qids.nbytes

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "old": self.old.describe(), "new": self.new.describe(),
                "old_subscriptions": self.n_old}


# --- Phase I: text split / merge of gridt cells ----------------------------------------------------

@dataclass
class CellProfile:
    """What Phase I knows about one cell: (item, term) pairs of the epoch's objects in it, of the
    live subscriptions over it (their routing terms) and of the epoch's inserts/deletes over it."""

    obj: tuple[np.ndarray, np.ndarray]
    sub: tuple[np.ndarray, np.ndarray]
    upd: tuple[np.ndarray, np.ndarray]

    @classmethod
    def of(cls, router: GridtRouter, stats: EpochStats, cell: int) -> CellProfile:
        g = router.grid
        cx, cy = cell % g.nx, cell // g.nx

        def over(ev: Events, kinds) -> tuple[np.ndarray, np.ndarray]:
            rows = np.flatnonzero(np.isin(ev.kind, kinds) & (ev.family == RANGE))
            rng = g.cell_ranges(ev.xmin[rows], ev.ymin[rows], ev.xmax[rows], ev.ymax[rows])
            rows = rows[(rng[:, 0] <= cx) & (rng[:, 1] >= cx) & (rng[:, 2] <= cy) & (rng[:, 3] >= cy)]
            return routing_terms(ev, rows)

        rec = stats.recent
        objs = np.flatnonzero(rec.kind == OBJECT)
        objs = objs[g.cells_of(rec.x[objs], rec.y[objs]) == cell]
        ptr, terms = csr_take(rec.offsets, rec.values, objs)
        obj = (np.repeat(objs, np.diff(ptr)), terms.astype(np.int64))
        return cls(obj, over(stats.live, [INSERT]), over(rec, [INSERT, DELETE]))

    def load(self, terms: np.ndarray) -> tuple[float, int]:
        """Definition 3 load of the part holding `terms` (plus its objects and updates, as the
        monitor's unit load), and its size in stored subscriptions."""
        def distinct(pairs):
            return len(np.unique(pairs[0][np.isin(pairs[1], terms)]))
        n_o, n_q, n_u = distinct(self.obj), distinct(self.sub), distinct(self.upd)
        return float(n_o * n_q + n_o + n_u), n_q

    def term_loads(self, terms: np.ndarray) -> np.ndarray:
        """Per term: f_o * f_q + f_o + f_q (what the text split balances, as kdt's PartitionNode)."""
        def freq(t):
            return np.bincount(np.searchsorted(terms, t[np.isin(t, terms)]), minlength=len(terms)).astype(np.float64)
        f_o, f_q = freq(self.obj[1]), freq(self.sub[1])
        return f_o * f_q + f_o + f_q


def _append_map(router: GridtRouter, terms, slots, seqs, workers, unit: float):
    """Layout arrays with one new term map appended (its id is the largest, so keys stay sorted)."""
    j = len(router.tmc_ptr) - 1
    order = np.argsort(terms)
    return {
        "tm_key": np.concatenate([router.tm_key, (np.int64(j) << TERM_BITS) | np.asarray(terms, np.int64)[order]]),
        "tm_slot": np.concatenate([router.tm_slot, np.asarray(slots, np.int64)[order]]),
        "tm_seq": np.concatenate([router.tm_seq, np.asarray(seqs, np.int64)[order]]),
        "tmc_ptr": np.append(router.tmc_ptr, router.tmc_ptr[-1] + len(workers)),
        "tmc_worker": np.concatenate([router.tmc_worker, np.asarray(workers, np.int64)]),
        "tm_unit": np.append(router.tm_unit, unit),
    }, j


def _h2_terms(router: GridtRouter, cell: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = router.h2_ptr[cell], router.h2_ptr[cell + 1]
    return router.h2_key[lo:hi] & TERM_MASK, router.h2_seq[lo:hi]


def text_split(router: GridtRouter, cell: int, prof: CellProfile, w_o: int, w_l: int):
    """Cut a space cell's terms (those its subscriptions are indexed under, H2) in two by LPT on
    their loads; the part with fewer subscriptions becomes slot 1, on w_l. Returns (a function
    building the new router, (load before, load of the kept part, load of the moved part), 1), or
    None when the cell has fewer than two terms. The router is built only for an accepted split."""
    terms, seqs = _h2_terms(router, cell)
    if len(terms) < 2:
        return None
    bins = allocate.lpt_spread(prof.term_loads(terms), 2)
    parts = [prof.load(terms[bins == b]) for b in range(2)]
    move = 1 if parts[1][1] <= parts[0][1] else 0
    slots = (bins == move).astype(np.int64)  # slot 0 stays on w_o, slot 1 moves
    unit = float(router.tm_unit.mean()) if len(router.tm_unit) else 1.0
    arrays, j = _append_map(router, terms, slots, seqs, [w_o, w_l], unit)
    cell_worker, cell_tmap = router.cell_worker.copy(), router.cell_tmap.copy()
    cell_worker[cell], cell_tmap[cell] = -1, j
    build = lambda: router.with_layout(cell_worker, cell_tmap, **arrays)  # noqa: E731 - only if accepted
    return build, (prof.load(terms)[0], parts[1 - move][0], parts[move][0]), 1


def text_merge(router: GridtRouter, cell: int, slot: int, into: int, prof: CellProfile):
    """Merge text part `slot` of a cell into its part `into` (on w_l). Returns (a function building
    the new router, (L_a, L_b, L_merged), the merged part's slot in the new router)."""
    j = int(router.cell_tmap[cell])
    lo, hi = router.tm_ptr[j], router.tm_ptr[j + 1]
    terms, slots, seqs = router.tm_key[lo:hi] & TERM_MASK, router.tm_slot[lo:hi], router.tm_seq[lo:hi]
    h2, _ = _h2_terms(router, cell)
    t_a, t_b = np.intersect1d(terms[slots == slot], h2), np.intersect1d(terms[slots == into], h2)
    loads = (prof.load(t_a)[0], prof.load(t_b)[0], prof.load(np.union1d(t_a, t_b))[0])
    workers = router.tmc_worker[router.tmc_ptr[j]:router.tmc_ptr[j + 1]]
    new_slots = np.where(slots == slot, into, slots)
    new_slots = new_slots - (new_slots > slot)
    keep = np.delete(workers, slot)
    target = into - (into > slot)
    cell_worker, cell_tmap = router.cell_worker.copy(), router.cell_tmap.copy()
    if len(keep) == 1:  # one part left: the cell is a space cell again
        cell_worker[cell], cell_tmap[cell] = keep[0], -1
        return (lambda: router.with_layout(cell_worker, cell_tmap, router.tm_key, router.tm_slot, router.tm_seq,
                                           router.tmc_ptr, router.tmc_worker, router.tm_unit)), loads, 0
    arrays, jn = _append_map(router, terms, new_slots, seqs, keep, float(router.tm_unit[j]))
    cell_tmap[cell] = jn
    return (lambda: router.with_layout(cell_worker, cell_tmap, **arrays)), loads, target


# --- the adjusters ------------------------------------------------------------------------------

class Ps2Adjuster(Adjuster):
    """Local adjustment (Section V-A) with a pluggable Phase II selection, plus the optional global
    adjustment (Section V-B). Subclasses set `name` and `select`."""

    @dataclass
    class Params:
        sigma: float = 1.5  # load balance constraint L_max / L_min (the paper gives no value; kdt's)
        measure: str = "load"  # the statistic balanced: "load" (Definitions 1/3), "checks" or "busy_s"
        p: int = 3  # Phase I examines the p most loaded cells of w_o ("a small parameter"); 0 = off
        global_period: int = 0  # epochs between global repartitioning checks; 0 = off
        global_min_gain: float = 0.1  # repartition when the new max worker load is this much lower
        drain_fraction: float = 0.1  # drop the old router once its live subscriptions fall below this
        refit_params: dict | None = None  # the strategy's parameters for the re-fit (None: its defaults)

    def __init__(self, params: Any, n_workers: int, context, strategy: str):
        super().__init__(params, n_workers, context, strategy)
        if params.measure not in MEASURES:
            raise ValueError(f"adjuster {self.name!r}: measure must be one of {MEASURES}, not {params.measure!r}")
        if params.sigma < 1:
            raise ValueError(f"adjuster {self.name!r}: sigma must be >= 1")
        self.epochs = 0
        self.recent_objects: list[Events] = []

    def select(self, load: np.ndarray, size: np.ndarray, tau: float) -> np.ndarray:
        raise NotImplementedError

    # -- entry point -----------------------------------------------------------------------------

    def adjust(self, router: Router, stats: EpochStats) -> MigrationPlan | None:
        self.epochs += 1
        p = self.params
        if p.global_period > 0:  # the recent sample: the objects of the last global_period epochs
            rec = stats.recent
            self.recent_objects = (self.recent_objects + [rec.take(np.flatnonzero(rec.kind == OBJECT))])[
                -p.global_period:]
        if isinstance(router, DualRouter):
            due = p.global_period > 0 and self.epochs % p.global_period == 0
            plan = self.drain(router, stats, force=due)
            if plan is not None:
                return plan
        elif p.global_period > 0 and self.epochs % p.global_period == 0:
            plan = self.repartition(router, stats)
            if plan is not None:
                return plan
        return self.local(router, stats)

    # -- local adjustment (Section V-A) -------------------------------------------------------------

    def local(self, router: Router, stats: EpochStats) -> MigrationPlan | None:
        p = self.params
        loads = worker_measure(stats, p.measure)
        w_o, w_l = int(np.argmax(loads)), int(np.argmin(loads))
        if loads[w_o] <= 0 or loads[w_o] <= p.sigma * loads[w_l]:
            return None
        owner = router.unit_owner()
        table = unit_table(stats)
        unit_load, unit_size = np.zeros(len(owner)), np.zeros(len(owner))
        if len(table):
            idx = table.index.to_numpy(np.int64)
            ok = (idx >= 0) & (idx < len(owner))
            unit_load[idx[ok]] = table[p.measure].to_numpy(np.float64)[ok]
            unit_size[idx[ok]] = table["query_bytes"].to_numpy(np.float64)[ok]
        mine = np.flatnonzero(owner == w_o)
        model = PairModel.of(stats, p.measure, loads, w_o, w_l, float(unit_load[mine].sum()))
        if model.u_o <= 0:
            return None
        info: dict[str, Any] = {"adjuster": self.name, "w_o": w_o, "w_l": w_l, "ratio": model.ratio(),
                                "tau_initial": float(model.tau()), "phase1": []}
        new, moves, touched = router, [], EMPTY
        if isinstance(router, GridtRouter) and p.p > 0:
            new, moves, touched = self.phase1(router, stats, unit_load, mine, w_o, w_l, model, info)
        tau = model.tau()
        chosen = EMPTY
        if model.ratio() > p.sigma and tau > 0:  # Phase II while the constraint is still violated
            cand = mine[~np.isin(mine, touched)] if len(touched) else mine
            t_select = time.perf_counter()
            chosen = cand[self.select(unit_load[cand], unit_size[cand], tau)]
            info["select_cells_s"] = time.perf_counter() - t_select  # Figs. 12a/13: the selection alone
            moved = float(unit_load[chosen].sum())
            if model.overshoots(moved, moved):  # only swaps the roles (cells too coarse for tau)
                info["phase2_skipped"] = {"cells": len(chosen), "load": moved}
                chosen = EMPTY
        info.update(tau=float(tau), cells=len(chosen), moved_load=float(unit_load[chosen].sum()),
                    moved_bytes=float(unit_size[chosen].sum()))
        phase = "+".join(x for x, did in (("I", bool(moves)), ("II", len(chosen) > 0)) if did)
        if not phase:
            return None
        info["phase"] = info["operation"] = phase
        if len(chosen):
            if new is not router:  # Phase I changed the unit structure: map the old ids
                cell, slot = router.unit_cells()
                chosen_new = new.unit_of(cell[chosen], slot[chosen])
            else:
                chosen_new = chosen
            new_owner = new.unit_owner()
            new_owner[chosen_new] = w_l
            new = new.with_unit_owner(new_owner)
            moves += [(int(u), w_o, w_l) for u in chosen_new]
        unit, src, dst = (np.array(c, np.int64) for c in zip(*moves))
        return MigrationPlan(new, unit, src, dst, info)

    def phase1(self, router: GridtRouter, stats: EpochStats, unit_load, mine, w_o, w_l, model, info):
        """Section V-A Phase I on the p most loaded units of w_o, while the constraint is violated.
        An operation is done when it lowers the total load (Definition 3 over the epoch's objects
        and live subscriptions) and leaves w_l below the load w_o had (no overshoot). Its loads are
        rescaled to the monitor's value of the unit, so the pair model can account for them."""
        cells, slots = router.unit_cells()
        top = mine[np.argsort(-unit_load[mine], kind="stable")][: self.params.p]
        top = top[unit_load[top] > 0]
        new, moves, touched = router, [], []
        for u in top:
            if model.ratio() <= self.params.sigma:
                break
            c, k = int(cells[u]), int(slots[u])
            prof = CellProfile.of(new, stats, c)
            j = int(new.cell_tmap[c])
            if j < 0:
                out = text_split(new, c, prof, w_o, w_l)
                if out is None:
                    continue
                cand, (before, keep, moved), slot = out
                if before <= 0:
                    continue
                scale = unit_load[u] / before
                d_o, d_l, after, op, src = scale * (before - keep), scale * moved, keep + moved, "split", w_o
            else:
                workers = new.tmc_worker[new.tmc_ptr[j]:new.tmc_ptr[j + 1]]
                into = np.flatnonzero(workers == w_l)
                if len(into) == 0:
                    continue
                cand, (l_a, l_b, merged), slot = text_merge(new, c, k, int(into[0]), prof)
                if l_a <= 0:
                    continue
                scale = unit_load[u] / l_a
                before, after = l_a + l_b, merged
                d_o, d_l, op, src = scale * l_a, scale * (merged - l_b), "merge", -1
            ok = after < before and d_o > 0 and not model.overshoots(d_o, d_l)
            info["phase1"].append({"op": op, "cell": c, "done": bool(ok), "load_before": before, "load_after": after,
                                   "drop_o": d_o, "gain_l": d_l})
            if not ok:
                continue
            new = cand()
            touched.append(c)
            moves.append((c, slot, src))
            model.apply(d_o, d_l)
        # moved parts as units of the final router, and the old units of the touched cells
        plan_moves = [(int(new.unit_of(c, s)), src, w_l) for c, s, src in moves]
        old_touched = np.flatnonzero(np.isin(cells, touched)) if touched else EMPTY
        return new, plan_moves, old_touched

    # -- global adjustment (Section V-B) --------------------------------------------------------------

    def repartition(self, router: Router, stats: EpochStats) -> MigrationPlan | None:
        """Re-fit the strategy (its default parameters) on a recent sample: the objects of the last
        global_period epochs and the live subscriptions, in seq order. Switch to a DualRouter when
        the new partitioning's estimated max worker load (those objects against the live
        subscriptions, Definition 1) is at least `global_min_gain` lower than the current one's."""
        from strategies.registry import get

        rec, live = Events.concat(self.recent_objects), stats.live
        if len(rec) == 0 or len(live) == 0:
            return None
        sample = Events.concat([live, rec])
        sample = sample.take(np.argsort(sample.seq, kind="stable"))
        cls = get(self.strategy)
        fresh = cls().fit(sample, self.n_workers, cls.make_params(self.params.refit_params), self.context)
        probe = copy.deepcopy(fresh)
        probe.observe_inserts(live, np.argsort(live.seq, kind="stable"))
        old_max = estimated_loads(router, rec, live).max()
        new_max = estimated_loads(probe, rec, live).max()
        if not new_max < (1 - self.params.global_min_gain) * old_max:
            return None
        dual = DualRouter(router, fresh, live.id[live.kind == INSERT])
        return MigrationPlan(dual, EMPTY, EMPTY, EMPTY, {"adjuster": self.name, "phase": "global-switch",
                                                         "operation": "global-switch",
                                                         "estimated_max_old": float(old_max),
                                                         "estimated_max_new": float(new_max),
                                                         "old_subscriptions": dual.n_old})

    def drain(self, router: DualRouter, stats: EpochStats, force: bool = False) -> MigrationPlan | None:
        """When the old subscriptions still alive are at most drain_fraction of those at the switch
        (or, `force`, at the next periodic check, so that long-lived subscriptions cannot keep two
        routers forever), move them onto the new router and drop the old one: their units (of the
        new router) move to the units' owners."""
        live = stats.live
        rows = np.flatnonzero((live.kind == INSERT) & np.isin(live.id, router.old_qids))
        if not force and len(rows) > self.params.drain_fraction * router.n_old:
            return None
        rows = rows[np.argsort(live.seq[rows], kind="stable")]
        new = copy.deepcopy(router.new)
        new.observe_inserts(live, rows)
        _, units = new.units(live, rows)
        units = np.unique(units)
        return MigrationPlan(new, units, np.full(len(units), -1), new.unit_owner()[units],
                             {"adjuster": self.name, "phase": "global-drain", "operation": "global-drain",
                              "old_subscriptions": len(rows), "forced": bool(force)})


@dataclass
class PairModel:
    """w_o and w_l under the monitor's measure, and how moving cell load from w_o to w_l changes
    them. Moving the share f of w_o's cell load u_o is taken to move the share f of its objects O,
    subscriptions Q and updates U. Under the Definition 1 load (O * Q + O + U, the monitor's):
    L_o(f) = L_o - f (2 - f) O_o Q_o - f (O_o + U_o) and L_l(f) = L_l + f (O_o Q_l + O_l Q_o) +
    f^2 O_o Q_o + f (O_o + U_o); under an additive measure (checks, busy time) L_o(f) = (1 - f) L_o
    and L_l(f) = L_l + f L_o. `f_o` / `f_l` are the shares already taken from w_o / given to w_l
    (they differ after a Phase I split, which lowers the total). tau = the cell load whose move
    equalises the pair: L_o - L_l is linear in the share moved (the f^2 terms cancel), so exact."""

    l_o: float
    l_l: float
    u_o: float
    oq: tuple[float, float, float, float, float] | None  # O_o, Q_o, O_l, Q_l, U_o (Definition 1)
    f_o: float = 0.0
    f_l: float = 0.0

    @classmethod
    def of(cls, stats: EpochStats, measure: str, loads: np.ndarray, w_o: int, w_l: int, u_o: float) -> PairModel:
        oq = None
        if measure == "load" and {"objects", "restored", "inserts", "deletes"} <= set(stats.workers.columns):
            w = stats.workers.set_index("worker").reindex(range(stats.n_workers), fill_value=0)
            o = w["objects"].to_numpy(np.float64)
            q = (w["restored"] + (w["inserts"] - w["deletes"]) / 2.0).clip(lower=0).to_numpy(np.float64)
            upd = (w["inserts"] + w["deletes"]).to_numpy(np.float64)
            oq = (o[w_o], q[w_o], o[w_l], q[w_l], upd[w_o])
        return cls(float(loads[w_o]), float(loads[w_l]), u_o, oq)

    def loads(self, f_o: float, f_l: float) -> tuple[float, float]:
        if self.oq is None:
            return (1 - f_o) * self.l_o, self.l_l + f_l * self.l_o
        o_o, q_o, o_l, q_l, u = self.oq
        return (self.l_o - f_o * (2 - f_o) * o_o * q_o - f_o * (o_o + u),
                self.l_l + f_l * (o_o * q_l + o_l * q_o) + f_l * f_l * o_o * q_o + f_l * (o_o + u))

    def current(self) -> tuple[float, float]:
        return self.loads(self.f_o, self.f_l)

    def after(self, drop_o: float, gain_l: float) -> tuple[float, float]:
        """The pair's loads once w_o loses `drop_o` more and w_l gains `gain_l` more cell load."""
        return self.loads(self.f_o + drop_o / self.u_o, self.f_l + gain_l / self.u_o)

    def overshoots(self, drop_o: float, gain_l: float) -> bool:
        """Whether w_l would end at or above the load w_o has now (the move only swaps the roles)."""
        return self.after(drop_o, gain_l)[1] >= self.current()[0]

    def apply(self, drop_o: float, gain_l: float) -> None:
        self.f_o += drop_o / self.u_o
        self.f_l += gain_l / self.u_o

    def ratio(self) -> float:
        lo, ll = self.current()
        return lo / ll if ll > 0 else float("inf")

    def tau(self) -> float:
        g0 = self.current()
        g1 = self.loads(self.f_o + 1, self.f_l + 1)
        gap0, slope = g0[0] - g0[1], (g0[0] - g0[1]) - (g1[0] - g1[1])
        return max(gap0, 0.0) / slope * self.u_o if slope > 0 else 0.0


def worker_measure(stats: EpochStats, measure: str) -> np.ndarray:
    """The monitor's per-worker value of `measure` (the workers table names checks "candidates")."""
    cols = stats.workers.columns
    return stats.worker_loads(measure if measure in cols or measure != "checks" else "candidates")


def estimated_loads(router: Router, objects: Events, subs: Events) -> np.ndarray:
    """Definition 1 per worker (c = 1): objects routed x subscriptions held + objects."""
    n = router.n_workers
    o = np.flatnonzero(objects.kind == OBJECT)
    _, wo = router.route_objects(objects, o)
    q = np.flatnonzero((subs.kind == INSERT) & (subs.family == RANGE))
    _, wq = router.route_queries(subs, q)
    n_o = np.bincount(wo, minlength=n)[:n].astype(np.float64)
    n_q = np.bincount(wq, minlength=n)[:n].astype(np.float64)
    return n_o * n_q + n_o


class DPAdjuster(Ps2Adjuster):
    """`dp`: Phase II by the exact knapsack DP (Section V-A1)."""

    name = "dp"

    @dataclass
    class Params(Ps2Adjuster.Params):
        size_unit: float = 1024.0  # bytes per DP size bucket (sizes must be integers)
        max_table_bytes: int = 256 << 20  # refuse (SelectionRefused) above this table size

    def select(self, load, size, tau):
        return select_dp(load, size, tau, self.params.size_unit, self.params.max_table_bytes)


class GRAdjuster(Ps2Adjuster):
    """`gr`: Phase II by the greedy of Section V-A2 (PS2Stream's method of choice)."""

    name = "gr"

    def select(self, load, size, tau):
        return select_gr(load, size, tau)


class SIAdjuster(Ps2Adjuster):
    """`si`: Phase II takes the largest cells first (comparison method, Section VI-D)."""

    name = "si"

    def select(self, load, size, tau):
        return select_si(load, size, tau)


class RAAdjuster(Ps2Adjuster):
    """`ra`: Phase II takes random cells (comparison method, Section VI-D), seeded by the run."""

    name = "ra"

    def select(self, load, size, tau):
        return select_ra(load, size, tau, self.rng)
