"""Tornado's A-Grid adjustment (strategies/tornado/adjust.py) and the A-Grid's migration units
(strategies/tornado/agrid.py): the aggregate split search against brute force, the geometry of every
operation (rectangles that still tile the grid once), the C_r > C_t rule, summaries that follow
moved cells, and an end-to-end drift run in the in-process simulator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from harness.core.events import AND, DELETE, INSERT, OBJECT, OR, Events
from harness.engine.simulate import simulate
from strategies.adjust_base import UNIT_COLUMNS, EpochStats, get_adjuster
from strategies.tornado.agrid import AGridStrategy
from strategies.tornado.agrid_build import kd_partition
from strategies.tornado.agrid_router import AGridRouter
from strategies.base import FitContext
from harness.core.grid import UniformGrid
from strategies.tornado.adjust import (
    Aggregates,
    Candidate,
    TornadoAdjuster,
    best_split,
    corner_rects,
    mergeable_pairs,
    shifted_rects,
    split_rect,
)
from tests.streams import events_from_lists, random_stream

ROOT = Path(__file__).resolve().parents[3]
CTX = FitContext((0.0, 0.0, 100.0, 100.0), np.ones(16), 0)


def paint(rects, nx, ny):
    cover = np.zeros((ny, nx), np.int64)
    for x0, y0, x1, y1 in np.asarray(rects).tolist():
        assert x0 <= x1 and y0 <= y1, (x0, y0, x1, y1)
        cover[y0 : y1 + 1, x0 : x1 + 1] += 1
    return cover


def make_adjuster(**params) -> TornadoAdjuster:
    return TornadoAdjuster(TornadoAdjuster.make_params(params), 4, CTX, "agrid")


def make_stats(cost: np.ndarray, queries: np.ndarray, owner: np.ndarray, n_workers: int, epoch: int = 1) -> EpochStats:
    """Unit statistics with the given per-cell checks and stored queries (objects, updates zero)."""
    unit = np.flatnonzero((cost > 0) | (queries > 0))
    cols = {c: np.zeros(len(unit)) for c in UNIT_COLUMNS}
    cols.update(unit=unit, worker=owner[unit], checks=cost[unit], queries=queries[unit], load=cost[unit])
    units = pd.DataFrame(cols).astype({"unit": np.int64, "worker": np.int64})
    workers = pd.DataFrame({"worker": np.arange(n_workers), "load": np.bincount(owner[unit], cost[unit], n_workers)})
    return EpochStats(epoch, units, workers, Events.empty(), Events.empty(), n_workers)


def router_of(rects, nx, ny, n_workers=None) -> AGridRouter:
    rects = np.asarray(rects, np.int64)
    n_workers = n_workers or len(rects)
    return AGridRouter(n_workers, UniformGrid.over((0.0, 0.0, 100.0, 100.0), nx, ny), rects,
                       np.arange(len(rects)) % n_workers)


# --- registration ---------------------------------------------------------------------------------


def test_registered_with_yaml_defaults_equal_to_params():
    assert get_adjuster("tornado") is TornadoAdjuster
    assert TornadoAdjuster.applies_to("agrid") and not TornadoAdjuster.applies_to("grid")
    conf = yaml.safe_load((ROOT / "conf/adjust/tornado.yaml").read_text())
    assert conf["name"] == "tornado"
    assert conf["params"] == vars(TornadoAdjuster.Params())
    with pytest.raises(ValueError, match="unknown cost"):
        make_adjuster(cost="nope")


# --- the split search (section 4.3) ---------------------------------------------------------------


@pytest.mark.parametrize("seed", range(12))
def test_best_split_from_aggregates_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    h, w = rng.integers(1, 9, 2)
    if h == w == 1:
        w = 2
    cost = rng.pareto(1.0, (h, w)) * (rng.random((h, w)) < 0.5)
    if seed % 3 == 0:
        cost = np.round(cost)  # integer costs: ties between cuts
    axis, k, c1, c2 = best_split(cost.sum(axis=0), cost.sum(axis=1))
    brute = [(abs(cost[:, : j + 1].sum() - cost[:, j + 1 :].sum()), 0, j) for j in range(w - 1)]
    brute += [(abs(cost[: j + 1].sum() - cost[j + 1 :].sum()), 1, j) for j in range(h - 1)]
    best = min(b[0] for b in brute)
    first = cost[:, : k + 1] if axis == 0 else cost[: k + 1]
    assert c1 == pytest.approx(first.sum()) and c1 + c2 == pytest.approx(cost.sum())
    assert abs(c1 - c2) == pytest.approx(best)
    assert best_split(np.ones(1), np.ones(1)) is None


def test_split_takes_the_balanced_axis():
    # as in the paper's Fig. 5 example: the best vertical cut leaves a difference, a horizontal one none
    cost = np.array([[4.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 3.0]])
    assert best_split(cost.sum(axis=0), cost.sum(axis=1)) == (1, 0, 4.0, 4.0)
    assert best_split(cost.sum(axis=0), np.ones(1)) == (0, 1, 5.0, 3.0)  # vertical ties: the middle cut
    assert split_rect((2, 3, 5, 6), 0, 1) == ((2, 3, 3, 6), (4, 3, 5, 6))
    assert split_rect((2, 3, 5, 6), 1, 2) == ((2, 3, 5, 5), (2, 6, 5, 6))


# --- geometry --------------------------------------------------------------------------------------


def test_corner_shift_is_the_l_recut_of_the_notes():
    # notes A12: A=[0..4]x[0..5], B=[5..7]x[0..2] -> A'=[0..4]x[3..5], B'=[0..7]x[0..2]
    block, a_new, b_new = corner_rects((0, 0, 4, 5), (5, 0, 7, 2), "right")
    assert block == (0, 0, 4, 2) and a_new == (0, 3, 4, 5) and b_new == (0, 0, 7, 2)
    assert corner_rects((0, 0, 4, 5), (5, 0, 7, 5), "right") is None  # entire side: a shift, not a corner
    assert corner_rects((0, 0, 4, 5), (5, 1, 7, 3), "right") is None  # not aligned with an end: no L
    assert corner_rects((0, 0, 4, 5), (5, 0, 7, 8), "right") is None  # B longer: X would grow
    block, a_new, b_new = corner_rects((2, 2, 6, 4), (4, 0, 6, 1), "above")
    assert block == (4, 2, 6, 4) and a_new == (2, 2, 3, 4) and b_new == (4, 0, 6, 4)


def test_shift_moves_strips_along_the_shared_side():
    assert shifted_rects((0, 0, 5, 3), (6, 0, 9, 3), "right", 2) == ((0, 0, 3, 3), (4, 0, 9, 3))
    assert shifted_rects((4, 0, 9, 3), (0, 0, 3, 3), "left", 1) == ((5, 0, 9, 3), (0, 0, 4, 3))
    assert shifted_rects((0, 0, 3, 5), (0, 6, 3, 9), "below", 3) == ((0, 0, 3, 2), (0, 3, 3, 9))
    assert shifted_rects((0, 4, 3, 9), (0, 0, 3, 3), "above", 2) == ((0, 6, 3, 9), (0, 0, 3, 5))


@pytest.mark.parametrize("seed", range(6))
def test_every_candidate_keeps_rectangles_that_tile_the_grid_once(seed):
    rng = np.random.default_rng(seed)
    nx, ny = int(rng.integers(6, 12)), int(rng.integers(6, 12))
    n_parts = int(rng.integers(3, 10))
    rects = kd_partition(rng.random(nx * ny) + 0.1, nx, ny, n_parts)
    adj = make_adjuster()
    ops = set()
    for p in range(len(rects)):  # make each partition the costliest in turn
        c = rng.random((ny, nx))
        x0, y0, x1, y1 = rects[p]
        c[y0 : y1 + 1, x0 : x1 + 1] += 50.0 * rng.random((y1 - y0 + 1, x1 - x0 + 1))
        cost, q = Aggregates(c.ravel(), nx, ny), Aggregates(rng.random(nx * ny), nx, ny)
        for cand in adj.candidates(rects, cost, q):
            new = rects.copy()
            for pid, r in cand.changes.items():
                new[pid] = r
            assert (paint(new, nx, ny) == 1).all(), cand
            assert cand.info["x"] == p
            pc_before, pc_after = cost.sum(rects), cost.sum(new)
            changed = list(cand.changes)
            # C_r (exact) = max over the partitions involved, before - after (Eq. 4)
            assert cand.exact_c_r == pytest.approx(pc_before[p] - pc_after[changed].max())
            ops.add(cand.op)
    assert "split_merge" in ops or len(mergeable_pairs(rects)[0]) == 0


def test_shift_position_balances_the_two_costs_like_brute_force():
    nx, ny = 8, 3
    rects = np.array([[0, 0, 5, 2], [6, 0, 7, 2]])
    rng = np.random.default_rng(3)
    c = rng.random((ny, nx))
    c[:, :6] += np.array([5.0, 1.0, 4.0, 0.5, 2.0, 3.0])
    cost, q = Aggregates(c.ravel(), nx, ny), Aggregates(np.ones(nx * ny), nx, ny)
    adj = make_adjuster(split_merge=False, corner_shift=False)
    (cand,) = adj.candidates(rects, cost, q)
    cx, cb = c[:, :6].sum(), c[:, 6:].sum()
    after = [max(c[:, : 6 - k].sum(), cb + c[:, 6 - k : 6].sum()) for k in range(1, 6)]
    k = int(np.argmin(after)) + 1
    assert cand.op == "shift" and cand.info["strips"] == k and cand.info["side"] == "right"
    assert cand.exact_c_r == pytest.approx(cx - min(after))
    assert cand.exact_c_t == pytest.approx(3.0 * k)  # beta = 1 x one query per moved cell
    # the decision uses the paper's estimates (section 4.3)
    assert cand.c_r == pytest.approx(cx - (cx + cb) / 2)
    assert cand.c_t == pytest.approx(18.0 * cand.c_r / cx)


# --- the decision (section 4.2) -------------------------------------------------------------------


def test_choose_takes_the_largest_reduction_above_the_transfer_overhead():
    adj = make_adjuster()
    mk = lambda op, r, t, exact=1.0: Candidate(op, r, t, exact, t, {}, {})
    pick = adj.choose([mk("a", 10, 20), mk("b", 5, 1), mk("c", 8, 7), mk("d", 9, 9), mk("e", 9.5, 1, exact=0.0)], 100)
    assert pick.op == "c"  # a: C_r < C_t; d: C_r == C_t is not enough; e: its exact shift cannot help
    assert adj.choose([mk("a", 1, 2)], 100) is None
    assert make_adjuster(min_reduction=0.09).choose([mk("b", 5, 1), mk("c", 8, 7)], 100) is None


def three_partitions():
    """X = left half with all the cost; Y above Z on the right (mergeable), nearly idle."""
    nx, ny = 8, 8
    router = router_of([[0, 0, 3, 7], [4, 0, 7, 3], [4, 4, 7, 7]], nx, ny)
    cost = np.zeros((ny, nx))
    cost[:, :4] = 10.0
    cost[:, 4:] = 0.5
    queries = np.ones((ny, nx))
    queries[:, 2:4] = 3.0  # X's right half holds more queries: the left half is the one that moves
    return router, cost.ravel(), queries.ravel()


def test_split_merge_moves_the_half_with_fewer_queries_to_the_freed_worker():
    router, cost, queries = three_partitions()
    adj = make_adjuster(shift=False, corner_shift=False)
    plan = adj.adjust(router, make_stats(cost, queries, router.unit_owner(), 3))
    info = plan.info
    assert info["operation"] == "split_merge" and info["x"] == 0 and info["axis"] == "vertical"
    new = plan.router
    assert (new.part_worker == router.part_worker).all()
    assert (paint(new.part_rect, 8, 8) == 1).all()
    z, y = info["z"], info["y"]
    assert new.part_rect[y].tolist() == [4, 0, 7, 7]  # Y u Z
    assert new.part_rect[z].tolist() == [0, 0, 1, 7]  # X2 = X's left half (fewer queries), on Z's worker
    assert new.part_rect[0].tolist() == [2, 0, 3, 7]
    # Eq. 4 and Eq. 5
    assert info["c_r"] == pytest.approx(320 - max(160, 160, 32))
    assert info["c_t"] == pytest.approx(16 + 16)
    # the plan names exactly the cells whose worker changed, with their old and new workers
    old, now = router.unit_owner(), new.unit_owner()
    assert sorted(plan.unit.tolist()) == np.flatnonzero(old != now).tolist()
    assert (old[plan.unit] == plan.src).all() and (now[plan.unit] == plan.dst).all()


def test_transfer_overhead_above_the_reduction_blocks_every_operation():
    router, cost, queries = three_partitions()
    stats = make_stats(cost, queries, router.unit_owner(), 3)
    assert make_adjuster(beta=1000.0).adjust(router, stats) is None
    assert make_adjuster(beta=0.0).adjust(router, stats) is not None
    # C_t = beta x 32 against C_r = 160: just below and just above the threshold
    sm = {"shift": False, "corner_shift": False}
    assert make_adjuster(beta=160 / 32 - 0.01, **sm).adjust(router, stats) is not None
    assert make_adjuster(beta=160 / 32, **sm).adjust(router, stats) is None
    empty = make_stats(np.zeros(64), np.zeros(64), router.unit_owner(), 3)
    assert make_adjuster().adjust(router, empty) is None


def test_corner_shift_chosen_when_nothing_merges():
    # a pinwheel: no two partitions share an entire side, so only corner shifts exist
    nx, ny = 8, 8
    router = router_of([[0, 0, 5, 1], [6, 0, 7, 5], [2, 6, 7, 7], [0, 2, 1, 7], [2, 2, 5, 5]], nx, ny)
    assert len(mergeable_pairs(router.part_rect)[0]) == 0
    cost = np.full((ny, nx), 0.1)
    cost[:2, :6] = 3.0  # the top bar (partition 0, cost 36) is the costliest
    stats = make_stats(cost.ravel(), np.full(nx * ny, 0.1), router.unit_owner(), 5)
    plan = make_adjuster().adjust(router, stats)
    # its corner shifts: the block above the left bar (C_r = 36 - max(24, 1.2 + 12) = 12) or the one
    # above the centre (C_r = 36 - max(12, 1.6 + 24) = 10.4)
    assert plan.info["operation"] == "corner_shift" and plan.info["b"] == 3
    assert plan.info["c_r"] == pytest.approx(12.0) and plan.info["c_t"] == pytest.approx(0.4)
    assert plan.router.part_rect[0].tolist() == [2, 0, 5, 1] and plan.router.part_rect[3].tolist() == [0, 0, 1, 7]
    assert (paint(plan.router.part_rect, nx, ny) == 1).all()
    assert plan.info["cost_max_after"] < plan.info["cost_max_before"]
    assert make_adjuster(corner_shift=False).adjust(router, stats) is None


# --- units and summaries ---------------------------------------------------------------------------


def fitted(seed, n_workers=4):
    ev = random_stream(seed, n_objects=150, n_queries=50)
    st = AGridStrategy()
    router = st.fit(ev, n_workers, st.make_params({"cell_side": 10.0}), CTX)
    return ev, router


def pair_set(r, w):
    return set(zip(r.tolist(), w.tolist()))


@pytest.mark.parametrize("seed", range(4))
def test_units_match_routing_after_any_reassignment(seed):
    ev, router = fitted(seed)
    rows = np.arange(len(ev))
    qs, objs = rows[ev.kind != OBJECT], rows[ev.kind == OBJECT]
    base_obj = router.route_objects(ev, objs)
    rng = np.random.default_rng(seed)
    same = router.with_unit_owner(router.unit_owner())
    assert same.n_partitions == router.n_partitions and (same.part_rect == router.part_rect).all()
    for r in (router, router.with_unit_owner(rng.integers(0, 4, router.grid.n_cells))):
        ur, uu = r.units(ev, rows)
        owned = pair_set(ur, r.unit_owner()[uu])
        assert pair_set(*r.route_range(ev, qs)) == {p for p in owned if ev.kind[p[0]] != OBJECT}
        o_r, o_w = r.route_objects(ev, objs)
        assert pair_set(o_r, o_w) <= owned
        assert (o_r == base_obj[0]).all()  # fragments keep their partition's summary: same objects pass
        assert (paint(r.part_rect, r.grid.nx, r.grid.ny) == 1).all()


def test_new_partitions_inherit_the_summaries_of_the_cells_they_take():
    ev, router = fitted(7, n_workers=2)
    part, term, seq = router.summary_entries()
    rects = router.part_rect
    assert len(part) and len(rects) == 2
    side = "right" if rects[0, 2] + 1 == rects[1, 0] else "below"
    x_new, b_new = shifted_rects(rects[0], rects[1], side, 1)  # partition 0 gives one strip to 1
    new = router.with_partitions(np.array([x_new, b_new]), router.part_worker)
    npart, nterm, nseq = new.summary_entries()

    def summary(p_, t_, s_, pids):
        out = {}
        for p, t, s in zip(p_.tolist(), t_.tolist(), s_.tolist()):
            if p in pids:
                out[t] = min(s, out.get(t, s))
        return out

    assert summary(npart, nterm, nseq, {0}) == summary(part, term, seq, {0})  # kept its own cells only
    assert summary(npart, nterm, nseq, {1}) == summary(part, term, seq, {0, 1})  # X's summary copied in
    rows = np.flatnonzero(ev.kind == OBJECT)
    moved_obj = rows[np.isin(router.grid.cells_of(ev.x[rows], ev.y[rows]),
                             np.flatnonzero(router.unit_owner() != new.unit_owner()))]
    # an object in a moved cell passes the new owner's summary whenever it passed the old one's
    assert set(router.route_objects(ev, moved_obj)[0].tolist()) <= set(new.route_objects(ev, moved_obj)[0].tolist())


# --- end to end --------------------------------------------------------------------------------------


def drift_stream(seed=0, n=3500, warmup=1000, scale=0.5, extent=100.0, vocab=8) -> Events:
    """Uniform objects and range subscriptions; after the warm-up every coordinate is multiplied by
    `scale` (Tornado section 6.4), so the load crowds into the lower corner of the space."""
    rng = np.random.default_rng(seed)
    kinds, ids, xy, rects, terms, ops = [], [], [], [], [], []
    live, qn, on = [], 0, 0
    for i in range(n):
        s = scale if i >= warmup else 1.0
        r = rng.random()
        if live and r < 0.08:
            q = live.pop(int(rng.integers(len(live))))
            kinds.append(DELETE), ids.append(q[0]), xy.append(q[1]), rects.append(q[2]), terms.append(q[3])
            ops.append(q[4])
        elif r < 0.25:
            c = rng.uniform(0, extent, 2) * s
            h = rng.uniform(2, 6) * s
            t = sorted(set(rng.integers(0, vocab, int(rng.integers(1, 3))).tolist()))
            op = OR if len(t) > 1 and rng.random() < 0.5 else AND
            q = (qn, tuple(c), (c[0] - h, c[1] - h, c[0] + h, c[1] + h), t, op)
            qn += 1
            live.append(q)
            kinds.append(INSERT), ids.append(q[0]), xy.append(q[1]), rects.append(q[2]), terms.append(q[3])
            ops.append(q[4])
        else:
            kinds.append(OBJECT), ids.append(on), xy.append(tuple(rng.uniform(0, extent, 2) * s))
            rects.append((np.nan,) * 4)
            terms.append(sorted(set(rng.integers(0, vocab, int(rng.integers(1, 5))).tolist())))
            ops.append(AND)
            on += 1
    return events_from_lists(kinds, ids, xy, rects, terms, ops)


@pytest.mark.parametrize("summaries", [True, False])
def test_drift_triggers_adjustment_lowers_imbalance_and_keeps_results_exact(summaries):
    ev = drift_stream()
    ctx = FitContext((0.0, 0.0, 100.0, 100.0), np.bincount(ev.values).astype(np.float64), 0)

    def run(adjust, **p):
        return simulate(ev, 1000, "agrid", 4, epoch_events=250, adjust=adjust, adjust_params=p,
                        strategy_params={"summaries": summaries}, context=ctx)

    static, adaptive = run("none"), run("tornado", beta=0.1)
    assert static.exact and adaptive.exact
    assert len(adaptive.plans) >= 2 and sum(e["migrated_queries"] for e in adaptive.epochs) > 0
    assert {p.info["operation"] for p in adaptive.plans} <= {"split_merge", "shift", "corner_shift"}
    for p in adaptive.plans:
        assert p.info["c_r"] > p.info["c_t"] and p.info["cost_max_after"] < p.info["cost_max_before"]
    tail = slice(len(adaptive.epochs) // 2, None)
    imbalance = lambda res: np.mean([e["load_max_mean"] for e in res.epochs[tail]])
    assert imbalance(adaptive) < 0.85 * imbalance(static)
    assert (paint(adaptive.router.part_rect, adaptive.router.grid.nx, adaptive.router.grid.ny) == 1).all()
