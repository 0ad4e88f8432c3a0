"""Migration mechanics: plans are checked before anything moves, and results stay exact across
any accepted plan (in process and on Spark)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from harness.core.events import INSERT
from harness.engine.migration import InvalidPlanError, live_queries, validate_plan
from harness.engine.simulate import default_context, simulate
from strategies import registry
from strategies.adjust_base import Adjuster, MigrationPlan, reassignment
from tests.streams import random_stream


class RandomMoves(Adjuster):
    """Moves a random fifth of the units to random workers after every epoch (a test adjuster)."""

    name = "random_moves_for_tests"

    def adjust(self, router, stats):
        owner = router.unit_owner()
        new = owner.copy()
        pick = self.rng.choice(len(owner), size=max(1, len(owner) // 5), replace=False)
        new[pick] = self.rng.integers(0, self.n_workers, len(pick))
        return reassignment(router, new, operation="random")


def _grid_router(ev, warmup, n_workers, context):
    cls = registry.get("grid")
    return cls().fit(ev.take(np.arange(warmup)), n_workers, cls.make_params({"cells_per_side": 8}), context)


def _setup(seed=1, n_workers=4):
    ev = random_stream(seed, n_objects=300, n_queries=120)
    warmup = int(np.flatnonzero(ev.kind == INSERT)[40])
    context = default_context(ev)
    router = _grid_router(ev, warmup, n_workers, context)
    return ev, warmup, context, router, live_queries(ev, len(ev) * 2 // 3)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), workers=st.integers(2, 6))
def test_random_accepted_plans_keep_results_exact(seed, workers):
    ev = random_stream(seed, n_objects=200, n_queries=80)
    warmup = int(np.flatnonzero(ev.kind == INSERT)[20])
    context = default_context(ev, seed)
    adjuster = RandomMoves(RandomMoves.make_params({}), workers, context, "grid")
    res = simulate(ev, warmup, "grid", workers, epoch_events=60, adjust=adjuster,
                   strategy_params={"cells_per_side": 8}, context=context)
    assert res.plans, "the test adjuster plans after every epoch"
    assert res.digest == res.oracle_digest


def test_migrations_move_subscriptions_and_charge_the_workers():
    ev = random_stream(11, n_objects=300, n_queries=120)
    warmup = int(np.flatnonzero(ev.kind == INSERT)[30])
    context = default_context(ev, 11)
    adjuster = RandomMoves(RandomMoves.make_params({}), 4, context, "grid")
    res = simulate(ev, warmup, "grid", 4, epoch_events=80, adjust=adjuster, strategy_params={"cells_per_side": 8},
                   context=context)
    moved = [e for e in res.epochs if e["migrated_queries"] > 0]
    assert moved and all(e["migrated_bytes"] > 0 and e["migration_s"] > 0 for e in moved)
    after = [res.epochs[i + 1] for i, e in enumerate(res.epochs[:-1]) if e["migrated_queries"] > 0]
    assert any(e["pause_max_s"] > 0 for e in after)
    assert res.exact


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), corruption=st.sampled_from(["twice", "range", "router", "self", "undeclared"]))
def test_random_invalid_plans_are_rejected(seed, corruption):
    ev, warmup, context, router, live = _setup(seed % 7)
    rng = np.random.default_rng(seed)
    owner = router.unit_owner()
    # only occupied cells, so every corruption concerns a unit that holds subscriptions
    occupied = np.unique(router.units(live, np.arange(len(live)))[1])
    unit = rng.choice(occupied, size=min(3, len(occupied)), replace=False)
    dst = (owner[unit] + 1 + rng.integers(0, 3, len(unit))) % router.n_workers
    new_owner = owner.copy()
    new_owner[unit] = dst
    src = owner[unit]
    new_router = router.with_unit_owner(new_owner)
    if corruption == "twice":
        unit, src, dst = np.r_[unit, unit[0]], np.r_[src, src[0]], np.r_[dst, (dst[0] + 1) % router.n_workers]
        match = "planned twice"
    elif corruption == "range":
        dst = dst.copy()
        dst[0] = router.n_workers + 3
        match = "workers are 0"
    elif corruption == "router":
        new_router = router.with_unit_owner(owner)  # the router ignores the plan
        match = "new router gives it"
    elif corruption == "self":
        dst = src.copy()
        match = "to itself"
    else:  # the router moves a cell the (empty) plan does not declare, onto a worker lacking its queries
        unit = src = dst = np.zeros(0, np.int64)
        new_router = router.with_unit_owner(_undeclared_owner(router, live, occupied, rng))
        match = "undeclared move"
    with pytest.raises(InvalidPlanError, match=match):
        validate_plan(MigrationPlan(new_router, unit, src, dst), router, live, router.n_workers)


def _undeclared_owner(router, live, occupied, rng):
    """Owners with one occupied cell moved to a worker that does not hold all of its subscriptions."""
    owner = router.unit_owner()
    r_old, w_old = router.route_queries(live, np.arange(len(live)))
    r_u, u = router.units(live, np.arange(len(live)))
    for c in rng.permutation(occupied):
        rows = r_u[u == c]
        for w in range(router.n_workers):
            held = r_old[w_old == w]
            if w != owner[c] and not np.isin(rows, held).all():
                new = owner.copy()
                new[c] = w
                return new
    raise AssertionError("no cell can be moved to a worker lacking its subscriptions")


class _Dropping:
    """A router that places one subscription nowhere (a lost query)."""

    def __init__(self, inner, lost_id):
        self.inner, self.lost_id = inner, lost_id

    def route_queries(self, ev, rows):
        r, w = self.inner.route_queries(ev, rows)
        keep = ev.id[r] != self.lost_id
        return r[keep], w[keep]

    def unit_owner(self):
        return self.inner.unit_owner()

    def units(self, ev, rows):
        return self.inner.units(ev, rows)


def test_a_plan_that_loses_a_subscription_is_rejected():
    ev, warmup, context, router, live = _setup()
    plan = MigrationPlan(_Dropping(router, int(live.id[0])), [], [], [])
    with pytest.raises(InvalidPlanError, match=rf"loses 1 live subscription.*id {int(live.id[0])}"):
        validate_plan(plan, router, live, router.n_workers)


def test_an_accepted_plan_reports_exactly_the_declared_moves():
    ev, warmup, context, router, live = _setup()
    owner = router.unit_owner()
    occupied = np.unique(router.units(live, np.arange(len(live)))[1])
    new_owner = _undeclared_owner(router, live, occupied, np.random.default_rng(0))
    plan = reassignment(router, new_owner)
    assert len(plan.unit) == 1 and plan.src[0] == owner[plan.unit[0]]
    placement = validate_plan(plan, router, live, router.n_workers)
    r, u = router.units(live, np.arange(len(live)))
    expected = np.unique(r[u == plan.unit[0]])
    assert len(placement.moved) > 0
    assert set((placement.moved % router.n_workers).tolist()) == {int(plan.dst[0])}
    assert set(placement.moved_rows(router.n_workers)) <= set(expected)


def test_live_queries_are_inserted_and_not_yet_deleted():
    ev = random_stream(5, n_objects=100, n_queries=60)
    cut = len(ev) // 2
    live = live_queries(ev, cut)
    ids = set(live.id.tolist())
    for i in range(cut):
        if ev.kind[i] == INSERT:
            deleted = any(ev.kind[j] == 2 and ev.id[j] == ev.id[i] for j in range(cut))
            assert (ev.id[i] in ids) == (not deleted)


def test_the_workers_the_load_leaves_stall_for_what_the_adjuster_says_they_decide():
    from harness.engine.epochs import Step, migration_pause
    from harness.engine.migration import MigrationResult

    mig = MigrationResult(moved_queries=3, moved_bytes=300, pause_s={0: 0.002, 1: 0.003}, job_s=0.1)
    plan = lambda info: MigrationPlan(None, np.array([4]), np.array([0]), np.array([1]), info)  # noqa: E731
    # no stall_s: the whole plan step (select_s) stalls the source worker, as before
    assert migration_pause(Step(plan({}), 0.5), mig) == {0: pytest.approx(0.502), 1: 0.003}
    # stall_s given (PS2Stream: Phase I trials + Phase II selection): only that
    assert migration_pause(Step(plan({"stall_s": 0.01}), 0.5), mig) == {0: pytest.approx(0.012), 1: 0.003}
