"""Unit tests of the hypergraph (KaHyPar) and metric text partitionings: the hypergraph built from
a sample, balance, co-location of co-occurring terms, determinism, tiny inputs."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from harness.core.events import AND, DELETE, INSERT, OBJECT, OR, RANGE, Events, unpack_keys
from harness.families.range.oracle import oracle_keys
from strategies import registry
from strategies.base import FitContext, route_stream
from strategies.load import sample_parts, term_loads
from strategies.routers.termmap import TermMapRouter
from strategies.ps2stream.text_hypergraph import build_hypergraph, hypergraph_partition
from strategies.ps2stream.textpart import dedup_sets, sample_items, water_level
from strategies.ps2stream.text_metric import metric_partition, term_work
from tests.streams import random_stream

NAMES = ["text_hypergraph", "text_metric"]


def make_events(items) -> Events:
    """items: ("o", terms) objects, ("and", terms) / ("or", terms) subscription insertions; every
    event at the centre of a 100 km square, every subscription covering all of it."""
    n = len(items)
    kind = np.array([OBJECT if k == "o" else INSERT for k, _ in items], np.int8)
    is_q = kind == INSERT
    cols = {
        "seq": np.arange(n, dtype=np.int64), "ts": np.arange(n, dtype=np.float64), "kind": kind,
        "family": np.where(is_q, RANGE, -1).astype(np.int8), "id": np.arange(n, dtype=np.int64),
        "x": np.full(n, 50.0), "y": np.full(n, 50.0),
        "xmin": np.where(is_q, 0.0, np.nan), "ymin": np.where(is_q, 0.0, np.nan),
        "xmax": np.where(is_q, 100.0, np.nan), "ymax": np.where(is_q, 100.0, np.nan),
        "op": np.array([OR if k == "or" else AND for k, _ in items], np.int8),
        "k": np.zeros(n, np.int32), "alpha": np.zeros(n, np.float32),
    }
    terms = [sorted(set(t)) for _, t in items]
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum([len(t) for t in terms], out=offsets[1:])
    return Events(cols, offsets, np.array([v for t in terms for v in t], np.int32))


def context(vocab: int, df=None, seed: int = 0) -> FitContext:
    df = np.ones(vocab) if df is None else np.asarray(df, float)
    return FitContext((0.0, 0.0, 100.0, 100.0), df, seed)


def fit(name, sample, k, ctx, **params):
    cls = registry.get(name)
    return cls().fit(sample, k, cls.make_params(params), ctx)


def topic_sample(n_objects=1200, n_topics=8, per_topic=30, seed=1) -> tuple[Events, int]:
    """Objects whose terms all come from one topic (co-occurrence inside topics only), plus AND
    and OR subscriptions over a topic's terms: a partition by topic replicates nothing."""
    rng = np.random.default_rng(seed)
    items = []
    for i in range(n_objects):
        topic = int(rng.integers(n_topics))
        terms = topic * per_topic + rng.choice(per_topic, size=int(rng.integers(3, 7)), replace=False)
        items.append(("o", terms.tolist()))
        if i % 4 == 0:
            q = topic * per_topic + rng.choice(per_topic, size=2, replace=False)
            items.append(("or" if i % 8 == 0 else "and", q.tolist()))
    return make_events(items), n_topics * per_topic


def object_copies(router, sample) -> float:
    objs, _ = sample_parts(sample)
    rows, _ = router.route_objects(sample, objs)
    return len(rows) / len(objs)


# --- the hypergraph --------------------------------------------------------------------------------

def test_hypergraph_nets_are_multicast_items_deduplicated():
    ev = make_events([
        ("o", [1, 2, 3]), ("o", [1, 2, 3]), ("o", [4]), ("o", [2, 5]),
        ("or", [3, 6]), ("and", [1, 7]),
    ])
    off, val = sample_items(ev)
    assert len(off) - 1 == 5  # four objects and the OR subscription; the AND one is no net
    loads = term_loads(ev, 8)
    hg = build_hypergraph(off, val, loads, np.zeros(8, bool))
    nets = {tuple(hg.vertices[hg.net_pins[a:b]].tolist()): w
            for a, b, w in zip(hg.net_offsets[:-1], hg.net_offsets[1:], hg.net_weight)}
    assert nets == {(1, 2, 3): 2.0, (2, 5): 1.0, (3, 6): 1.0}
    assert hg.vertices.tolist() == [1, 2, 3, 5, 6]
    assert len(hg.net_pins) == 7
    np.testing.assert_array_equal(hg.vertex_weight, loads[[1, 2, 3, 5, 6]])
    assert loads[7] > 0  # the AND subscription's routing term carries load without a net
    excluded = build_hypergraph(off, val, loads, np.isin(np.arange(8), [3]))
    nets = {tuple(excluded.vertices[excluded.net_pins[a:b]].tolist())
            for a, b in zip(excluded.net_offsets[:-1], excluded.net_offsets[1:])}
    assert nets == {(1, 2), (2, 5)}  # {3, 6} lost its second pin


def test_dedup_merges_equal_sets_in_first_occurrence_order():
    off = np.array([0, 2, 3, 5, 7, 8])
    val = np.array([4, 9, 1, 4, 9, 2, 3, 1], np.int32)
    o, v, w = dedup_sets(off, val, np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    assert [v[a:b].tolist() for a, b in pairwise(o)] == [[4, 9], [1], [2, 3]]
    assert w.tolist() == [4.0, 7.0, 4.0]


def test_water_level_fills_the_lowest_workers():
    assert water_level(np.array([0.0, 0.0]), 10.0) == pytest.approx(5.0)
    assert water_level(np.array([9.0, 1.0, 0.0]), 5.0) == pytest.approx(3.0)  # 9 stays above
    assert water_level(np.array([2.0, 2.0]), 0.0) == pytest.approx(2.0)


# --- balance, co-location, determinism ---------------------------------------------------------

def test_hypergraph_partition_is_balanced_within_epsilon():
    ev, vocab = topic_sample(n_topics=12, per_topic=25)
    loads = term_loads(ev, vocab)
    for eps in (0.03, 0.1):
        term_worker, info = hypergraph_partition(ev, loads, 4, eps, 50, 5000, seed=3)
        assert info["method"] == "kahypar"
        per = np.bincount(term_worker[loads > 0], weights=loads[loads > 0], minlength=4)
        assert per.max() / per.mean() <= 1 + eps + 1e-9
        np.testing.assert_allclose(per, info["term_load_per_worker"])


@pytest.mark.parametrize("name", NAMES)
def test_co_occurring_terms_share_a_worker_more_than_under_frequency(name):
    ev, vocab = topic_sample()
    ctx = context(vocab)
    # the partitions' model multicasts an object over all its terms (object_terms="all")
    base = object_copies(fit("text_frequency", ev, 4, ctx, object_terms="all"), ev)
    router = fit(name, ev, 4, ctx, object_terms="all")
    ours = object_copies(router, ev)
    assert ours < 0.6 * base, (ours, base)
    # terms of one topic mostly share a worker
    topic_of = np.arange(vocab) // 30
    same = [np.bincount(router.term_worker[topic_of == t]).max() / 30 for t in range(8)]
    assert np.mean(same) > 0.7


def test_metric_keeps_model_loads_balanced_on_topics():
    ev, vocab = topic_sample(n_topics=8)
    term_worker, info = metric_partition(ev, 4, 1.0, 0.03, vocab)
    loads = np.array(info["model_load_per_worker"])
    assert loads.max() / loads.mean() < 1.08  # epsilon = 0.03 plus the granularity of terms
    # the model: per-term work plus one per item copy received
    objs, qs = sample_parts(ev)
    router = TermMapRouter(4, np.where(term_worker < 0, 0, term_worker), object_terms="all")
    _, wo = router.route_objects(ev, objs)
    or_rows = qs[ev.op[qs] == OR]
    _, wq = router.route_range(ev, or_rows)
    expected = (np.bincount(router.term_worker[:vocab], weights=term_work(ev, vocab), minlength=4)
                + np.bincount(wo, minlength=4) + np.bincount(wq, minlength=4))
    np.testing.assert_allclose(loads, expected)


def test_metric_places_two_pairs_of_inseparable_terms_apart():
    items = [("o", [0, 1])] * 20 + [("o", [2, 3])] * 20 + [("and", [0]), ("and", [1]), ("and", [2]), ("and", [3])]
    ev = make_events(items)
    tw, _ = metric_partition(ev, 2, 1.0, 0.03, 4)
    assert tw[0] == tw[1] and tw[2] == tw[3] and tw[0] != tw[2]
    r = fit("text_hypergraph", ev, 2, context(4))
    assert r.term_worker[0] == r.term_worker[1] or r.describe()["method"].startswith("lpt")


@pytest.mark.parametrize("name", NAMES)
def test_fit_is_deterministic_for_a_seed(name):
    ev, vocab = topic_sample(seed=7)
    df = np.bincount(ev.values, minlength=vocab + 50).astype(float)  # 50 terms unseen in the sample
    a = fit(name, ev, 5, context(vocab + 50, df, seed=11))
    b = fit(name, ev, 5, context(vocab + 50, df, seed=11))
    np.testing.assert_array_equal(a.term_worker, b.term_worker)
    assert a.describe() == b.describe()


def test_hypergraph_net_budget_uses_a_seeded_subset():
    ev, vocab = topic_sample()
    loads = term_loads(ev, vocab)
    a, ia = hypergraph_partition(ev, loads, 4, 0.03, 50, 200, seed=5)
    b, _ = hypergraph_partition(ev, loads, 4, 0.03, 50, 200, seed=5)
    np.testing.assert_array_equal(a, b)
    assert ia["nets"] <= 200 and ia["method"] == "kahypar"
    assert (a[loads > 0] >= 0).all()


# --- coverage of the vocabulary, tiny inputs, silence --------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_every_term_gets_a_worker_and_unseen_terms_spread(name):
    ev, vocab = topic_sample(n_objects=300)
    df = np.concatenate([np.ones(vocab), np.arange(400, 0, -1, dtype=float)])  # 400 unseen terms
    r = fit(name, ev, 8, context(vocab + 400, df))
    assert len(r.term_worker) == vocab + 400
    assert r.term_worker.min() >= 0 and r.term_worker.max() < 8
    assert len(np.unique(r.term_worker[vocab:])) == 8


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("k", [1, 2, 8, 32])
def test_tiny_and_empty_samples(name, k):
    tiny = make_events([("o", [0, 1]), ("o", [1, 2]), ("and", [2])])
    r = fit(name, tiny, k, context(6))
    assert r.term_worker.min() >= 0 and r.term_worker.max() < k
    if k == 1:
        assert (r.term_worker == 0).all()
    if name == "text_hypergraph" and k > 1:
        assert r.describe()["method"].startswith("lpt fallback")  # 3 terms cannot fill k blocks
    empty = make_events([])
    r = fit(name, empty, k, context(6))
    assert r.term_worker.min() >= 0 and r.term_worker.max() < k
    assert len(np.unique(r.term_worker)) == min(k, 6)


def test_kahypar_prints_nothing(capfd):
    ev, vocab = topic_sample(n_objects=400)
    r = fit("text_hypergraph", ev, 4, context(vocab))
    assert r.describe()["method"] == "kahypar"
    out, err = capfd.readouterr()
    assert out == "" and err == ""


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matching_pairs_meet_and_deletions_follow_insertions(name, seed):
    ev = random_stream(seed, n_objects=120, n_queries=50)
    sample = ev.take(np.arange(len(ev) // 3))
    for k in (1, 3, 16):
        r = fit(name, sample, k, context(12, np.bincount(ev.values, minlength=12)))
        rows, workers = route_stream(r, ev)
        sets = [set() for _ in range(len(ev))]
        for row, w in zip(rows.tolist(), workers.tolist()):
            sets[row].add(w)
        ins = {int(ev.id[i]): i for i in np.flatnonzero(ev.kind == INSERT)}
        obj = {int(ev.id[i]): i for i in np.flatnonzero(ev.kind == OBJECT)}
        qids, oids = unpack_keys(oracle_keys(ev))
        assert len(qids) > 0
        for q, o in zip(qids.tolist(), oids.tolist()):
            assert sets[ins[q]] & sets[obj[o]]
        for i in np.flatnonzero(ev.kind == DELETE):
            assert sets[i] == sets[ins[int(ev.id[i])]]
