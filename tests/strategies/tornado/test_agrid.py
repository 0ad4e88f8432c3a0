"""Tornado's A-Grid (strategies/tornado/agrid.py): tiling, neighbour search against brute force, keyword
summaries (what they drop, how they grow with seq), the no-summary baseline, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.events import AND, INSERT, OBJECT, OR, RANGE, Events, unpack_keys
from harness.families.range.oracle import oracle_keys
from strategies.tornado.agrid import AGridStrategy
from strategies.tornado.agrid_build import fine_grid, kd_partition
from strategies.tornado.agrid_kernels import N_HOT
from strategies.tornado.agrid_router import AGridRouter
from strategies.base import FitContext, route_stream
from harness.core.grid import UniformGrid
from tests.streams import random_stream

EXTENT = (0.0, 0.0, 100.0, 100.0)


def make_events(items) -> Events:
    """items: (kind, id, x, y, rect or None, terms, op); seq = position."""
    n = len(items)
    rect = np.array([it[4] if it[4] is not None else (np.nan,) * 4 for it in items], np.float64).reshape(n, 4)
    kind = np.array([it[0] for it in items], np.int8)
    cols = {
        "seq": np.arange(n, dtype=np.int64), "ts": np.arange(n, dtype=np.float64), "kind": kind,
        "family": np.where(kind == OBJECT, -1, RANGE).astype(np.int8),
        "id": np.array([it[1] for it in items], np.int64),
        "x": np.array([it[2] for it in items], np.float64), "y": np.array([it[3] for it in items], np.float64),
        "xmin": rect[:, 0], "ymin": rect[:, 1], "xmax": rect[:, 2], "ymax": rect[:, 3],
        "op": np.array([it[6] for it in items], np.int8), "k": np.zeros(n, np.int32),
        "alpha": np.zeros(n, np.float32),
    }
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum([len(it[5]) for it in items], out=offsets[1:])
    values = np.array([t for it in items for t in sorted(it[5])], np.int32)
    return Events(cols, offsets, values)


def shifted(ev: Events, by: int) -> Events:
    """The same events with every term id + by: by >= N_HOT exercises the hash path of summaries,
    0 the dense path for frequent terms."""
    return Events(dict(ev.cols), ev.offsets, (ev.values + by).astype(np.int32))


TERM_SHIFTS = [0, N_HOT + 10]


def rect_events(rects) -> Events:
    return make_events([(INSERT, i, 0.0, 0.0, tuple(r), [0], OR) for i, r in enumerate(rects)])


def paint(rects, nx, ny):
    cover = np.zeros((ny, nx), np.int64)
    for x0, y0, x1, y1 in rects.tolist():
        cover[y0 : y1 + 1, x0 : x1 + 1] += 1
    return cover


PINWHEEL = np.array([[0, 0, 2, 0], [3, 0, 3, 2], [1, 3, 3, 3], [0, 1, 0, 3], [1, 1, 2, 2]])  # not guillotine


@pytest.mark.parametrize("n_parts", [1, 2, 3, 7, 16, 40])
def test_partitions_tile_the_grid_exactly(n_parts):
    rng = np.random.default_rng(n_parts)
    nx, ny = 13, 9
    cost = rng.pareto(1.0, nx * ny) * (rng.random(nx * ny) < 0.6)
    rects = kd_partition(cost, nx, ny, n_parts)
    assert len(rects) == n_parts
    assert (paint(rects, nx, ny) == 1).all()  # covered once: no gap, no overlap
    assert (rects[:, 2] >= rects[:, 0]).all() and (rects[:, 3] >= rects[:, 1]).all()


def test_kd_partition_skips_single_cells_and_balances():
    cost = np.zeros(16)
    cost[5] = 100.0  # one heavy cell that cannot be split further
    cost[10] = 1.0
    rects = kd_partition(cost, 4, 4, 16)
    assert len(rects) == 16 and (paint(rects, 4, 4) == 1).all()
    even = kd_partition(np.ones(64), 8, 8, 4)
    assert sorted(((r[2] - r[0] + 1) * (r[3] - r[1] + 1)) for r in even.tolist()) == [16, 16, 16, 16]


def test_fine_grid_uses_the_average_query_side_and_caps_it():
    g = fine_grid(EXTENT, 10.0, 1_000_000, 4)
    assert (g.nx, g.ny) == (10, 10)
    g = fine_grid(EXTENT, 0.01, 400, 4)
    assert g.nx * g.ny <= 400 and g.nx >= 19
    g = fine_grid(EXTENT, 500.0, 1_000_000, 9)  # huge queries: still room for 9 partitions
    assert g.nx >= 6 and g.ny >= 6


def brute_force_partitions(router, ev, rows):
    g = router.grid

    def cell(v, v0, inv, n):
        return np.clip(np.floor((v - v0) * inv), 0, n - 1).astype(np.int64)

    out = []
    for r in rows:
        rx0, rx1 = cell(ev.xmin[r], g.x0, g.inv_cw, g.nx), cell(ev.xmax[r], g.x0, g.inv_cw, g.nx)
        ry0, ry1 = cell(ev.ymin[r], g.y0, g.inv_ch, g.ny), cell(ev.ymax[r], g.y0, g.inv_ch, g.ny)
        pr = router.part_rect
        hit = (pr[:, 0] <= rx1) & (pr[:, 2] >= rx0) & (pr[:, 1] <= ry1) & (pr[:, 3] >= ry0)
        out.append(set(np.flatnonzero(hit).tolist()))
    return out


def random_rects(rng, n, nx, ny):
    """Rectangles in a 100 x 100 extent: random, snapped to cell boundaries, on the extent's edges,
    degenerate (points and lines), and sticking out of the extent."""
    cw, ch = 100.0 / nx, 100.0 / ny
    a = rng.uniform(-10, 110, (n, 2))
    b = a + rng.uniform(0, 60, (n, 2)) * (rng.random((n, 1)) < 0.8)
    rects = np.concatenate([a, b], axis=1)
    snap = rng.random(n) < 0.3
    rects[snap, 0::2] = np.round(rects[snap, 0::2] / cw) * cw
    rects[snap, 1::2] = np.round(rects[snap, 1::2] / ch) * ch
    edge = rng.random(n) < 0.15
    rects[edge, 2] = 100.0
    rects[edge, 3] = 100.0
    left = rng.random(n) < 0.15
    rects[left, 0] = 0.0
    rects[left, 1] = 0.0
    return rects


def kd_tiling(rng, nx, ny, n_parts):
    return kd_partition(rng.pareto(0.8, nx * ny), nx, ny, n_parts)


@pytest.mark.parametrize("case", range(12))
def test_neighbour_search_equals_brute_force(case):
    rng = np.random.default_rng(100 + case)
    if case == 0:
        nx = ny = 4
        rects = PINWHEEL
    else:
        nx, ny = int(rng.integers(1, 30)), int(rng.integers(1, 30))
        rects = kd_tiling(rng, nx, ny, int(rng.integers(1, min(nx * ny, 40) + 1)))
    n_workers = max(1, len(rects) // int(rng.integers(1, 4)))
    part_worker = rng.integers(0, n_workers, len(rects))
    router = AGridRouter(n_workers, UniformGrid.over(EXTENT, nx, ny), rects, part_worker, summaries=False)
    ev = rect_events(random_rects(rng, 300, nx, ny))
    rows = np.arange(len(ev), dtype=np.int64)
    expected = brute_force_partitions(router, ev, rows)
    pr, pp = router.range_partitions(ev, rows)
    got = [set() for _ in rows]
    for r, p in zip(pr.tolist(), pp.tolist()):
        assert p not in got[r], "a partition was emitted twice"
        got[r].add(p)
    assert got == expected
    wr, ww = router.route_range(ev, rows)
    got_w = [set() for _ in rows]
    for r, w in zip(wr.tolist(), ww.tolist()):
        assert w not in got_w[r], "a worker was emitted twice"
        got_w[r].add(w)
    assert got_w == [{int(part_worker[p]) for p in s} for s in expected]


def fit(ev, n_workers=4, **params):
    df = np.bincount(ev.values, minlength=N_HOT + 50).astype(float)
    cls = AGridStrategy
    return cls().fit(ev, n_workers, cls.make_params(params), FitContext(EXTENT, df, seed=1))


@pytest.mark.parametrize("by", TERM_SHIFTS)
def test_summary_keeps_and_query_least_frequent_term_and_or_query_all_terms(by):
    ev = make_events([
        (INSERT, 0, 0, 0, (0.0, 0.0, 100.0, 100.0), [1, 5], AND),  # summary gets 5 only
        (INSERT, 1, 0, 0, (0.0, 0.0, 100.0, 100.0), [2, 3], OR),  # summary gets 2 and 3
        (OBJECT, 0, 50, 50, None, [1], AND),  # cannot match the AND query: dropped
        (OBJECT, 1, 50, 50, None, [5], AND),  # passes the filter: a false positive the worker discards
        (OBJECT, 2, 50, 50, None, [1, 5], AND),
        (OBJECT, 3, 50, 50, None, [3, 9], AND),
        (OBJECT, 4, 50, 50, None, [4, 9], AND),  # no query term at all: dropped
        (OBJECT, 5, 50, 50, None, [], AND),
    ])
    ev = shifted(ev, by)
    router = fit(ev.take(np.arange(2)), n_workers=1)
    _, terms, seqs = router.summary_entries()
    assert sorted(terms.tolist()) == [2 + by, 3 + by, 5 + by] and set(seqs.tolist()) == {0, 1}
    obj = np.flatnonzero(ev.kind == OBJECT)
    rows, _ = router.route_objects(ev, obj)
    assert ev.id[rows].tolist() == [1, 2, 3]


@pytest.mark.parametrize("by", TERM_SHIFTS)
def test_summaries_are_per_partition(by):
    ev = make_events([
        (INSERT, 0, 0, 0, (0.0, 0.0, 20.0, 20.0), [7], AND),  # bottom-left corner only
        (OBJECT, 0, 10, 10, None, [7], AND),
        (OBJECT, 1, 90, 90, None, [7], AND),  # same term, a partition the query does not reach
    ])
    ev = shifted(ev, by)
    router = AGridRouter(2, UniformGrid.over(EXTENT, 10, 10), np.array([[0, 0, 4, 9], [5, 0, 9, 9]]),
                         np.array([0, 1]))
    router.observe_inserts(ev, np.array([0]))
    rows, workers = router.route_objects(ev, np.array([1, 2]))
    assert rows.tolist() == [1] and workers.tolist() == [0]


@pytest.mark.parametrize("by", TERM_SHIFTS)
def test_summaries_grow_with_observed_inserts_and_respect_seq(by):
    ev = make_events([
        (OBJECT, 0, 50, 50, None, [7], AND),  # seq 0: before the query
        (INSERT, 0, 0, 0, (40.0, 40.0, 60.0, 60.0), [7], AND),  # seq 1
        (OBJECT, 1, 50, 50, None, [7], AND),  # seq 2: after it
        (INSERT, 1, 0, 0, (40.0, 40.0, 60.0, 60.0), [7, 8], OR),  # seq 3: 7 again (keeps seq 1), 8 new
        (OBJECT, 2, 50, 50, None, [8], AND),  # seq 4
    ])
    ev = shifted(ev, by)
    router = fit(ev.take(np.zeros(0, np.int64)), n_workers=2)
    obj = np.flatnonzero(ev.kind == OBJECT)
    assert len(router.route_objects(ev, obj)[0]) == 0  # nothing observed yet: every object dropped
    router.observe_inserts(ev, np.array([1]))
    assert router.route_objects(ev, obj)[0].tolist() == [2]  # the older object does not use it
    router.observe_inserts(ev, np.array([3]))
    assert router.route_objects(ev, obj)[0].tolist() == [2, 4]
    _, terms, seqs = router.summary_entries()
    assert dict(zip(terms.tolist(), seqs.tolist())) == {7 + by: 1, 8 + by: 3}
    many = make_events([(INSERT, i, 0, 0, (0.0, 0.0, 100.0, 100.0), [i], OR) for i in range(200)])
    router.observe_inserts(many, np.arange(200))  # grows the hash table past its first capacity
    assert len(router.summary_entries()[0]) == 2 * len(set(range(200)) | {7 + by, 8 + by})  # both partitions


@pytest.mark.parametrize("by", TERM_SHIFTS)
def test_copy_summary_unions_into_the_target_partition(by):
    ev = shifted(make_events([(INSERT, 0, 0, 0, (0.0, 0.0, 20.0, 20.0), [3], OR), (OBJECT, 0, 90, 90, None, [3], AND)]), by)
    router = AGridRouter(2, UniformGrid.over(EXTENT, 10, 10), np.array([[0, 0, 4, 9], [5, 0, 9, 9]]),
                         np.array([0, 1]))
    router.observe_inserts(ev, np.array([0]))
    assert len(router.route_objects(ev, np.array([1]))[0]) == 0
    router.copy_summary(0, 1)
    assert router.route_objects(ev, np.array([1]))[1].tolist() == [1]


def test_without_summaries_every_object_goes_to_its_partition_worker():
    ev = random_stream(3, n_objects=200, n_queries=40)
    router = fit(ev, n_workers=5, summaries=False)
    obj = np.flatnonzero(ev.kind == OBJECT)
    rows, workers = router.route_objects(ev, obj)
    assert rows.tolist() == obj.tolist()
    g = router.grid
    cx = np.clip(np.floor((ev.x[obj] - g.x0) * g.inv_cw), 0, g.nx - 1).astype(int)
    cy = np.clip(np.floor((ev.y[obj] - g.y0) * g.inv_ch), 0, g.ny - 1).astype(int)
    assert workers.tolist() == router.part_worker[router.cell_part[cy * g.nx + cx]].tolist()
    with_summaries = fit(ev, n_workers=5)
    route_stream(with_summaries, ev)
    assert len(with_summaries.route_objects(ev, obj)[0]) < len(obj)  # the filter does drop some


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ppw", [1, 3])
@pytest.mark.parametrize("by", TERM_SHIFTS)
def test_every_matching_pair_meets_and_dropped_objects_match_nothing(seed, ppw, by):
    ev = shifted(random_stream(seed, n_objects=120, n_queries=40), by)
    sample = ev.take(np.arange(len(ev) // 3))
    router = fit(sample, n_workers=1 + seed % 6, partitions_per_worker=ppw)
    rows, workers = route_stream(router, ev)
    sets = [set() for _ in range(len(ev))]
    for r, w in zip(rows.tolist(), workers.tolist()):
        sets[r].add(w)
    ins = {int(ev.id[r]): r for r in np.flatnonzero(ev.kind == INSERT)}
    obj = {int(ev.id[r]): r for r in np.flatnonzero(ev.kind == OBJECT)}
    qids, oids = unpack_keys(oracle_keys(ev))
    for q, o in zip(qids.tolist(), oids.tolist()):
        assert sets[ins[q]] & sets[obj[o]]
    matched = set(oids.tolist())
    dropped = [o for o, r in obj.items() if not sets[r]]
    assert not matched & set(dropped)
    assert all(len(sets[r]) <= 1 for r in obj.values())  # an object goes to one worker at most


def test_fit_is_deterministic_and_describes_its_partitions():
    ev = random_stream(9, n_objects=200, n_queries=60)
    a, b = fit(ev, n_workers=6, partitions_per_worker=2), fit(ev, n_workers=6, partitions_per_worker=2)
    for name in ("cell_part", "part_rect", "part_worker"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    for x, y in zip(a.summary_entries(), b.summary_entries()):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(route_stream(a, ev), route_stream(b, ev)):
        np.testing.assert_array_equal(x, y)
    d = a.describe()
    assert len(d["partitions"]) == 12 and {p["worker"] for p in d["partitions"]} == set(range(6))
    assert a.size_bytes() >= a.cell_part.nbytes + a.sum_table.nbytes
