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

Paper: ../shared/papers/ps2stream.txt (notes: ../shared/papers/notes/ps2stream.md, section 4).
Decisions where the paper is silent (each also in ADR-0010):
sigma = 1.5 (the kdt fit's constant); cell loads L_g are the monitor's per-unit Definition 3 loads;
tau = the cell load whose move equalises w_o and w_l under the monitor's Definition 1 worker load
(`PairModel`); a move that would leave w_l at or above w_o's load is not made (Phase I and II
alike); Phase I models a part with Definition 3 over the epoch's objects and the live subscriptions
and cuts terms by LPT; DP sizes are bucketed to `size_unit` bytes (rounded up), P is the greedy's
bucketed cost, and the DP refuses (SelectionRefused) when its n x P table would exceed
`max_table_bytes`.

This module holds the adjusters; the Phase II selections are in `selection.py`, Phase I in
`textsplit.py`, the load model in `load_model.py` and the dual router in strategies/routers/dual.py.
"""

from __future__ import annotations


import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.core.events import INSERT, OBJECT, Events
from harness.core.repetitions import median_interval
from harness.core.timing import work_clock
from strategies.adjust_base import Adjuster, EpochStats, MigrationPlan, unit_table
from strategies.base import Router
from strategies.ps2stream.gridt import GridtRouter
from strategies.ps2stream.load_model import PairModel, estimated_loads, worker_measure
from strategies.ps2stream.selection import EMPTY, select_dp, select_gr, select_ra, select_si
from strategies.ps2stream.textsplit import CellProfile, text_merge, text_split
from strategies.routers.dual import DualRouter

MEASURES = ("load", "checks", "busy_s")
SELECTION_TIMINGS = 21  # Phase II's selection is timed this often on the same cells, the first dropped


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
        self.check_params(params)
        self.epochs = 0
        self.recent_objects: list[Events] = []

    @classmethod
    def check_params(cls, params: Any) -> None:
        if params.measure not in MEASURES:
            raise ValueError(f"adjuster {cls.name!r}: measure must be one of {MEASURES}, not {params.measure!r}")
        if params.sigma < 1:
            raise ValueError(f"adjuster {cls.name!r}: sigma must be >= 1")

    def select(self, load: np.ndarray, size: np.ndarray, tau: float) -> np.ndarray:
        raise NotImplementedError

    def timed_select(self, load: np.ndarray, size: np.ndarray, tau: float, info: dict) -> np.ndarray:
        """Phase II's choice, timed SELECTION_TIMINGS times on the same cells (the random generator
        put back before each, so RA draws the same cells and leaves the generator as one call
        would); into `info`: the median of the timings after the first (`select_cells_s`, Figs.
        12a/13: the selection alone), its 95% order-statistic interval (`select_cells_s_ci_lo/_hi`,
        harness/core/repetitions.py: of twenty timings the 6th and 15th, so that one timing
        preempted on a busy machine does not widen it) and the number of candidate cells (GR's,
        SI's and RA's time follows it; DP's also the sizes)."""
        start = copy.deepcopy(self.rng)

        def fresh() -> None:
            self.rng = copy.deepcopy(start)

        chosen, seconds = selection_timings(self.select, load, size, tau, before=fresh)
        median, lo, hi, _ = median_interval(seconds[1:] if len(seconds) > 1 else seconds)
        info.update(select_cells_s=median, select_cells_s_ci_lo=lo, select_cells_s_ci_hi=hi,
                    select_candidates=int(len(load)))
        return chosen

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
            t_phase1 = work_clock()
            new, moves, touched = self.phase1(router, stats, unit_load, mine, w_o, w_l, model, info)
            info["phase1_s"] = work_clock() - t_phase1  # its trial splits and merges
        tau = model.tau()
        chosen = EMPTY
        if model.ratio() > p.sigma and tau > 0:  # Phase II while the constraint is still violated
            cand = mine[~np.isin(mine, touched)] if len(touched) else mine
            chosen = cand[self.timed_select(unit_load[cand], unit_size[cand], tau, info)]
            moved = float(unit_load[chosen].sum())
            if model.overshoots(moved, moved):  # only swaps the roles (cells too coarse for tau)
                info["phase2_skipped"] = {"cells": len(chosen), "load": moved}
                chosen = EMPTY
        info.update(tau=float(tau), cells=len(chosen), moved_load=float(unit_load[chosen].sum()),
                    moved_bytes=float(unit_size[chosen].sum()),
                    # what stalls the overloaded worker: its Phase I trials and Phase II selection,
                    # not the harness building the new router (ADR-0084)
                    stall_s=float(info.get("phase1_s", 0.0) + info.get("select_cells_s", 0.0)))
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


def selection_timings(select, load, size, tau, times: int = SELECTION_TIMINGS,
                      before=lambda: None) -> tuple[np.ndarray, list[float]]:
    """Run `select(load, size, tau)` `times` times on the same cells, `before()` (untimed) ahead
    of each; its choice (every run must make the same one) and each run's seconds, in CPU time of
    the thread (harness.core.timing.work_clock: another process on the machine does not lengthen
    them). Figs. 12a and 13 compare selection times of well under a millisecond, which one timing
    cannot tell apart."""
    chosen, seconds = None, []
    for _ in range(times):
        before()
        t0 = work_clock()
        pick = select(load, size, tau)
        seconds.append(work_clock() - t0)
        if chosen is None:
            chosen = pick
        elif not np.array_equal(pick, chosen):
            raise RuntimeError("cell selection chose other cells when run again on the same cells")
    return chosen, seconds


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
