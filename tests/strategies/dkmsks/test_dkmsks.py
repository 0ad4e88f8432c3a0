"""DkM-SKS, KOP and SOP (strategies/dkmsks/, strategies/routers/subscription_table.py): the cost
formulas against hand-computed values, Algorithms 2 and 3 on tiny cases, Eq. (7), and the routing
contract (objects broadcast, each subscription on exactly one worker, deletions follow insertions)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from harness.core.events import AND, DELETE, INSERT, OBJECT, RANGE, Events
from harness.core import allocate
from strategies import registry
from strategies.base import FitContext, route_stream
from strategies.dkmsks.cost import eq1_numerators, eq5_numerators, eq6_numerators
from strategies.dkmsks.counts import ObjectStats
from strategies.dkmsks.partition import SubsetPartition, assign_members, partition_subsets
from strategies.dkmsks.regions import RegionIndex, RegionTerms
from tests.streams import random_stream

NAMES = ["dkmsks", "kop", "sop"]


def csr(lists):
    off = np.zeros(len(lists) + 1, np.int64)
    np.cumsum([len(t) for t in lists], out=off[1:])
    vals = np.array([v for t in lists for v in t], np.int32)
    return off, vals


# O_init: four objects; o1 sits on the edge x = 2 of R below (closed rectangles include it).
OX = np.array([1.0, 2.0, 8.0, 9.0])
OY = np.array([1.0, 2.0, 8.0, 1.0])
OT = [[0, 1], [1], [0], [2]]
R = np.array([[0.0, 0.0, 2.0, 5.0]])


@pytest.fixture()
def stats():
    return ObjectStats(OX, OY, *csr(OT))


def test_eq1_keyword_cost_by_hand(stats):
    # P(0) = 2/4, P(1) = 2/4, P(2) = 1/4, P(7) = 0 (no object holds it)
    off, vals = csr([[0, 2], [1], [7]])
    np.testing.assert_allclose(stats.p(eq1_numerators(stats.term_count, off, vals)), [0.75, 0.5, 0.0])


def test_eq2_to_eq6_space_keyword_costs_by_hand(stats):
    assert stats.p(stats.rect_counts(R))[0] == 0.5  # Eq. (2): o0, o1 in R
    # Eq. (4): P(R, 0) = 1/4 (o0), P(R, 1) = 2/4 (o0, o1), P(R, 2) = 0 (o3 is outside R)
    np.testing.assert_allclose(stats.p(stats.rect_counts(np.repeat(R, 3, 0), [0, 1, 2])), [0.25, 0.5, 0.0])
    off, vals = csr([[0, 1], [1], [2]])
    # Eq. (5) with R for each: 0.25 + 0.5, 0.5, 0
    np.testing.assert_allclose(stats.p(eq5_numerators(stats, np.repeat(R, 3, 0), off, vals)), [0.75, 0.5, 0.0])
    # Eq. (6): the set {s1, s2} under R costs 1.25; {s3} under the whole plane costs P(2) = 0.25
    whole = np.array([[-100.0, -100.0, 100.0, 100.0]])
    got = eq6_numerators(stats, np.array([0, 0, 1]), np.concatenate([R, whole]), off, vals)
    np.testing.assert_allclose(stats.p(got), [1.25, 0.25])
    # Eq. (3) of SOP for S_r = {s1, s2}: P(R) * |S_r| = 1.0
    assert stats.p(stats.rect_counts(R))[0] * 2 == 1.0


def test_rect_counts_are_exact_against_brute_force():
    rng = np.random.default_rng(4)
    n = 3000
    x, y = rng.uniform(0, 100, n), rng.uniform(0, 50, n)
    terms = [sorted(set(rng.integers(0, 6, rng.integers(1, 4)).tolist())) for _ in range(n)]
    st = ObjectStats(x, y, *csr(terms))
    assert st.ny > 4  # several strips, so interior strips are counted by search
    lo = rng.uniform(-20, 100, (400, 2))
    rects = np.column_stack([lo[:, 0], lo[:, 1], lo[:, 0] + rng.uniform(0, 80, 400), lo[:, 1] + rng.uniform(0, 40, 400)])
    rects[:5] = [x[0], y[0], x[0], y[0]]  # degenerate rectangles on a point still count it
    lam = rng.integers(-1, 7, 400)
    lam[:5] = -1
    has = np.zeros((n, 8), bool)
    for i, t in enumerate(terms):
        has[i, np.array(t) + 1] = True
    has[:, 0] = True
    inside = ((x[None] >= rects[:, :1]) & (x[None] <= rects[:, 2:3]) & (y[None] >= rects[:, 1:2])
              & (y[None] <= rects[:, 3:4]))
    expect = (inside & has[:, lam + 1].T).sum(1)
    got = st.rect_counts(rects, np.where(lam < 0, -1, lam))
    np.testing.assert_array_equal(got, expect)
    assert got[0] >= 1


def test_algorithm1_on_the_papers_example_4():
    # S_1..S_4 cost 0.36, 0.11, 0.2, 0.28; m = 2: w1 = {S_1, S_2} (0.47), w2 = {S_3, S_4} (0.48)
    cost = np.array([0.36, 0.11, 0.2, 0.28])
    loads = np.zeros(2)
    got = allocate.greedy_least_loaded(np.argsort(-cost, kind="stable"), cost, loads)
    np.testing.assert_array_equal(got, [0, 0, 1, 1])
    np.testing.assert_allclose(loads, [0.47, 0.48])


def test_algorithm3_deals_members_of_costly_subsets_first():
    # subsets {a: 6, b: 4} (cost 10) and {c: 3, d: 1} (cost 4), m = 2:
    # a -> w0 (6), b -> w1 (4), c -> w1 (7), d -> w0 (7)
    part = SubsetPartition(subset_of=np.array([1, 0, 1, 0]), rects=np.zeros((2, 4)), cost=np.array([10, 4]),
                           member_cost=np.array([3, 6, 1, 4]), order_key=np.array([1, 0]), splits={})
    worker, loads = assign_members(part, 2)
    np.testing.assert_array_equal(worker, [1, 0, 0, 1])  # c, a, d, b
    np.testing.assert_allclose(loads, [7, 7])


def test_hybrid_greedy_separates_zero_cost_members():
    got = allocate.greedy_per_group(np.array([0, 0, 0, 0, 0, 1, 1]), np.array([5, 0, 0, 0, 0, 0, 0]), 4)
    np.testing.assert_array_equal(got, [0, 1, 2, 3, 1, 0, 1])


def brute_eq6(stats, members, rects, terms):
    r = np.array([rects[members, 0].min(), rects[members, 1].min(), rects[members, 2].max(), rects[members, 3].max()])
    inside = (OXS >= r[0]) & (OXS <= r[2]) & (OYS >= r[1]) & (OYS <= r[3])
    return sum(int(sum(1 for o in np.flatnonzero(inside) if lam in OTS[o])) for s in members for lam in terms[s])


OXS = OYS = OTS = None


def two_cluster_case(spread, jitter=2.0):
    """Four subscriptions near (10, 10), four near (90, 90), over objects near both."""
    global OXS, OYS, OTS
    rng = np.random.default_rng(1)
    OXS = np.concatenate([rng.uniform(0, 20, 50), rng.uniform(80, 100, 50)])
    OYS = np.concatenate([rng.uniform(0, 20, 50), rng.uniform(80, 100, 50)])
    OTS = [[int(t)] for t in rng.integers(0, 3, 100)]
    st = ObjectStats(OXS, OYS, *csr(OTS))
    cx = np.array([10, 10, 10, 10, 90, 90, 90, 90], float) + jitter * np.array([-1, 0, 1, 2] * 2)
    cy = cx.copy()
    rects = np.column_stack([cx - spread, cy - spread, cx + spread, cy + spread])
    terms = [[0], [1], [2], [0, 1], [0], [1], [2], [1, 2]]
    return st, cx, cy, rects, terms


def test_algorithm2_picks_space_only_for_small_disjoint_regions():
    # Hybrid's greedy mixes the two clusters (costs tie, so it deals in sample order), and a
    # mixed subset's R spans the whole space: Space-only is cheaper.
    st, cx, cy, rects, terms = two_cluster_case(spread=3.0, jitter=0.0)
    terms[:] = [[0]] * 8
    part = partition_subsets(st, cx, cy, rects, *csr(terms), (0.0, 0.0, 100.0, 100.0), target=2, gamma2=20)
    assert part.splits == {"space": 1, "hybrid": 0}
    assert len(part.cost) == 2  # the SW and NE quadrants
    groups = {tuple(np.flatnonzero(part.subset_of == k)) for k in range(2)}
    assert groups == {(0, 1, 2, 3), (4, 5, 6, 7)}
    for k in range(2):
        members = np.flatnonzero(part.subset_of == k)
        assert part.cost[k] == brute_eq6(st, members, rects, terms)


def test_algorithm2_picks_hybrid_when_regions_overlap_everything():
    st, cx, cy, rects, terms = two_cluster_case(spread=200.0)
    part = partition_subsets(st, cx, cy, rects, *csr(terms), (0.0, 0.0, 100.0, 100.0), target=2, gamma2=20)
    # every R is the whole space either way, so C_s == C_h, and ties go to Hybrid
    assert part.splits == {"space": 0, "hybrid": 1}
    assert len(part.cost) == 4
    assert part.cost.sum() == brute_eq6(st, np.arange(8), rects, terms)


def test_algorithm2_large_subsets_split_space_only():
    st, cx, cy, rects, terms = two_cluster_case(spread=200.0)
    part = partition_subsets(st, cx, cy, rects, *csr(terms), (0.0, 0.0, 100.0, 100.0), target=2, gamma2=4)
    assert part.splits == {"space": 1, "hybrid": 0}


def test_algorithm2_stops_at_gamma1_m_and_partitions_every_subscription():
    rng = np.random.default_rng(8)
    n = 60
    ox, oy = rng.uniform(0, 100, 400), rng.uniform(0, 100, 400)
    st = ObjectStats(ox, oy, *csr([[int(t)] for t in rng.integers(0, 5, 400)]))
    cx, cy = rng.uniform(0, 100, n), rng.uniform(0, 100, n)
    half = rng.uniform(1, 10, n)
    rects = np.column_stack([cx - half, cy - half, cx + half, cy + half])
    off, vals = csr([sorted(set(rng.integers(0, 5, 2).tolist())) for _ in range(n)])
    for target in (2, 7, 20):
        part = partition_subsets(st, cx, cy, rects, off, vals, (0.0, 0.0, 100.0, 100.0), target=target, gamma2=5)
        k = len(part.cost)
        assert target <= k <= target + 2  # the loop stops as soon as |collection| >= target
        assert np.bincount(part.subset_of, minlength=k).min() >= 1
        # every subset's R encloses its members, and its cost is Eq. (6) under that R
        for j in range(k):
            mem = np.flatnonzero(part.subset_of == j)
            np.testing.assert_allclose(part.rects[j], [rects[mem, 0].min(), rects[mem, 1].min(),
                                                       rects[mem, 2].max(), rects[mem, 3].max()])
        np.testing.assert_array_equal(part.cost, eq6_numerators(st, part.subset_of, part.rects, off, vals))


def test_algorithm2_shortcut_equals_the_grown_tree_when_it_ends_in_singletons():
    rng = np.random.default_rng(9)
    n = 40
    st = ObjectStats(rng.uniform(0, 100, 300), rng.uniform(0, 100, 300), *csr([[int(t)] for t in rng.integers(0, 4, 300)]))
    cx, cy = rng.uniform(0, 100, n), rng.uniform(0, 100, n)
    cx[:3] = cy[:3] = 50.0  # three at one point: only Hybrid can separate them
    rects = np.column_stack([cx - 5, cy - 5, cx + 5, cy + 5])
    off, vals = csr([sorted(set(rng.integers(0, 4, 2).tolist())) for _ in range(n)])
    fast = partition_subsets(st, cx, cy, rects, off, vals, (0.0, 0.0, 100.0, 100.0), target=1000, gamma2=2)
    tree = partition_subsets(st, cx, cy, rects, off, vals, (0.0, 0.0, 100.0, 100.0), target=1000, gamma2=2,
                             force_tree=True)
    assert len(tree.cost) == n  # every subset a singleton
    np.testing.assert_array_equal(tree.member_cost, fast.member_cost)
    np.testing.assert_array_equal(assign_members(tree, 3)[0], assign_members(fast, 3)[0])


def test_eq7_best_overlap_matches_brute_force():
    rng = np.random.default_rng(2)
    lo = rng.uniform(0, 100, (300, 2))
    subsets = np.column_stack([lo, lo + rng.uniform(0.5, 15, (300, 2))])
    ql = rng.uniform(-10, 110, (200, 2))
    queries = np.column_stack([ql, ql + rng.uniform(0.5, 20, (200, 2))])
    got = RegionIndex(subsets).best_overlap(queries)
    w = np.clip(np.minimum(queries[:, None, 2], subsets[None, :, 2]) - np.maximum(queries[:, None, 0], subsets[None, :, 0]), 0, None)
    h = np.clip(np.minimum(queries[:, None, 3], subsets[None, :, 3]) - np.maximum(queries[:, None, 1], subsets[None, :, 1]), 0, None)
    area = w * h
    expect = np.where(area.max(1) > 0, area.argmax(1), -1)
    np.testing.assert_array_equal(got, expect)
    assert (got >= 0).sum() > 50 and (got < 0).sum() > 0


def test_eq7_reference_cells_score_each_region_once_on_a_grid_aligned_layout():
    # regions and queries on a lattice: shared edges, equal areas (ties to the lower index), regions
    # spanning many cells of the index, and queries beyond the regions' bounding box
    rng = np.random.default_rng(3)
    lo = rng.integers(0, 20, (200, 2)).astype(float)
    subsets = np.column_stack([lo, lo + rng.integers(1, 8, (200, 2))])
    ql = rng.integers(-3, 22, (300, 2)).astype(float)
    queries = np.column_stack([ql, ql + rng.integers(0, 6, (300, 2))])
    index = RegionIndex(subsets)
    assert index.g > 4
    w = np.clip(np.minimum(queries[:, None, 2], subsets[None, :, 2]) - np.maximum(queries[:, None, 0], subsets[None, :, 0]), 0, None)
    h = np.clip(np.minimum(queries[:, None, 3], subsets[None, :, 3]) - np.maximum(queries[:, None, 1], subsets[None, :, 1]), 0, None)
    area = w * h
    expect = np.where(area.max(1) > 0, area.argmax(1), -1)  # argmax: the first (lowest) index of a tie
    np.testing.assert_array_equal(index.best_overlap(queries), expect)
    assert ((area == area.max(1, keepdims=True)) & (area > 0)).sum(1).max() > 1  # ties occurred


def brute_eq5(x, y, terms, rects, region, kw_lists):
    out = []
    for b, kws in zip(region, kw_lists):
        r = rects[b]
        inside = (x >= r[0]) & (x <= r[2]) & (y >= r[1]) & (y <= r[3])
        out.append(sum(sum(lam in terms[i] for i in np.flatnonzero(inside)) for lam in kws))
    return np.array(out)


@pytest.mark.parametrize("budget,per_subset,reverse", [(1 << 21, 10**6, False), (40, 10**6, False), (40, 10**6, True),
                                                       (1 << 21, 1, False)])
def test_region_term_lists_count_eq5_exactly_and_leave_the_rest_to_the_strips(budget, per_subset, reverse,
                                                                              monkeypatch):
    monkeypatch.setattr(RegionTerms, "BUDGET", budget)
    monkeypatch.setattr(RegionTerms, "ENTRIES_PER_SUBSET", per_subset)  # the budget: 1 x 80 subsets
    monkeypatch.setattr(RegionTerms, "MAX_OBJECTS", 25)
    rng = np.random.default_rng(8)
    n = 600
    x, y = rng.uniform(0, 100, n), rng.uniform(0, 100, n)
    terms = [sorted(set(rng.integers(0, 9, rng.integers(1, 4)).tolist())) for _ in range(n)]
    st = ObjectStats(x, y, *csr(terms))
    lo = rng.uniform(0, 90, (80, 2))
    rects = np.column_stack([lo, lo + rng.uniform(0.5, 30, (80, 2))])  # some hold more than 25 objects
    table = RegionTerms(st, rects, *csr(terms), layout=np.arange(80)[::-1] if reverse else None)
    n_in = st.rect_counts(rects)
    assert (n_in > 25).any() and (n_in <= 25).sum() > 10
    if budget > 1000 and per_subset > 1000:
        np.testing.assert_array_equal(table.listed, n_in <= 25)
    else:  # the budget stops the listing: the regions with the fewest objects, within it
        eligible = n_in <= 25
        assert 0 < table.listed.sum() < eligible.sum() and len(table.t_key) <= min(budget, per_subset * 80)
        assert n_in[table.listed].max() <= n_in[eligible & ~table.listed].min()
    region = rng.integers(-1, 80, 300)
    kw_lists = [sorted(set(rng.integers(0, 11, rng.integers(1, 4)).tolist())) for _ in range(300)]
    off, vals = csr(kw_lists)
    num, done = table.counts(region, off, vals)
    np.testing.assert_array_equal(done, (region >= 0) & table.listed[np.maximum(region, 0)])
    np.testing.assert_array_equal(num[done], brute_eq5(x, y, terms, rects, region[done],
                                                       [kw_lists[i] for i in np.flatnonzero(done)]))
    assert (num[~done] == 0).all() and num[done].max() > 0


def test_dkmsks_new_subscription_costs_equal_eq5_under_the_best_overlapping_subset():
    ev = random_stream(11, n_objects=300, n_queries=120, delete_fraction=0.0)
    router = fit("dkmsks", ev, len(ev) // 2, 4)
    ev = Events.concat([ev, one_event(INSERT, 9999, int(ev.seq.max()) + 1, 500, 500, 1, [1])])  # overlaps none
    rows = np.flatnonzero(ev.kind == INSERT)
    own = np.column_stack([ev.xmin[rows], ev.ymin[rows], ev.xmax[rows], ev.ymax[rows]])
    best = router.index.best_overlap(own)
    r_star = np.where((best >= 0)[:, None], router.index.rects[np.maximum(best, 0)], own)
    lists = [ev.values[ev.offsets[r]:ev.offsets[r + 1]].tolist() for r in rows]
    expect = eq5_numerators(router.stats, r_star, *csr(lists))
    np.testing.assert_allclose(router.new_costs(ev, rows), np.maximum(router.stats.p(expect), router.cost_floor))
    assert router.terms.listed.any() and (best < 0).any()  # both the listed and the strip path ran


def fit(name, ev, cut, n_workers):
    cls = registry.get(name)
    df = np.bincount(ev.values, minlength=12).astype(float)
    return cls().fit(ev.take(np.arange(cut)), n_workers, cls.make_params({}), FitContext((0.0, 0.0, 100.0, 100.0), df))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed,n_workers", [(0, 2), (1, 3), (2, 5), (3, 16)])
def test_routing_contract(name, seed, n_workers):
    ev = random_stream(seed, n_objects=120, n_queries=60)
    router = fit(name, ev, len(ev) // 3, n_workers)
    rows, workers = route_stream(router, ev)
    obj = np.flatnonzero(ev.kind == OBJECT)
    for r in obj[:20]:  # objects are broadcast
        assert sorted(workers[rows == r].tolist()) == list(range(n_workers))
    assert np.isin(obj, rows).all() and (np.bincount(rows, minlength=len(ev))[obj] == n_workers).all()
    q = np.flatnonzero(ev.kind != OBJECT)
    assert (np.bincount(rows, minlength=len(ev))[q] == 1).all()  # one worker per query event
    w_of = dict(zip(rows[np.isin(rows, q)].tolist(), workers[np.isin(rows, q)].tolist()))
    ins = {int(ev.id[r]): w_of[r] for r in np.flatnonzero(ev.kind == INSERT)}
    for r in np.flatnonzero(ev.kind == DELETE):
        assert w_of[r] == ins[int(ev.id[r])]
    # C(w) is the sum of the live subscriptions' costs
    live = router.e_live
    np.testing.assert_allclose(router.loads, np.bincount(router.e_worker[live], router.e_cost[live], n_workers),
                               atol=1e-9)


@pytest.mark.parametrize("name", NAMES)
def test_a_stream_observed_in_small_epochs_leaves_the_table_of_one_epoch(name):
    """The log grows by appending into buffers that double and links new entries into a qid
    directory with room to spare; epochs of a few events each (many growths, links past the
    directory, rebuilds) end in the same table, loads and routing as the stream in one epoch."""
    first = random_stream(9, n_objects=300, n_queries=150)
    again = Events(dict(first.cols), first.offsets, first.values)  # every qid inserted a second time
    again.cols["seq"] = first.seq + len(first)
    again.cols["ts"] = first.ts + len(first)
    ev = Events.concat([first, again])
    cut = len(first) // 2
    whole, pieces = fit(name, ev, cut, 4), fit(name, ev, cut, 4)
    rest = np.arange(cut, len(ev))
    whole.observe_inserts(ev, rest[ev.kind[rest] == INSERT])
    for part in np.array_split(rest, 40):
        pieces.observe_inserts(ev, part[ev.kind[part] == INSERT])
    for col in ("e_qid", "e_seq", "e_worker", "e_cost", "e_live", "e_prev"):
        np.testing.assert_array_equal(getattr(whole, col), getattr(pieces, col), err_msg=col)
    np.testing.assert_allclose(whole.loads, pieces.loads)
    for a, b in zip(whole.route(ev), pieces.route(ev)):
        np.testing.assert_array_equal(a, b)
    assert len(pieces._log["e_qid"]) >= pieces.n_entries > cut // 4  # the buffers hold the whole log
    relinked = copy.deepcopy(pieces)  # the chains linked epoch by epoch are those of one rebuild
    relinked._reindex()
    np.testing.assert_array_equal(relinked.e_prev, pieces.e_prev)


def one_event(kind, qid, seq, x, y, half, terms):
    cols = {"seq": np.array([seq]), "ts": np.array([float(seq)]), "kind": np.array([kind], np.int8),
            "family": np.array([RANGE if kind != OBJECT else -1], np.int8), "id": np.array([qid]),
            "x": np.array([x]), "y": np.array([y]), "xmin": np.array([x - half]), "ymin": np.array([y - half]),
            "xmax": np.array([x + half]), "ymax": np.array([y + half]), "op": np.array([AND], np.int8),
            "k": np.zeros(1, np.int32), "alpha": np.zeros(1, np.float32)}
    return Events(cols, np.array([0, len(terms)]), np.array(terms, np.int32))


@pytest.mark.parametrize("name", NAMES)
def test_online_insertions_go_to_the_least_loaded_worker_and_deletions_free_it(name):
    ev = random_stream(5, n_objects=150, n_queries=40, delete_fraction=0.0)
    router = fit(name, ev, len(ev), 4)
    base = int(ev.seq.max()) + 1
    extra = Events.concat([one_event(INSERT, 1000, base, 50, 50, 5, [1, 2]),
                           one_event(INSERT, 1001, base + 1, 20, 20, 30, [0]),
                           one_event(DELETE, 1000, base + 2, 50, 50, 5, [1, 2]),
                           one_event(INSERT, 1002, base + 3, 70, 70, 2, [3]),
                           one_event(DELETE, 1002, base + 4, 70, 70, 2, [3]),
                           one_event(INSERT, 1000, base + 5, 10, 10, 2, [4])])  # the same qid again
    loads = router.loads.copy()
    expect = []
    costs = router.new_costs(extra, np.array([0, 1, 3, 5]))
    it = iter(costs)
    placed = {}
    for i in range(len(extra)):
        if extra.kind[i] == INSERT:
            w = int(np.argmin(loads))
            c = next(it)
            loads[w] += c
            placed[int(extra.id[i])] = (w, c)
            expect.append(w)
        else:
            w, c = placed[int(extra.id[i])]
            loads[w] -= c
            expect.append(w)
    router.observe_inserts(extra, np.flatnonzero(extra.kind == INSERT))
    router.observe_inserts(extra, np.flatnonzero(extra.kind == INSERT))  # idempotent
    rows, workers = router.route_queries(extra, np.arange(len(extra)))
    np.testing.assert_array_equal(workers[np.argsort(rows)], expect)
    np.testing.assert_allclose(router.loads, loads)
    # the deletion of qid 1000 went where its first insertion went, not where the re-insertion did
    assert workers[np.argsort(rows)][2] == expect[0]


@pytest.mark.parametrize("name", NAMES)
def test_fit_and_routing_are_deterministic(name):
    ev = random_stream(7, n_objects=150, n_queries=60)
    a, b = fit(name, ev, len(ev) // 2, 5), fit(name, ev, len(ev) // 2, 5)
    assert a.describe() == b.describe()
    for x, y in zip(route_stream(a, ev), route_stream(b, ev)):
        np.testing.assert_array_equal(x, y)


def test_unobserved_subscriptions_fall_back_to_one_hashed_worker():
    ev = random_stream(4, n_objects=100, n_queries=50)
    router = fit("dkmsks", ev, 10, 6)
    q = np.flatnonzero(ev.kind != OBJECT)
    rows, w = router.route_queries(ev, q)  # no observe_inserts: later qids are unknown
    assert np.array_equal(rows, q) and w.min() >= 0 and w.max() < 6
    by_qid = {}
    for r, wk in zip(rows.tolist(), w.tolist()):
        assert by_qid.setdefault(int(ev.id[r]), wk) == wk


@pytest.mark.parametrize("name", NAMES)
def test_sparse_qids_route_like_dense_ones(name):
    ev = random_stream(6, n_objects=120, n_queries=60)
    sparse = Events(dict(ev.cols), ev.offsets, ev.values)
    is_q = ev.kind != OBJECT
    sparse.cols["id"] = np.where(is_q, ev.id * 1_000_003 + 7, ev.id)  # too sparse for the dense table
    a, b = fit(name, ev, len(ev) // 3, 4), fit(name, sparse, len(ev) // 3, 4)
    ra, wa = route_stream(a, ev)
    rb, wb = route_stream(b, sparse)
    assert len(a.d_qid) == 0 and len(b.d_qid) > 0  # both lookup paths are exercised
    np.testing.assert_array_equal(ra, rb)
    np.testing.assert_array_equal(wa, wb)
