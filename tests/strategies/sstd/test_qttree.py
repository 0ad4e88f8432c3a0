"""SSTD's QT-tree, its ablations and the Karmarkar-Karp allocation (strategies/sstd/qttree/,
quadtree.py, text_only.py, harness/core/allocate.py). The oracle and routing-invariant tests every strategy
gets are in test_strategies.py; these check what is specific to the QT-tree. The term-map machinery
(builder.py, cost.py, route.py, router.py) is `qttree_termmap`'s; the paper's one-copy routing of
`qttree` (onecopy*.py, paper_cost.py, history.py) has its own tests in test_qttree_onecopy.py."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from harness.core.events import (
    AND,
    DELETE,
    INSERT,
    KNN,
    TOPK,
    OBJECT,
    OR,
    RANGE,
    SNAPSHOT,
    TERMS,
    Events,
    unpack_keys,
)
from harness.families.range.oracle import oracle_keys
from harness.core import allocate
from strategies import registry
from strategies.base import FitContext, route_stream
from harness.core.allocate import karmarkar_karp, makespan
from strategies.sstd.qttree.assemble import to_router
from strategies.sstd.qttree.builder import QTTreeBuilder
from strategies.sstd.qttree.cost import CostModel, _polyval
from strategies.sstd.qttree.route import LEAF, SPATIAL, TEXT
from strategies.sstd.qttree.stats import QueryStats
from strategies.sstd.qttree.strategy import QTTreeStrategy, QTTreeTermMapStrategy
from strategies.sstd.quadtree import QuadtreeStrategy
from strategies.sstd.text_only import TextOnlyStrategy

EXTENT = (0.0, 0.0, 100.0, 100.0)
NAMES = ["qttree", "quadtree", "text_only", "qttree_termmap"]
TERMMAP = QTTreeTermMapStrategy  # the term-map routing these mechanics tests are about


def ratio(k: int) -> float:
    """Worst-case makespan ratio of k-way LDM (Michiels et al.): at most 4/3 - 1/(3k)."""
    return 4.0 / 3.0 - 1.0 / (3.0 * k)


# --- Karmarkar-Karp -------------------------------------------------------------------------------


def brute_force_makespan(loads, k):
    return min(makespan(loads, np.array(a), k) for a in itertools.product(range(k), repeat=len(loads)))


def test_kk_within_its_guarantee_of_the_brute_force_optimum():
    rng = np.random.default_rng(1)
    optimal = 0
    for _ in range(150):
        k = int(rng.integers(2, 4))
        loads = rng.integers(1, 40, int(rng.integers(1, 8))).astype(float)
        a = karmarkar_karp(loads, k)
        assert a.shape == loads.shape and a.min() >= 0 and a.max() < k
        got, opt = makespan(loads, a, k), brute_force_makespan(loads, k)
        assert opt <= got <= ratio(k) * opt + 1e-9
        optimal += got == opt
    assert optimal > 100  # a heuristic, but usually optimal on small instances


def test_kk_known_instances():
    # 2-way differencing on {8,7,6,5,4}: 8-7=1, 6-5=1, 4-1=3, 3-1=2 -> sums 16 and 14 (optimum 15).
    a = karmarkar_karp([8, 7, 6, 5, 4], 2)
    assert sorted(np.bincount(a, weights=[8, 7, 6, 5, 4])) == [14.0, 16.0]
    # Fewer items than subsets: each alone, heaviest in subset 0.
    assert karmarkar_karp([1.0, 5.0, 3.0], 4).tolist() == [2, 0, 1]
    # A perfect 3-way split exists and LDM finds it.
    assert makespan([5, 5, 4, 3, 3, 3, 2, 2, 1], karmarkar_karp([5, 5, 4, 3, 3, 3, 2, 2, 1], 3), 3) == 10


def test_kk_bounded_gap_to_lpt_on_random_instances():
    """LDM is not always better than LPT greedy, but never worse than its guarantee times LPT's
    makespan (LPT >= optimum); on average it is at least as good."""
    rng = np.random.default_rng(2)
    diffs = []
    for _ in range(200):
        k = int(rng.integers(2, 17))
        loads = rng.pareto(1.5, int(rng.integers(k, 200))) + 0.01
        kk = makespan(loads, karmarkar_karp(loads, k), k)
        lpt = makespan(loads, allocate.lpt_assign(loads, k), k)
        assert kk <= ratio(k) * lpt + 1e-9
        diffs.append(lpt - kk)
    assert np.mean(diffs) >= 0


def test_kk_edge_cases():
    assert karmarkar_karp([], 3).tolist() == []
    assert karmarkar_karp([3.0, 1.0], 1).tolist() == [0, 0]
    zeros = karmarkar_karp(np.zeros(10), 4)  # zero loads still spread by subset size
    assert np.ptp(np.bincount(zeros, minlength=4)) <= 1
    loads = np.random.default_rng(3).random(50)
    assert np.array_equal(karmarkar_karp(loads, 7), karmarkar_karp(loads, 7))
    with pytest.raises(ValueError):
        karmarkar_karp([1.0], 0)
    with pytest.raises(ValueError):
        karmarkar_karp([1.0, -2.0], 2)


# --- small hand-made streams ----------------------------------------------------------------------


def make_events(rows) -> Events:
    """rows: ("o", x, y, terms) or ("q", qid, rect, terms, op) or ("d", qid, rect, terms, op)."""
    n = len(rows)
    cols = {c: np.zeros(n, np.float64) for c in ("ts", "x", "y")}
    cols.update({c: np.full(n, np.nan) for c in ("xmin", "ymin", "xmax", "ymax")})
    kind = np.zeros(n, np.int8)
    ids = np.zeros(n, np.int64)
    op = np.zeros(n, np.int8)
    terms = []
    oid = 0
    for i, r in enumerate(rows):
        if r[0] == "o":
            kind[i], ids[i], cols["x"][i], cols["y"][i] = OBJECT, oid, r[1], r[2]
            oid += 1
            terms.append(sorted(set(r[3])))
        else:
            kind[i], ids[i] = (INSERT if r[0] == "q" else DELETE), r[1]
            for c, v in zip(("xmin", "ymin", "xmax", "ymax"), r[2]):
                cols[c][i] = v
            cols["x"][i], cols["y"][i] = (r[2][0] + r[2][2]) / 2, (r[2][1] + r[2][3]) / 2
            terms.append(sorted(set(r[3])))
            op[i] = r[4]
    cols.update(seq=np.arange(n, dtype=np.int64), kind=kind, id=ids, op=op,
                family=np.where(kind == OBJECT, -1, RANGE).astype(np.int8),
                k=np.zeros(n, np.int32), alpha=np.zeros(n, np.float32))
    cols["ts"] = np.arange(n, dtype=np.float64)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum([len(t) for t in terms], out=offsets[1:])
    values = np.array([v for t in terms for v in t], np.int32)
    return Events(cols, offsets, values)


def clustered_stream(seed, n_objects=600, n_queries=200, sites=((20, 20), (80, 30), (30, 75), (70, 80)),
                     groups=4, group_size=12, long_every=50, deletes=True):
    """Objects co-located at a few sites (space cannot separate them inside a site), each with
    terms from one of `groups` disjoint vocabularies (text can); queries around the sites with
    1-3 keywords of one group, AND or OR. Every `long_every`-th object has > 62 terms from all
    groups (past the tracked bitmask), and a few terms are never in any sample."""
    rng = np.random.default_rng(seed)
    rows, live, qid = [], [], 0
    for _ in range(n_objects + n_queries):
        if rng.random() < n_queries / (n_objects + n_queries):
            sx, sy = sites[rng.integers(len(sites))]
            h = rng.uniform(1, 15, 2)
            rect = (sx - h[0], sy - h[1], sx + h[0], sy + h[1])
            g = rng.integers(groups)
            t = (g * group_size + rng.choice(group_size, rng.integers(1, 4), replace=False)).tolist()
            t = [] if qid % 53 == 7 else t  # a query without keywords matches nothing, is still routed
            op = OR if rng.random() < 0.4 else AND
            rows.append(("q", qid, rect, t, op))
            live.append(rows[-1])
            qid += 1
        elif deletes and live and rng.random() < 0.1:
            q = live.pop(rng.integers(len(live)))
            rows.append(("d",) + q[1:])
        else:
            sx, sy = sites[rng.integers(len(sites))]
            if len(rows) % 97 == 0:
                t = []  # a term-less object: stored once, matches nothing
            elif len(rows) % long_every == 0:
                t = rng.choice(groups * group_size + 30, 70, replace=False).tolist()
            else:
                g = rng.integers(groups)
                t = (g * group_size + rng.choice(group_size, rng.integers(1, 5), replace=False)).tolist()
            rows.append(("o", sx + rng.normal(0, 0.01), sy + rng.normal(0, 0.01), t))
    return make_events(rows)


def fit(cls, sample, n_workers=4, theta=64, vocab=100):
    ctx = FitContext(EXTENT, np.ones(vocab))
    return cls().fit(sample, n_workers, cls.make_params({"theta": theta}), ctx)


def builder(cls, sample, n_workers=4, theta=64):
    return cls().build(sample, n_workers, cls.make_params({"theta": theta}), FitContext(EXTENT, np.ones(100)))


def assert_pairs_meet(router, ev):
    rows, workers = route_stream(router, ev)
    sets = [set() for _ in range(len(ev))]
    for r, w in zip(rows.tolist(), workers.tolist()):
        sets[r].add(w)
    assert all(sets), "every event reaches a worker"
    ins = {int(ev.id[r]): r for r in np.flatnonzero(ev.kind == INSERT)}
    obj = {int(ev.id[r]): r for r in np.flatnonzero(ev.kind == OBJECT)}
    qids, oids = unpack_keys(oracle_keys(ev))
    assert len(qids) > 50
    for q, o in zip(qids.tolist(), oids.tolist()):
        assert sets[ins[q]] & sets[obj[o]], f"pair ({q}, {o}) never meets"
    for r in np.flatnonzero(ev.kind == DELETE):
        assert sets[r] == sets[ins[int(ev.id[r])]]
    return sets


# --- the tree -------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [QTTreeStrategy, QuadtreeStrategy, TextOnlyStrategy])
def test_leaf_count_is_theta(cls):
    sample = clustered_stream(0)
    for theta, expected in [(64, 64), (16, 16), (32, 34), (1, 4)]:  # splits add 3 leaves: first count >= theta
        router = fit(cls, sample, n_workers=3, theta=theta)
        assert (router.kind == LEAF).sum() == expected == len(router.leaf_worker)
    assert (fit(cls, sample, n_workers=20, theta=4).kind == LEAF).sum() == 22  # at least one leaf per worker


def test_ablations_only_make_their_kind_of_split():
    sample = clustered_stream(1)
    quad, text, both = (fit(c, sample).describe()["splits"] for c in (QuadtreeStrategy, TextOnlyStrategy, QTTreeStrategy))
    assert quad["text"] == 0 and quad["spatial"] == 21
    assert text["spatial"] == 0 and text["text"] == 21
    assert both["spatial"] > 0 and both["text"] > 0  # this stream rewards both kinds


def test_text_split_chosen_where_space_cannot_separate():
    rows = [("o", 50.0, 50.0, [g * 10 + i % 3]) for i, g in enumerate([0, 1, 2, 3] * 50)]
    rows += [("q", i, (40, 40, 60, 60), [g * 10 + i % 3], AND) for i, g in enumerate([0, 1, 2, 3] * 10)]
    nodes = builder(TERMMAP, make_events(rows), theta=4).nodes
    assert nodes[0].kind == TEXT
    assert [len(c.objs) for c in nodes[1:5]] == [50, 50, 50, 50]  # one vocabulary per child
    assert sum(c.cost for c in nodes[1:5]) < 0.3 * nodes[0].cost


def test_spatial_split_chosen_where_text_cannot_separate():
    rng = np.random.default_rng(4)
    rows = [("o", *rng.uniform(0, 100, 2), [0, 1, 2]) for _ in range(200)]
    rows += [("q", i, (*(c := rng.uniform(5, 95, 2)) - 3, *(c + 3)), [0], AND) for i in range(40)]
    nodes = builder(QTTreeStrategy, make_events(rows), theta=4).nodes
    assert nodes[0].kind == SPATIAL


@pytest.mark.parametrize("cls", [QTTreeStrategy, QuadtreeStrategy])
def test_cost_never_increases_with_splits(cls):
    """A spatial split never costs more than its parent (children overlap fewer queries, split
    the objects), and qttree takes the cheaper option, so the total leaf cost only falls."""
    b = builder(cls, clustered_stream(2))
    trace = np.array(b.cost_trace)
    assert len(trace) == 22 and trace[-1] < trace[0]
    assert np.all(np.diff(trace) <= 1e-9 * trace[0])
    leaves = [n for n in b.nodes if n.kind == LEAF]
    assert np.isclose(sum(n.cost for n in leaves), trace[-1])


def test_qttree_takes_the_cheaper_of_its_ablations_first_splits():
    """Algorithm 1, line 8, at the root (later splits are greedy, so the final cost of qttree is
    not guaranteed to be below both ablations')."""
    for seed in (3, 4):
        sample = clustered_stream(seed)
        first = {c.name: builder(c, sample, theta=4).cost_trace for c in (QTTreeStrategy, QuadtreeStrategy, TextOnlyStrategy)}
        assert first["qttree"][0] == first["quadtree"][0] == first["text_only"][0]
        assert first["qttree"][1] == min(first["quadtree"][1], first["text_only"][1])


@pytest.mark.parametrize("name", NAMES)
def test_deterministic(name):
    cls = registry.get(name)
    sample = clustered_stream(5)
    a, b = fit(cls, sample, n_workers=5), fit(cls, sample, n_workers=5)
    for attr in ("kind", "first_child", "mid_x", "mid_y", "exit_table", "leaf_worker", "leaf_cost"):
        assert np.array_equal(getattr(a, attr), getattr(b, attr))
    ev = clustered_stream(6)
    for x, y in zip(route_stream(a, ev), route_stream(b, ev)):
        assert np.array_equal(x, y)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n_workers", [1, 3, 7])
def test_pairs_meet_on_mixed_trees(name, n_workers):
    """Streams with co-located objects, long term lists (> 62 terms) and terms unseen at fit:
    every matching pair meets, a deletion goes where its insertion went."""
    ev = clustered_stream(7, n_objects=900, n_queries=300)
    router = fit(registry.get(name), ev.take(np.arange(len(ev) // 3)), n_workers=n_workers, theta=16)
    assert_pairs_meet(router, ev)
    if name == TERMMAP.name:  # the one-copy build is checked in test_qttree_onecopy.py
        assert_routing_matches_build(builder(TERMMAP, ev.take(np.arange(len(ev) // 3)), theta=16))


@pytest.mark.parametrize("name", NAMES)
def test_a_full_output_buffer_grows_without_changing_the_pairs(name, monkeypatch):
    """Routing sizes its buffer for n_workers pairs per row up to LAZY_PAIRS, then doubles it and
    resumes where the kernel stopped: the pairs are the same as with room to spare."""
    ev = clustered_stream(8, n_objects=600, n_queries=200)
    router = fit(registry.get(name), ev.take(np.arange(len(ev) // 3)), n_workers=5, theta=16)
    roomy = router.route(ev)
    monkeypatch.setattr("strategies.sstd.qttree.router.LAZY_PAIRS", 7)
    tight = router.route(ev)
    assert len(roomy[0]) > 7 * 8  # the tight buffer had to grow several times
    for a, b in zip(roomy, tight):
        assert np.array_equal(a, b)


class AlternatingBuilder(QTTreeBuilder):
    """Text at even depths, space at odd ones: text -> space -> text paths, where a row's live
    terms must survive a spatial step (the cost model rarely builds these on small streams)."""

    def choose(self, node, options):
        return options[1] if node.depth % 2 == 0 else options[0]


@pytest.mark.parametrize("n_workers", [2, 5])
def test_pairs_meet_across_text_space_text_paths(n_workers):
    ev = clustered_stream(11, n_objects=900, n_queries=300)
    stats = QueryStats(ev.take(np.arange(len(ev) // 3)), EXTENT)
    b = AlternatingBuilder(stats, CostModel(stats), ("spatial", "text"))
    nodes = b.build(40)
    router = to_router(nodes, n_workers)
    kinds = router.kind
    text_under_space_under_text = [
        v for v in np.flatnonzero(kinds == TEXT) for u in range(router.first_child[v], router.first_child[v] + 4)
        if kinds[u] == SPATIAL and (kinds[router.first_child[u]:router.first_child[u] + 4] == TEXT).any()
    ]
    assert text_under_space_under_text
    assert_pairs_meet(router, ev)
    assert_routing_matches_build(b)


def assert_routing_matches_build(b):
    """Route the fitting sample with one worker per leaf: each leaf receives exactly the objects
    and queries the builder counted in it (so the costs KK balanced are the routed ones)."""
    nodes, st = b.nodes, b.stats
    leaves = [v for v, nd in enumerate(nodes) if nd.kind == LEAF]
    router = to_router(nodes, len(leaves)).with_assignment(np.arange(len(leaves)))
    ev = st.sample
    got_o = set(zip(*(a.tolist() for a in router.route_objects(ev, st.objs))))
    has_keywords = st.qs[st.e_count > 0]  # a keyword-less query is routed but counted nowhere
    got_q = set(zip(*(a.tolist() for a in router.route_range(ev, has_keywords))))
    want_o = {(int(st.objs[p]), i) for i, v in enumerate(leaves) for p in nodes[v].objs}
    want_q = {(int(st.qs[st.e_q[e]]), i) for i, v in enumerate(leaves) for e in nodes[v].ents}
    assert got_o == want_o and got_q == want_q


def test_text_only_sends_every_query_to_every_worker():
    """The paper's Text baseline: every leaf has the whole space and routers do not check query
    keywords (sstd.txt l.225), so a range query reaches every leaf."""
    ev = clustered_stream(8)
    router = fit(TextOnlyStrategy, ev, n_workers=8)
    q = np.flatnonzero((ev.kind == INSERT) & (ev.op == AND))
    rows, workers = router.route_range(ev, q)
    assert np.array_equal(np.bincount(rows, minlength=len(ev))[q], np.full(len(q), 8))


@pytest.mark.parametrize("cls", [QTTreeStrategy, QTTreeTermMapStrategy])
def test_router_describes_and_reassigns(cls):
    router = fit(cls, clustered_stream(9), n_workers=4)
    d = router.describe()
    assert len(d["leaves"]) == 64 and {leaf["worker"] for leaf in d["leaves"]} == {0, 1, 2, 3}
    moved = router.with_assignment(np.zeros_like(router.leaf_worker))
    ev = clustered_stream(10)
    _, w = moved.route_objects(ev, np.flatnonzero(ev.kind == OBJECT))
    assert set(w.tolist()) == {0}
    assert router.size_bytes() > router.exit_table.nbytes
    assert cls is QTTreeStrategy or router.exit_table.nbytes > 0


# --- the cost model -------------------------------------------------------------------------------


def test_eq1_text_factor():
    """F(H) = sum_l Pr(l) (1 - (1 - H)^l): H for AND queries (one routing keyword), the chance
    that one of l independent routing keywords falls in the node for OR queries."""
    rows = [("o", 10.0, 10.0, [1, 2])] * 4
    rows += [("q", 0, (0, 0, 50, 50), [1], AND), ("q", 1, (0, 0, 50, 50), [1, 2], OR)]
    stats = QueryStats(make_events(rows), EXTENT)
    assert np.allclose(stats.pr_route_len, [0.0, 0.5, 0.5])
    terms, m = stats.keyword_distribution((0, 0, 0))  # M: AND's one routing keyword, OR's two
    assert terms.tolist() == [1, 2] and np.allclose(m, [2 / 3, 1 / 3])
    model = CostModel(stats)
    poly = model.poly(stats.cell((0, 0, 0))) / stats.time_share["crq"]  # p = 1 at the root
    for h in (0.0, 0.3, 1.0):
        assert np.isclose(_polyval(poly, h), 0.5 * h + 0.5 * (1 - (1 - h) ** 2))
    cell = stats.cell((0, 0, 0))
    assert np.isclose(model.cost(cell, 4, 3, False), 4 * _polyval(model.poly(cell), 1.0))


def test_unimplemented_query_families_raise_naming_the_family():
    ev = make_events([("o", 1.0, 1.0, [1]), ("q", 0, (0, 0, 5, 5), [1], AND)])
    ev.cols["family"][1] = TOPK
    with pytest.raises(NotImplementedError, match="'topk'"):
        QTTreeStrategy().fit(ev, 2, QTTreeStrategy.Params(), FitContext(EXTENT, np.ones(5)))


# --- kNN subscriptions (SSTD's CKQ) ---------------------------------------------------------------


def _mixed(knn_qids=(2, 3)):
    """Two CRQs and two CKQs (the CKQs' rectangles stand for their warm-up balls), four objects."""
    rows = [("o", 10.0, 10.0, [1, 2])] * 2 + [("o", 80.0, 80.0, [1])] * 2
    rows += [("q", 0, (0, 0, 50, 50), [1], AND), ("q", 1, (0, 0, 100, 100), [1, 2], OR),
             ("q", 2, (5, 5, 15, 15), [1, 2], AND), ("q", 3, (70, 70, 90, 90), [1], OR)]
    ev = make_events(rows)
    ev.cols["family"][np.isin(ev.id, knn_qids) & (ev.kind == INSERT)] = KNN
    return ev


@pytest.mark.parametrize("by_keywords", [True, False])
def test_ckq_term_is_its_share_of_balls_with_or_without_the_text_factor(by_keywords):
    """W = Pr(crq) W_crq + Pr(ckq) W_ckq. In the SW quadrant: both CRQs (q0, q1) and one CKQ of
    two (q2). Routing keywords: q0 AND 1, q1 OR 2, and when CKQs are keyword-routed q2 AND 1 and
    q3 OR 1 too, so Pr(l) is (3/4, 1/4) over all four, else (1/2, 1/2) over the CRQs; the CKQ
    term has F(H) only when keyword-routed (SSTD's W_ckq: none)."""
    stats = QueryStats(_mixed(), EXTENT, knn_by_keywords=by_keywords)
    assert stats.type_counts == {"crq": 2, "ckq": 2}
    model = CostModel(stats)
    assert model.pr == {"crq": 0.5, "ckq": 0.5}
    sw = stats.children((0, 0, 0))[0]
    p1, p2 = (0.75, 0.25) if by_keywords else (0.5, 0.5)
    for h in (0.0, 0.4, 1.0):
        f = p1 * h + p2 * (1 - (1 - h) ** 2)
        crq = 0.5 * (2 / 2) * stats.time_share["crq"] * f
        ckq = 0.5 * (1 / 2) * stats.time_share["ckq"] * (f if by_keywords else 1.0)
        assert np.isclose(_polyval(model.poly(sw), h), crq + ckq), h
    if not by_keywords:  # a CKQ routed everywhere has no routing keywords: M is the CRQs' alone
        terms, m = stats.keyword_distribution((0, 0, 0))
        assert terms.tolist() == [1, 2] and np.allclose(m, [2 / 3, 1 / 3])


def test_ckq_routing_all_reaches_every_worker_and_survives_reassignment():
    """all: every CKQ on every worker, also after leaves move (with_assignment, as the adjusters
    rebuild it) and as units (every leaf); ball: where its rectangle's leaves are (here all moved
    to worker 0)."""
    ev = _mixed()
    knn_rows = np.flatnonzero(ev.family == KNN)
    for routing in ("all", "ball"):
        router = QTTreeStrategy().fit(ev, 3, QTTreeStrategy.make_params({"theta": 4, "ckq_routing": routing}),
                                      FitContext(EXTENT, np.ones(5)))
        moved = router.with_assignment(np.zeros(router.n_leaves, np.int64))
        for r in (router, moved):
            if routing == "all":
                want = {int(q): list(range(3)) for q in knn_rows}
            else:  # like a CRQ on its rectangle
                rr, rw = r.route_range(ev, knn_rows)
                want = {int(q): sorted(set(rw[rr == q].tolist())) for q in knn_rows}
                assert r is router or all(w == [0] for w in want.values())
            for rows, workers in (r.route_queries(ev, knn_rows), r.route(ev)):  # per family; one kernel
                for q in knn_rows:
                    assert sorted(set(workers[rows == q].tolist())) == want[int(q)], (routing, q)
        rows, _ = router.units(ev, knn_rows)
        per_query = np.bincount(rows, minlength=len(ev))[knn_rows]
        if routing == "all":
            assert per_query.tolist() == [router.n_leaves] * len(knn_rows)
        else:
            assert per_query.min() >= 1 and per_query.max() < router.n_leaves


def test_ckq_routing_must_be_all_or_ball():
    with pytest.raises(ValueError, match=r"strategy.params.ckq_routing='leaf' is invalid; allowed: all, ball"):
        QTTreeStrategy.make_params({"ckq_routing": "leaf"})


@pytest.mark.parametrize("family, kind, split", [(RANGE, SNAPSHOT, TEXT), (RANGE, INSERT, TEXT),
                                                 (TERMS, SNAPSHOT, SPATIAL), (TERMS, INSERT, SPATIAL)])
def test_eq2_gives_textual_splits_no_benefit_for_top_k_terms_queries(family, kind, split):
    """Why the QT-tree equals the Quadtree on STQ and CTQ (issue 40, SSTD Figs. 10 and 12(b)):
    the paper's W_stq and W_ctq have no text factor, so on co-located objects that four keyword
    groups separate, SRQs and CRQs (keyword-routed, Eq. 1's factor) make the root split
    textually and cut its cost, while STQs and CTQs over the same objects and regions leave the
    textual split no cheaper than the spatial one (a tie, which goes spatial)."""
    rows = [("o", 50.0, 50.0, [g * 10 + i % 3]) for i, g in enumerate([0, 1, 2, 3] * 50)]
    rows += [("q", i, (40, 40, 60, 60), [g * 10 + i % 3], AND) for i, g in enumerate([0, 1, 2, 3] * 10)]
    ev = make_events(rows)
    queries = ev.kind != OBJECT
    ev.family[queries], ev.kind[queries] = family, kind
    nodes = builder(TERMMAP, ev, theta=4).nodes  # J from the one-type sample itself
    assert nodes[0].kind == split
    children = sum(c.cost for c in nodes[1:5])
    if split == TEXT:
        assert children < 0.3 * nodes[0].cost
    else:
        assert np.isclose(children, nodes[0].cost)


def test_skq_counts_in_the_cells_its_ball_reaches():
    """p_skq is "the probability an SKQ accessing P", Pr(d(q, P) < d(q, q.R_k)) (SSTD Sec.
    4.1.1), not 1 everywhere (issue 40: an SKQ arrives with the whole space as its rectangle, and
    counted so, a spatial split never lowered W_skq and the QT-tree split textually only).
    Objects at four far-apart sites carry one of four keyword groups each; each SKQ sits at a site
    and asks for k = 3 of one group: its ball stays at its site, so the root splits spatially and a
    quadrant's p_skq is its own site's share."""
    sites = [(20.0, 20.0), (80.0, 20.0), (20.0, 80.0), (80.0, 80.0)]
    rng = np.random.default_rng(7)
    rows = [("o", sx + rng.normal(0, 1), sy + rng.normal(0, 1), [g * 10 + i % 3])
            for i in range(240) for g, (sx, sy) in [(i % 4, sites[(i // 4) % 4])]]
    rows += [("q", i, EXTENT, [g * 10], AND) for i, g in enumerate([0, 1, 2, 3] * 10)]
    ev = make_events(rows)
    queries = np.flatnonzero(ev.kind != OBJECT)
    ev.family[queries], ev.kind[queries] = KNN, SNAPSHOT
    ev.k[queries] = 3
    ev.x[queries] = [sites[i % 4][0] for i in range(len(queries))]
    ev.y[queries] = [sites[i % 4][1] for i in range(len(queries))]
    stats = QueryStats(ev, EXTENT)
    side = stats.rect[:, 2] - stats.rect[:, 0]
    assert (side > 0).all() and (side < 30).all()  # balls at their sites, not the whole space
    shares = [len(c.queries) / len(queries) for c in stats.children((0, 0, 0))]
    assert shares == [0.25, 0.25, 0.25, 0.25]
    assert builder(QTTreeStrategy, ev, theta=4).nodes[0].kind == SPATIAL
