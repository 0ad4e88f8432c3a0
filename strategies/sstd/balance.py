"""SSTD's load balancing adjusters (Chen et al., PVLDB 2020, Section 5): PM, FM and FG.

- Detection (Definition 4): imbalance when L_max / L_min > lambda (default 6, Section 7.6), with
  L_w the sum of w's leaf loads in the last epoch, leaf load = objects * stored queries +
  objects + updates (the unit statistics' `load`): Eq. 2's CRQ term p_crq * E_{P,O} with the
  monitor's counts in place of J's probabilities, per leaf as Definition 4 says, rather than the
  worker-level |O_w| * q_w of `stats.workers` (ADR-0011).
- PM and FM (Section 5.2): the reallocations of reallocation.py; they only read per-unit
  statistics, so they work on any router with units.
- FG (Section 5.3): the QT-tree adjustment of fgtree.py, alone (`fg`: the paper's plan (v), sstd.txt
  l.378). The escalations are adjusters of their own: `pmfm` (plan (iv), PM then FM) and `pmfmfg`
  (plan (vi), PM then FM then FG: SSTD's recommended plan, l.386), so each of Section 7.6's six
  plans has one name and a claim reads the plan its figure names (ADR-0012).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from strategies import registry
from strategies.adjust_base import (
    Adjuster,
    EpochStats,
    MigrationPlan,
    reassignment,
)
from strategies.base import Router
from strategies.sstd.fgtree import FGTree
from strategies.sstd.qttree.router import QTTreeRouter
from strategies.sstd.reallocation import (
    fm_owner,
    imbalance,
    leafwise_cost,
    ordered,
    pm_owner,
    unit_stats,
    worker_unit_loads,
)


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
    """`fm`: SSTD's full reallocation (Section 5.2) alone, plan (iii) of Section 7.6."""

    name = "fm"
    plan_steps: tuple[str, ...] = ("fm",)

    def adjust(self, router: Router, stats: EpochStats) -> MigrationPlan | None:
        hit, ratio = self.detect(stats)
        if not hit:
            return None
        best, tried = self._escalate(self.plan_steps, router, stats, ratio)
        return None if best is None else self._plan(router, *best, tried)


class PMFMAdjuster(FMAdjuster):
    """`pmfm`: plan (iv) of Section 7.6, "using PM followed by FM" (sstd.txt l.378): FM only when
    PM's predicted ratio stays above lambda."""

    name = "pmfm"
    plan_steps = ("pm", "fm")


class FGAdjuster(_Reallocation):
    """`fg`: the QT-tree adjustment of Section 5.3 (split the most loaded leaf, merge the least
    loaded siblings, then FM on the new tree) and nothing else: plan (v) of Section 7.6
    (sstd.txt l.378). PM and FM are never tried first; `pmfmfg` is the escalating plan."""

    name = "fg"
    strategies = frozenset({"qttree", "quadtree", "text_only", "qttree_termmap"})
    escalation: tuple[str, ...] = ()  # reallocations tried before FG, in order

    @dataclass
    class Params:
        lam: float = 6.0  # lambda of Definition 4 (Section 7.6: 6)
        epsilon: float = 0.5  # Eq. 3: spatial split if h-hat <= epsilon (Section 7.6: 0.5)
        max_rounds: int = 64  # split/merge rounds at most (the paper argues termination only)

    def adjust(self, router: Router, stats: EpochStats) -> MigrationPlan | None:
        if not isinstance(router, QTTreeRouter):
            raise TypeError(f"{self.name} adjusts QT-trees (qttree, quadtree, text_only, qttree_termmap), "
                            f"not {type(router).__name__}")
        hit, ratio = self.detect(stats)
        if not hit:
            return None
        tried: list[dict] = []
        fallback = None
        if self.escalation:
            fallback, tried = self._escalate(self.escalation, router, stats, ratio)
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


class PMFMFGAdjuster(FGAdjuster):
    """`pmfmfg`: plan (vi) of Section 7.6, SSTD's recommended PM+FM+FG (sstd.txt l.386): PM; if its
    predicted ratio still exceeds lambda, FM; if that too, FG. Each step is planned from the
    current placement; if FG finds nothing, the last of PM and FM that improved is the plan."""

    name = "pmfmfg"
    escalation = ("pm", "fm")
