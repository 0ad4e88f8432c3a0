"""SSTD's QT-tree routed as the paper states it (strategies/sstd/qttree/onecopy*.py, paper_cost.py,
history.py): an object goes to ONE textual child, the one of least Eq. 2 increment under its
dispatcher's own keyword lists, which it updates (sstd.txt l.188, l.221, l.227); queries reach
every textual child of the leaves they overlap (l.225); J comes from a six-type historical sample
(l.180, l.320). The oracle tests every strategy gets are in tests/contract."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from harness.core.events import OBJECT, Events
from harness.engine.simulate import simulate
from harness.families import registry as families
from harness.families.workload import WorkloadConfig
from strategies import registry
from strategies.base import FitContext, route_stream
from strategies.sstd.qttree.history import historical_sample
from strategies.sstd.qttree.onecopy_build import assemble_onecopy
from strategies.sstd.qttree.route import LEAF, SPATIAL, TEXT
from strategies.sstd.qttree.stats import TYPE_NAMES, QueryStats
from tests.helpers import random_objects
from tests.strategies.sstd.test_qttree import EXTENT, clustered_stream, fit, make_events

CONF = Path(__file__).resolve().parents[3] / "conf" / "workload"
SSTD_WORKLOADS = ["srq_q", "skq_q", "stq_q", "ckq_q", "ctq_q", "sstd_mix", "sstd_hotspot", "hotspot_objects",
                  "hotspot_queries"]


# --- a reference: the paper's rule written out plainly ---------------------------------------------


def reference_leaves(router, ev: Events, rows, n_dispatchers: int) -> list[int]:
    """Each object's leaf by the paper's rule, with plain Python sets: per dispatcher (seq %
    n_dispatchers) and textual child its keyword list, objects and H recomputed from the list."""
    t = router.text
    lists, counts = {}, {}

    def state(d, c):
        if (d, c) not in lists:
            lists[d, c] = set(t.base_of(c).tolist())
            counts[d, c] = float(t.base_n[c])
        return lists[d, c], counts[d, c]

    def cost(v, kw, n):
        c0, ps, pk, terms, ms, mk = t.params_of(v)
        m = dict(zip(terms.tolist(), zip(ms.tolist(), mk.tolist())))
        hs = sum(m[w][0] for w in kw if w in m)
        hk = sum(m[w][1] for w in kw if w in m)
        return n * (c0 + np.polyval(ps[::-1], hs) + np.polyval(pk[::-1], hk))

    out = []
    for r in rows:
        d = int(ev.seq[r]) % n_dispatchers
        terms = set(ev.values[ev.offsets[r]:ev.offsets[r + 1]].tolist())
        v = 0
        while router.kind[v] != LEAF:
            fc = int(router.first_child[v])
            if router.kind[v] == SPATIAL:
                v = fc + int(ev.x[r] >= router.mid_x[v]) + 2 * int(ev.y[r] >= router.mid_y[v])
                continue
            m_terms = set(t.params_of(v)[3].tolist())
            incs = []
            for c in range(4):
                kw, n = state(d, fc + c)
                incs.append((cost(v, kw | (terms & m_terms), n + 1) - cost(v, kw, n), n, c))
            best = min(incs, key=lambda x: (round(x[0], 9), x[1], x[2]))[2]
            kw, n = state(d, fc + best)
            lists[d, fc + best] = kw | (terms & m_terms)
            counts[d, fc + best] = n + 1
            v = fc + best
        out.append(int(router.node_leaf[v]))
    return out


def hand_tree():
    """A root split textually: leaves 0-3 share the space. Children start with keyword lists
    {1}, {}, {2}, {3} holding 1, 0, 5, 2 objects; W = |O| (0.1 + H_srq), M_srq = (0.5, 0.3, 0.2)
    over terms 1, 2, 3, M_skq = 0."""
    params = {0: (0.1, np.array([0.0, 1.0]), np.zeros(2), np.array([1, 2, 3]), np.array([0.5, 0.3, 0.2]),
                  np.zeros(3))}
    lists = {1: (np.array([1]), 1), 2: (np.zeros(0, np.int64), 0), 3: (np.array([2]), 5), 4: (np.array([3]), 2)}
    return assemble_onecopy(4, [TEXT, LEAF, LEAF, LEAF, LEAF], [1, -1, -1, -1, -1], [50.0] * 5, [50.0] * 5,
                            [EXTENT] * 5, params, lists, np.arange(4), np.ones(4))


def test_a_dispatchers_choice_is_the_smallest_increment_and_updates_its_list():
    """By hand: an object with terms {1, 2}. Increments (n+1)(0.1 + H') - n(0.1 + H):
    child 0 ({1}, n 1, H .5): 2 (0.9) - 0.6 = 1.2; child 1 ({}, 0): 0.9; child 2 ({2}, 5, H .3):
    6 (0.9) - 5 (0.4) = 3.4; child 3 ({3}, 2, H .2): 3 (1.1) - 2 (0.3) = 2.7. So child 1, whose list
    becomes {1, 2} (H .8, 1 object). A second such object: child 1 now costs 2 (0.9) - 0.9 = 0.9,
    child 0 still 1.2: child 1 again. A third dispatcher's first object starts from the fit's lists."""
    router = hand_tree()
    ev = make_events([("o", 10.0, 10.0, [1, 2])] * 3)
    router.observe_objects(ev, np.arange(3), 2)  # seqs 0, 2 on dispatcher 0; seq 1 on dispatcher 1
    assert router.leaves_of(ev, np.arange(3)).tolist() == [1, 1, 1]
    assert router.d_n[0, 2] == 2 and router.d_n[1, 2] == 1 and router.d_n[0, 1] == 1
    assert np.isclose(router.d_hs[0, 2], 0.8) and np.isclose(router.d_hs[1, 2], 0.8)
    # now {3}: child 0: 2 (0.8) - 0.6 = 1.0; child 1 (n 2, H .8): 3 (1.1) - 2 (0.9) = 1.5; child 2:
    # 6 (0.6) - 2.0 = 1.6; child 3 ({3}: nothing new): 0.3 -> child 3 on both dispatchers
    ev2 = make_events([("o", 10.0, 10.0, [1, 2])] * 3 + [("o", 1.0, 1.0, [3])] * 2)
    router.observe_objects(ev2, np.arange(3, 5), 2)
    assert router.leaves_of(ev2, np.arange(3, 5)).tolist() == [3, 3]
    assert router.d_n[0, 4] == 3 and router.d_n[1, 4] == 3
    assert reference_leaves(hand_tree(), ev2, range(5), 2) == [1, 1, 1, 3, 3]


@pytest.mark.parametrize("n_dispatchers", [1, 3])
def test_the_kernel_follows_the_papers_rule_on_a_fitted_tree(n_dispatchers):
    ev = clustered_stream(7, n_objects=900, n_queries=300)
    router = fit(registry.get("qttree"), ev.take(np.arange(len(ev) // 3)), n_workers=4, theta=16)
    assert (router.kind == TEXT).any()
    objs = np.flatnonzero(ev.kind == OBJECT)
    router.observe_objects(ev, objs, n_dispatchers)
    want = reference_leaves(fit(registry.get("qttree"), ev.take(np.arange(len(ev) // 3)), n_workers=4, theta=16),
                            ev, objs.tolist(), n_dispatchers)
    assert router.leaves_of(ev, objs).tolist() == want


def test_routing_is_deterministic_across_batchings_and_partitions():
    """The same leaves whether the objects are decided in one call or epoch by epoch, and looked up
    in any order or subset (a Spark partition); the same fit twice routes the same."""
    ev = clustered_stream(12, n_objects=900, n_queries=300)
    sample = ev.take(np.arange(len(ev) // 3))
    objs = np.flatnonzero(ev.kind == OBJECT)
    whole = fit(registry.get("qttree"), sample, n_workers=4, theta=16)
    whole.observe_objects(ev, objs, 2)
    want = whole.leaves_of(ev, objs)
    chunked = fit(registry.get("qttree"), sample, n_workers=4, theta=16)
    got = []
    for part in np.array_split(objs, 7):
        chunked.observe_objects(ev, part, 2)
        got.append(chunked.leaves_of(ev, part))
    assert np.array_equal(np.concatenate(got), want)
    perm = np.random.default_rng(0).permutation(len(objs))
    for sub in np.array_split(perm, 3):
        r, w = whole.route_objects(ev.take(objs[sub]), np.arange(len(sub)))
        assert np.array_equal(w, whole.leaf_worker[want[sub]])
    assert len(set(want.tolist())) > 4  # the objects spread over the leaves


def test_queries_reach_every_textual_child_and_objects_one():
    ev = clustered_stream(7, n_objects=900, n_queries=300)
    router = fit(registry.get("qttree"), ev.take(np.arange(len(ev) // 3)), n_workers=16, theta=16)
    router = router.with_assignment(np.arange(router.n_leaves) % 16)
    rows, _ = route_stream(router, ev)
    per_row = np.bincount(rows, minlength=len(ev))
    assert (per_row[ev.kind == OBJECT] == 1).all()
    q = np.flatnonzero(ev.kind != OBJECT)
    r, leaf = router.units(ev, q)
    for v in np.flatnonzero(router.kind == TEXT):  # a query reaching one child reaches all four
        kids = router.node_leaf[router.first_child[v]:router.first_child[v] + 4]
        if (kids >= 0).all():
            reach = np.isin(leaf, kids)
            per_query = np.bincount(r[reach], minlength=len(ev))[q]
            assert set(per_query.tolist()) <= {0, 4}


def test_w_crq_has_no_text_factor_and_j_has_all_six_types():
    """sstd.txt l.167: W_crq = p_crq E. Eq. 1's factor only in W_srq, W_skq; the historical sample
    has every type, as many of each (Pr(type) = 1/6), whatever one type the fitting sample holds."""
    from strategies.sstd.qttree.paper_cost import PaperCostModel
    ev = clustered_stream(3)
    hist = historical_sample(ev, EXTENT, 0)
    stats = QueryStats(hist, EXTENT, knn_by_keywords=False)
    assert set(stats.type_counts) == set(TYPE_NAMES) and len(set(stats.type_counts.values())) == 1
    model = PaperCostModel(stats)
    assert all(np.isclose(p, 1 / 6) for p in model.pr.values())
    c0, ps, pk, *_ = model.cell_terms(stats.cell((0, 0, 0)))
    root = stats.cell((0, 0, 0))
    assert np.isclose(c0, sum(1 / 6 * len(root.queries[stats.qtype[root.queries] == TYPE_NAMES.index(t)])
                              / stats.type_counts[t] for t in ("crq", "ckq", "stq", "ctq")))
    assert ps[0] == 0 and pk[0] == 0 and ps.sum() > 0  # AND queries: sum_l Pr(l) H^l, no constant
    again = historical_sample(ev, EXTENT, 0)
    assert np.array_equal(again.values, hist.values) and np.array_equal(again.xmin, hist.xmin, equal_nan=True)


# --- the invariant over SSTD's workloads: objects stored once ------------------------------------


def small_workload(name: str):
    raw = OmegaConf.to_container(OmegaConf.load(CONF / f"{name}.yaml"))
    for base in raw.pop("defaults", []):
        if base != "_self_":
            raw = {**OmegaConf.to_container(OmegaConf.load(CONF / f"{base}.yaml")), **raw}
    raw.pop("defaults", None)
    for key, value in (("preload_objects", 600), ("queries", 60), ("sample_queries", 30), ("batch", 20),
                       ("updates", 120), ("objects_per_s", 100.0), ("init_objects", 600), ("timestamps", 10),
                       ("objects_per_ts", 60)):
        if key in raw:
            raw[key] = value
    raw["area_fraction"] = max(raw.get("area_fraction", 0.0), 0.01)
    cfg = WorkloadConfig(**raw)
    objects, df, extent = random_objects(1500, seed=4)
    return families.get(cfg.family).build_workload(objects, df, extent, cfg, 3), df, extent


@pytest.fixture(scope="module")
def sstd_workloads():
    return {name: small_workload(name) for name in SSTD_WORKLOADS}


def object_replication(name, wl, df, extent) -> float:
    """Routed object copies / objects, as the run's obj_replication counts them (storing_copies)."""
    cls = registry.get(name)
    router = cls().fit(wl.sample, 8, cls.make_params({"theta": 16}), FitContext(extent, df.astype(float)))
    ev = wl.events
    router.observe_inserts(ev, np.flatnonzero(ev.kind == 1))
    router.observe_objects(ev, np.flatnonzero(ev.kind == OBJECT), 2)
    rows, _ = router.storing_copies(ev)
    return float((ev.kind[rows] == OBJECT).sum() / (ev.kind == OBJECT).sum())


def test_qttree_stores_every_object_once_on_every_sstd_workload(sstd_workloads):
    """sstd.txt l.221: obj_replication = 1.00 for qttree on every workload it runs; the term-map
    ablation copies objects (above 1 on some)."""
    termmap = {}
    for name, (wl, df, extent) in sstd_workloads.items():
        assert object_replication("qttree", wl, df, extent) == 1.0, name
        termmap[name] = object_replication("qttree_termmap", wl, df, extent)
        assert termmap[name] >= 1.0
    assert max(termmap.values()) > 1.0, termmap


@pytest.mark.parametrize("name", ["sstd_mix", "srq_q"])
@pytest.mark.parametrize("strategy", ["qttree", "qttree_termmap"])
def test_sstd_workloads_equal_the_oracle(sstd_workloads, name, strategy):
    wl, df, extent = sstd_workloads[name]
    res = simulate(wl.events, wl.warmup, strategy, 4, epoch_events=len(wl.events) // 3, n_dispatchers=3,
                   strategy_params={"theta": 16})
    assert res.exact, (name, strategy, res.digest, res.oracle_digest)
