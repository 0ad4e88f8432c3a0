"""PS2Stream's kdt-tree (Algorithm 1) and its gridt router: the DP against brute force, the text
similarity split rule, PartitionNode's text-vs-space choice, the sigma balance loop, object
dropping, terms that appear after the fit, and determinism."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest

from harness.core.events import AND, DELETE, INSERT, OBJECT, OR, Events
from harness.families.range.oracle import oracle_keys
from strategies.base import FitContext, route_stream
from strategies.ps2stream.gridt import GridtRouter
from strategies.ps2stream.kdt import KdtStrategy
from strategies.ps2stream.kdt_load import Node, Sample, cosine, posting_products
from strategies.ps2stream.kdt_partition import (
    INF,
    balance_factor,
    compute_number_partitions,
    merge_nodes,
    partition_node,
    partition_workload,
    phase1,
)
from strategies.load import routing_terms
from harness.core.grid import UniformGrid
from tests.streams import item_events, random_stream

EXTENT = (0.0, 0.0, 100.0, 100.0)


def sample_of(items, cells=8) -> Sample:
    return Sample.of(item_events(items), UniformGrid.over(EXTENT, cells))


def root(s: Sample, label="s") -> Node:
    return Node(s, (0, s.nx - 1, 0, s.ny - 1), np.arange(s.n_objects), np.arange(s.n_queries), None, label)


# --- ComputeNumberPartitions -----------------------------------------------------------------------

def brute_force_parts(cost, m):
    best, arg = INF, None
    n = cost.shape[0]
    for ks in product(range(1, m + 1), repeat=n):
        if sum(ks) == m:
            v = sum(cost[i, k] for i, k in enumerate(ks))
            if v < best:
                best, arg = v, ks
    return best, arg


@pytest.mark.parametrize("seed", range(40))
def test_dp_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5))
    m = int(rng.integers(n, 8))
    cost = np.full((n, m + 1), INF)
    cost[:, 1:] = rng.integers(1, 50, size=(n, m)).astype(float)
    cost[rng.random((n, m + 1)) < 0.2] = INF  # some cuts impossible
    cost[:, 0] = INF
    best, _ = brute_force_parts(cost, m)
    parts = compute_number_partitions(cost, m)
    if best == INF:
        assert parts is None
    else:
        assert sum(parts) == m and min(parts) >= 1
        assert sum(cost[i, k] for i, k in enumerate(parts)) == best


def test_dp_prefers_cutting_the_node_whose_cuts_are_cheap():
    # node 0 gains nothing from being cut, node 1 halves its load with every extra part
    cost = np.array([[INF, 100, 100, 100, 100], [INF, 80, 40, 27, 20]])
    assert compute_number_partitions(cost, 4) == [1, 3]


# --- Phase 1: the cosine split rule -------------------------------------------------------------------

def test_cosine():
    assert cosine([1, 2, 0], [2, 4, 0]) == pytest.approx(1.0)
    assert cosine([1, 0], [0, 3]) == 0.0
    assert cosine([0, 0], [1, 1]) == 1.0  # an empty side counts as similar


def two_halves(n=40):
    """Left half: objects and queries share terms {0, 1}; right half: queries ask for {5, 6},
    which no object there holds."""
    rng = np.random.default_rng(0)
    items = []
    for i in range(n):
        x, y = rng.uniform(1, 48), rng.uniform(1, 99)
        items.append(("o", x, y, [i % 2]))
        items.append(("o", x + 50, y, [2 + i % 2]))
        items.append(("q", (x - 1, y - 1, x + 1, y + 1), [i % 2], AND))
        items.append(("q", (x + 49, y - 1, x + 51, y + 1), [5 + i % 2], AND))
    return sample_of(items)


def test_similar_root_goes_to_ns_unsplit():
    s = two_halves()
    n_t, n_s = phase1(s, delta=0.3, tolerance=0.05, theta=64, min_split_objects=2)
    assert n_t == [] and len(n_s) == 1 and n_s[0].region == (0, 7, 0, 7)


def test_dissimilar_half_is_isolated_into_nt():
    s = two_halves()
    n_t, n_s = phase1(s, delta=0.6, tolerance=0.05, theta=64, min_split_objects=2)
    # the root (sim ~0.5 < 0.6) splits at x = 50, the split that makes one side dissimilar
    assert [n.region for n in n_s] == [(0, 3, 0, 7)]
    assert [n.region for n in n_t] == [(4, 7, 0, 7)]  # uniform inside: alpha == sim, kept whole
    assert all(n.label == "t" for n in n_t) and all(n.label == "s" for n in n_s)


def test_consistent_dissimilar_node_is_not_split():
    items = [("o", x, y, [1]) for x in range(5, 100, 10) for y in range(5, 100, 10)]
    items += [("q", (x - 2, y - 2, x + 2, y + 2), [9], AND) for x in range(5, 100, 10) for y in range(5, 100, 10)]
    n_t, n_s = phase1(sample_of(items), delta=0.5, tolerance=0.05, theta=64, min_split_objects=2)
    assert len(n_t) == 1 and n_s == [] and n_t[0].region == (0, 7, 0, 7)


def test_phase1_respects_theta():
    s = two_halves()
    n_t, n_s = phase1(s, delta=0.99, tolerance=0.0, theta=3, min_split_objects=2)
    assert len(n_t) + len(n_s) <= 3


# --- PartitionNode: text or space, by workload ----------------------------------------------------------

def grid_points(k=8):
    return [((i + 0.5) * 100 / k, (j + 0.5) * 100 / k) for i in range(k) for j in range(k)]


def test_partition_node_picks_text_when_queries_span_the_region():
    # every query covers the whole space: a space cut duplicates them all, a text cut duplicates nothing
    pts = grid_points()
    items = [("o", x, y, [i % 8]) for i, (x, y) in enumerate(pts)]
    items += [("q", (0, 0, 100, 100), [i % 8], AND) for i in range(16)]
    kids = partition_node(root(sample_of(items)), 2)
    assert all(k.terms is not None for k in kids) and all(k.region == (0, 7, 0, 7) for k in kids)
    assert sorted(np.concatenate([k.terms for k in kids]).tolist()) == list(range(8))


def test_partition_node_picks_space_when_objects_hold_every_keyword():
    # tiny queries, objects holding all 8 keywords: a text cut would send every object twice
    pts = grid_points()
    items = [("o", x, y, list(range(8))) for x, y in pts]
    items += [("q", (x - 1, y - 1, x + 1, y + 1), [i % 8], AND) for i, (x, y) in enumerate(pts)]
    s = sample_of(items)
    kids = partition_node(root(s), 2)
    assert all(k.terms is None for k in kids) and len({k.region for k in kids}) == 2
    # an N_t node is cut by text whatever the loads
    assert all(k.terms is not None for k in partition_node(root(s, label="t"), 2))


# --- the compiled parts, against plain readings of the rules ---------------------------------------

class FakeLeaf:
    def __init__(self, load, rq, ro):
        self.load, self.rq, self.ro = load, rq, ro


def plain_merge(leaves, m):
    """MergeNodesIntoPartitions read literally: sets of held ids, one leaf at a time."""
    held = [set() for _ in range(m)]
    part = [0.0] * m
    out = [None] * len(leaves)

    def bf(loads):
        lo, hi = min(loads), max(loads)
        return 1.0 if hi <= 0 else (INF if lo <= 0 else hi / lo)

    for i in sorted(range(len(leaves)), key=lambda i: -leaves[i].load):  # sorted() is stable
        n = leaves[i]
        ids = {("q", q) for q in n.rq} | {("o", o) for o in n.ro}
        inc = [n.load - len(ids & held[p]) for p in range(m)]
        empty = [p for p in range(m) if not any(out[j] == p for j in range(len(leaves)))]
        if empty:
            t = empty[0]
        else:
            c = min(range(m), key=lambda p: (inc[p], part[p], p))
            after = part.copy()
            after[c] += inc[c]
            t = c if bf(after) <= bf(part) else min(range(m), key=lambda p: (part[p], p))
        part[t] += inc[t]
        held[t] |= ids
        out[i] = t
    return out, part


@pytest.mark.parametrize("seed", range(25))
def test_merge_nodes_equals_a_plain_reading(seed):
    rng = np.random.default_rng(seed)
    n_q, n_o, m = 30, 40, int(rng.integers(1, 6))
    leaves = [FakeLeaf(float(rng.integers(1, 60)),  # integer loads: ties happen and must break alike
                       np.sort(rng.choice(n_q, int(rng.integers(0, 8)), replace=False)),
                       np.sort(rng.choice(n_o, int(rng.integers(0, 8)), replace=False)))
              for _ in range(int(rng.integers(1, 15)))]
    out, part = merge_nodes(leaves, m, n_o, n_q)
    want_out, want_part = plain_merge(leaves, m)
    assert out.tolist() == want_out
    assert np.allclose(part, want_part)


@pytest.mark.parametrize("seed", range(6))
def test_posting_products_counts_every_cell_and_term(seed):
    s = sample_of(skewed_items(seed), cells=8)
    rng = np.random.default_rng(seed)
    x0, y0 = (int(v) for v in rng.integers(0, 4, 2))
    node = Node(s, (x0, x0 + 3, y0, y0 + 3), np.arange(s.n_objects), np.arange(s.n_queries))
    qo, qt, oo, ot, _ = node.pairs()
    terms, cells, prod = posting_products(s, node.region, qo, qt, oo, ot)
    got = {(int(t), int(c)): p for t, c, p in zip(terms, cells, prod)}
    fq, fo = {}, {}
    for q, t in zip(qo, qt):
        for cy in range(max(s.qy0[q], y0), min(s.qy1[q], y0 + 3) + 1):
            for cx in range(max(s.qx0[q], x0), min(s.qx1[q], x0 + 3) + 1):
                fq[int(t), cy * s.nx + cx] = fq.get((int(t), cy * s.nx + cx), 0) + 1
    for o, t in zip(oo, ot):
        key = (int(t), int(s.oy[o] * s.nx + s.ox[o]))
        fo[key] = fo.get(key, 0) + 1
    want = {k: fo[k] * fq[k] for k in fo if k in fq}
    assert want and got == want


# --- the sigma loop --------------------------------------------------------------------------------

def skewed_items(seed=3):
    rng = np.random.default_rng(seed)
    items = []
    for i in range(400):
        hot = i < 300  # three quarters of everything in one corner
        x, y = (rng.uniform(1, 20, 2) if hot else rng.uniform(1, 99, 2))
        items.append(("o", x, y, rng.choice(30, size=3, replace=False).tolist()))
        if i % 2 == 0:
            items.append(("q", (x - 3, y - 3, x + 3, y + 3), [int(rng.integers(30))], AND))
    return items


def test_sigma_loop_balances_a_skewed_sample():
    s = sample_of(skewed_items(), cells=16)
    args = {"delta": 0.0, "sigma": 1.3, "theta": 64, "tolerance": 0.05, "min_split_objects": 8}
    before = partition_workload(s, 4, balance_loop=False, **args)
    after = partition_workload(s, 4, **args)
    assert balance_factor(before.part_load) > 1.3  # the first merge is unbalanced ...
    assert balance_factor(after.part_load) < balance_factor(before.part_load)  # ... the loop improves it
    assert after.sigma_splits > 0 and len(after.leaves) <= 64


def test_theta_caps_the_leaves():
    s = sample_of(skewed_items(), cells=16)
    plan = partition_workload(s, 4, delta=0.0, sigma=1.0, theta=6, tolerance=0.05, min_split_objects=8)
    assert len(plan.leaves) <= 6 + 1  # the split that reaches theta is the last one


# --- routing -------------------------------------------------------------------------------------

def fit(ev: Events, n_workers: int, **params):
    df = np.bincount(ev.values, minlength=12).astype(float)
    return KdtStrategy().fit(ev, n_workers, KdtStrategy.make_params(params), FitContext(EXTENT, df, seed=1))


@pytest.mark.parametrize("seed", range(6))
def test_objects_are_dropped_exactly_when_no_earlier_query_of_their_cell_indexes_one_of_their_terms(seed):
    ev = random_stream(seed, n_objects=120, n_queries=40)
    router = fit(ev.take(np.arange(len(ev) // 3)), 4)
    rows, _ = route_stream(router, ev)
    sent = np.zeros(len(ev), bool)
    sent[rows] = True
    g = router.grid
    q_rows = np.flatnonzero(ev.kind == INSERT)
    q_r, q_t = routing_terms(ev, q_rows)
    rng = g.cell_ranges(ev.xmin[q_r], ev.ymin[q_r], ev.xmax[q_r], ev.ymax[q_r])
    o_rows = np.flatnonzero(ev.kind == OBJECT)
    cells = g.cells_of(ev.x[o_rows], ev.y[o_rows])
    dropped = 0
    for r, c in zip(o_rows, cells):
        cx, cy = c % g.nx, c // g.nx
        terms = set(ev.values[ev.offsets[r]:ev.offsets[r + 1]].tolist())
        could = any(qr < r and t in terms and a <= cx <= b and lo <= cy <= hi
                    for qr, t, (a, b, lo, hi) in zip(q_r, q_t, rng))
        assert sent[r] == could, f"object row {r}"
        dropped += not could
    assert dropped > 0  # the rule is exercised
    keys = oracle_keys(ev)
    matched_objects = set((keys & 0xFFFFFFFF).tolist())
    assert not matched_objects & set(ev.id[o_rows[~sent[o_rows]]].tolist())


def hand_router():
    """Two cells along x: cell 0 a space cell of worker 0; cell 1 a text cell whose map sends term 1
    to worker 1 and term 2 to worker 2 (workers 1 and 2 loaded 5 and 3)."""
    grid = UniformGrid.over(EXTENT, 2, 1)
    return GridtRouter(3, grid, np.array([0, -1]), np.array([-1, 0]), np.array([0, 2]), np.array([1, 2]),
                       np.array([1, 2]), np.array([0, 2]), np.array([1, 2]), np.array([1.0]),
                       np.array([0.0, 5.0, 3.0]))


def routes(router, ev):
    rows, workers = route_stream(router, ev)
    out = [set() for _ in range(len(ev))]
    for r, w in zip(rows.tolist(), workers.tolist()):
        out[r].add(w)
    return out


def test_gridt_routes_queries_by_least_frequent_keyword_per_conjunct():
    right = (60, 10, 90, 20)
    ev = item_events([
        ("q", right, [1, 2], AND),  # least frequent keyword 2 -> worker 2 only
        ("q", right, [1, 2], OR),  # each keyword a conjunct -> workers 1 and 2
        ("q", (10, 10, 90, 20), [1], AND),  # both cells: worker 0 (space) and worker 1
        ("o", 70, 15, [1]),  # H2 of cell 1 has 1 -> worker 1 ...
        ("o", 70, 15, [2, 5]),  # ... and 2 -> worker 2
        ("o", 70, 15, [5]),  # no query term: dropped
        ("o", 20, 15, [1, 2]),  # space cell: worker 0
        ("o", 20, 15, [2]),  # space cell, but no query there indexes term 2: dropped
    ])
    assert routes(hand_router(), ev) == [{2}, {1, 2}, {0, 1}, {1}, {2}, set(), {0}, set()]


def test_new_terms_are_assigned_on_insertion_to_the_least_loaded_text_worker():
    right = (60, 10, 90, 20)
    ev = item_events([
        ("o", 70, 15, [7]),  # before any query indexed under 7: dropped
        ("q", right, [7], AND, INSERT, 100),  # unseen term: to worker 2 (load 3 < 5)
        ("o", 70, 15, [7]),  # now routed by the new entry
        ("q", right, [8], AND, INSERT, 101),  # worker 2 now has 3 + 1 = 4 < 5: worker 2 again
        ("q", right, [9], AND, INSERT, 102),  # 5 vs 5: the lower id, worker 1
        ("q", right, [7], AND, DELETE, 100),  # a deletion goes where its insertion went
    ])
    router = hand_router()
    assert routes(router, ev) == [set(), {2}, {2}, {2}, {1}, {2}]
    entries = dict(zip(router.tm_term.tolist(), zip(router.tm_worker.tolist(), router.tm_seq.tolist())))
    assert entries[7] == (2, 1) and entries[8] == (2, 3) and entries[9] == (1, 4)
    h2 = dict(zip(router.h2_term.tolist(), router.h2_seq.tolist()))
    assert h2[7] == 1  # the object at seq 0 predates the entry, the one at seq 2 does not
    # observing the same insertions again changes nothing
    before = (router.tm_key.copy(), router.tm_worker.copy(), router.h2_key.copy(), router.h2_seq.copy())
    router.observe_inserts(ev, np.flatnonzero(ev.kind == INSERT))
    after = (router.tm_key, router.tm_worker, router.h2_key, router.h2_seq)
    assert all(np.array_equal(a, b) for a, b in zip(before, after))


def test_fit_is_deterministic():
    ev = random_stream(7, n_objects=200, n_queries=80)
    sample = ev.take(np.arange(len(ev) // 2))
    a, b = fit(sample, 5), fit(sample, 5)
    assert a.describe() == b.describe()
    for name in ("cell_worker", "cell_tmap", "tm_key", "tm_worker", "h2_ptr", "h2_key", "h2_worker", "h2_seq"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    ra, rb = route_stream(a, ev), route_stream(b, ev)
    assert np.array_equal(ra[0], rb[0]) and np.array_equal(ra[1], rb[1])


H2_STATE = ("h2_key", "h2_worker", "h2_seq", "h2_ptr", "h2_low", "h2_filter", "tm_key", "tm_worker")


@pytest.mark.parametrize("seed", range(3))
def test_h2_growth_is_independent_of_chunking_and_observation_order(seed, monkeypatch):
    """H2 after observing a stream's insertions does not depend on how observe_inserts chunks them
    nor on the order batches arrive (each entry keeps the smallest seq of its queries), and equals
    the brute-force set of (cell, routing term) -> first seq."""
    ev = random_stream(seed, n_objects=150, n_queries=60)
    sample = ev.take(np.arange(len(ev) // 3))
    ins = np.flatnonzero(ev.kind == INSERT)
    whole = fit(sample, 4)
    whole.observe_inserts(ev, ins)
    late_first = fit(sample, 4)
    late_first.observe_inserts(ev, ins[len(ins) // 2:])
    late_first.observe_inserts(ev, ins[:len(ins) // 2])
    monkeypatch.setattr("strategies.ps2stream.gridt.OBSERVE_CHUNK_BITS", 1)  # chunks of two queries
    chunked = fit(sample, 4)
    chunked.observe_inserts(ev, ins)
    for name in H2_STATE:
        assert np.array_equal(getattr(whole, name), getattr(chunked, name)), name
        assert np.array_equal(getattr(whole, name), getattr(late_first, name)), name
    fresh = fit(sample, 4)  # what the sample alone put in H2, then this stream's pairs by brute force
    expected = dict(zip(fresh.h2_key.tolist(), fresh.h2_seq.tolist()))
    g = whole.grid
    q_r, q_t = routing_terms(ev, ins)
    for r, t, (a, b, lo, hi) in zip(q_r, q_t, g.cell_ranges(ev.xmin[q_r], ev.ymin[q_r], ev.xmax[q_r], ev.ymax[q_r])):
        for cy in range(lo, hi + 1):
            for cx in range(a, b + 1):
                key = (cy * g.nx + cx) << 32 | int(t)
                expected[key] = min(expected.get(key, ev.seq[r]), ev.seq[r])
    assert dict(zip(whole.h2_key.tolist(), whole.h2_seq.tolist())) == expected
    assert np.all(np.diff(whole.h2_key) > 0)


def test_describe_exposes_the_partition():
    ev = random_stream(2, n_objects=200, n_queries=80)
    router = fit(ev, 4)
    d = router.describe()
    assert len(d["cell_worker"]) == len(d["cell_tmap"]) == 64 * 64
    assert {leaf["worker"] for leaf in d["leaves"]} <= set(range(4))
    assert all((w >= 0) != (t >= 0) for w, t in zip(d["cell_worker"], d["cell_tmap"]))
    assert router.size_bytes() > 0


def expected_snapshot_targets(router, rects) -> list[tuple[int, int]]:
    """Each rectangle's workers, cell by cell in Python from the router's tables."""
    g = router.grid

    def cell(v, v0, inv_w, cells):
        return min(max(int(np.floor((v - v0) * inv_w)), 0), cells - 1)

    out = []
    for r, (xmin, ymin, xmax, ymax) in enumerate(rects):
        workers = set()
        for iy in range(cell(ymin, g.y0, g.inv_ch, g.ny), cell(ymax, g.y0, g.inv_ch, g.ny) + 1):
            for ix in range(cell(xmin, g.x0, g.inv_cw, g.nx), cell(xmax, g.x0, g.inv_cw, g.nx) + 1):
                c = iy * g.nx + ix
                if router.cell_worker[c] >= 0:
                    workers.add(int(router.cell_worker[c]))
                else:
                    t = router.cell_tmap[c]
                    workers.update(int(w) for w in router.tmc_worker[router.tmc_ptr[t]:router.tmc_ptr[t + 1]])
        out += [(r, w) for w in sorted(workers)]
    return out


@pytest.mark.parametrize("seed", range(6))
def test_snapshot_targets_are_every_worker_of_every_overlapped_cell_even_for_the_whole_space(seed):
    """A snapshot query goes to each worker of each cell its rectangle overlaps (a space cell's
    worker, every worker of a text cell's term map), once, by row: checked cell by cell against the
    router's tables, for rectangles from a point to wider than the space (SSTD's second SKQ round
    when fewer than k objects qualify, which once enumerated every (query, cell) pair and ran out
    of memory at 20,000 queries), on a fitted router and on one with a text cell."""
    ev = random_stream(seed, n_objects=300, n_queries=60)
    rng = np.random.default_rng(seed)
    n = 40
    lo = rng.uniform(-20, 100, (n, 2))
    side = rng.choice([0.0, 1.0, 30.0, 500.0], n)
    rects = np.c_[lo, lo + side[:, None]]
    q = item_events([("q", tuple(r), [1], AND) for r in rects])
    rows = np.arange(n, dtype=np.int64)[::-1]  # any order in, by row out
    routers = [fit(ev, 6, theta=12), hand_router()]
    assert any(r.has_text_cells for r in routers)
    for router in routers:
        got_r, got_w = router.snapshot_targets(q, rows)
        assert list(zip(got_r.tolist(), got_w.tolist())) == expected_snapshot_targets(router, rects)
