"""The term routers send an object only where a subscription can match it (PS2Stream's Definition 2,
ps2stream.txt l.102, and its dispatcher's H2, l.197; Tornado's textual summaries, tornado.txt l.99):
to the workers of those of its terms that routed a subscription before it, nowhere when none did
(strategies/routers/termmap.py, object_terms="live")."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core.events import AND, INSERT, OBJECT, TOPK, unpack_keys
from harness.families.range.oracle import oracle_keys
from strategies import registry
from strategies.base import FitContext, route_stream
from strategies.load import routing_terms
from strategies.routers.termmap import TermMapRouter
from tests.strategies.ps2stream.test_text_partitions import context, make_events
from tests.streams import random_stream

LIVE = ["text_frequency", "text_hypergraph", "text_metric", "text_hash"]  # object_terms="live" by default
TERM_ROUTED = LIVE + ["dskype_keyword"]  # every strategy whose router is a TermMapRouter


def fit(name, sample, k, ctx, **params):
    cls = registry.get(name)
    return cls().fit(sample, k, cls.make_params(params), ctx)


def expected_workers(ev, router) -> list[set]:
    """Per object row, the workers of its terms that routed a subscription inserted before it."""
    ins = np.flatnonzero(ev.kind == INSERT)
    r, t = routing_terms(ev, ins)
    first = {}
    for row, term in zip(r.tolist(), t.tolist()):
        first[term] = min(first.get(term, np.inf), int(ev.seq[row]))
    out = [set() for _ in range(len(ev))]
    for o in np.flatnonzero(ev.kind == OBJECT):
        terms = ev.values[ev.offsets[o]:ev.offsets[o + 1]].tolist()
        out[o] = {int(router.term_worker[t]) for t in terms if first.get(t, np.inf) < ev.seq[o]}
    return out


def copies(rows, workers, n) -> list[set]:
    sets = [set() for _ in range(n)]
    for r, w in zip(rows.tolist(), workers.tolist()):
        sets[r].add(w)
    return sets


@pytest.mark.parametrize("name", LIVE)
def test_an_object_goes_only_to_the_workers_of_its_routing_terms(name):
    items = [("o", [1, 7]),     # before any subscription: nowhere
             ("and", [1, 7]),   # routed by its least frequent keyword, 7 (ids are frequency ranks)
             ("or", [3, 4]),    # routed by 3 and by 4
             ("o", [1, 2]),     # 1 routed nothing (the AND query went by 7): nowhere
             ("o", [7]),        # the worker of 7
             ("o", [1, 4, 9]),  # the worker of 4 alone
             ("o", [5, 6])]     # no term of a live subscription: nowhere
    ev = make_events(items)
    router = fit(name, ev.take(np.arange(3)), 4, context(12))
    sets = copies(*route_stream(router, ev), len(ev))
    tw = router.term_worker
    assert sets[0] == set() and sets[3] == set() and sets[6] == set()
    assert sets[4] == {int(tw[7])}
    assert sets[5] == {int(tw[4])}
    # the named variant keeps the copy to the workers of all the object's terms
    old = fit(name, ev.take(np.arange(3)), 4, context(12), object_terms="all")
    sets = copies(*route_stream(old, ev), len(ev))
    assert sets[0] == {int(old.term_worker[1]), int(old.term_worker[7])}
    assert sets[6] == {int(old.term_worker[5]), int(old.term_worker[6])}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n_workers=st.integers(1, 12), name=st.sampled_from(TERM_ROUTED),
       n_queries=st.integers(1, 30))
def test_matching_pairs_meet_and_objects_go_exactly_where_routing_terms_are(seed, n_workers, name, n_queries):
    """Every (object, subscription) pair of the oracle meets on a worker, and each object's copies
    are exactly the workers of its terms that routed an earlier subscription (deletions do not
    shrink them: a documented superset), whatever the stream's deletions."""
    ev = random_stream(seed, n_objects=80, n_queries=n_queries, vocab=40)
    sample = ev.take(np.arange(max(1, len(ev) // 3)))
    df = np.bincount(ev.values, minlength=40).astype(float)
    router = fit(name, sample, n_workers, FitContext((0.0, 0.0, 100.0, 100.0), df), object_terms="live")
    rows, workers = route_stream(router, ev)
    sets = copies(rows, workers, len(ev))
    ins = {int(ev.id[r]): r for r in np.flatnonzero(ev.kind == INSERT)}
    obj = {int(ev.id[r]): r for r in np.flatnonzero(ev.kind == OBJECT)}
    qids, oids = unpack_keys(oracle_keys(ev))
    for q, o in zip(qids.tolist(), oids.tolist()):
        assert sets[ins[q]] & sets[obj[o]], f"{name}: pair ({q}, {o}) never meets"
    want = expected_workers(ev, router)
    for o in np.flatnonzero(ev.kind == OBJECT):
        assert sets[o] == want[o], (name, int(o))


def test_topk_workloads_keep_every_term():
    """A top-k subscription is initialised against the messages before it: with top-k in the
    workload a term router sends messages to the workers of all their terms."""
    ev = make_events([("o", [1, 2]), ("and", [3])])
    ev.cols["family"][1] = TOPK
    router = fit("text_frequency", ev, 3, context(6))
    assert router.object_terms == "all"
    ctx = FitContext((0.0, 0.0, 100.0, 100.0), np.ones(6), family_contexts={"topk": None})
    assert fit("text_frequency", make_events([("o", [1])]), 3, ctx).object_terms == "all"
    assert fit("text_frequency", make_events([("o", [1])]), 3, context(6)).object_terms == "live"


@pytest.mark.parametrize("name", TERM_ROUTED)
def test_a_bad_object_terms_is_named(name):
    with pytest.raises(ValueError, match=r"strategy.params.object_terms='some'.*allowed: 'live'.*'all'"):
        fit(name, make_events([("o", [1])]), 2, context(4), object_terms="some")
    with pytest.raises(ValueError, match="object_terms"):
        TermMapRouter(2, np.zeros(4, np.int64), object_terms="every")


def test_the_query_side_is_unchanged():
    """Only objects are filtered: AND subscriptions by their largest term id, OR by every term."""
    ev = make_events([("and", [2, 5]), ("or", [1, 3])])
    router = TermMapRouter(4, np.array([0, 1, 2, 3, 0, 1], np.int64))
    rows, workers = router.route_queries(ev, np.arange(2))
    got = copies(rows, workers, 2)
    assert ev.op[0] == AND and got[0] == {1} and got[1] == {1, 3}


@pytest.fixture(scope="module")
def sts_and_streams():
    """STS-Q1 and STS-Q2 streams over one dataset, AND queries only (or_fraction=0): an AND query
    is routed by its least frequent keyword, which Q2 forces outside the top 1% of terms."""
    from datasets.workloads.range import build_workload
    from harness.families.workload import WorkloadConfig
    from tests.helpers import random_objects

    objects, df, extent = random_objects(3000, vocab=2000, seed=3)
    return {p: build_workload(objects, df, extent, WorkloadConfig(name=p, profile=p, queries=300, updates=200,
                                                                  or_fraction=0.0), seed=2)
            for p in ("q1", "q2")}, FitContext(extent, df.astype(float))


@pytest.mark.parametrize("name", LIVE)
def test_rarer_query_keywords_copy_objects_less(sts_and_streams, name):
    """PS2Stream Fig. 6's reading (l.318): Q2's less frequent keywords make text partitioning send
    objects to fewer workers. Objects per measured object under the live rule fall on STS-Q2 below
    STS-Q1; copying to every term (the variant) does not see the queries at all."""
    streams, ctx = sts_and_streams

    def obj_copies(profile, object_terms):
        wl = streams[profile]
        router = fit(name, wl.sample, 8, ctx, object_terms=object_terms)
        rows, _ = route_stream(router, wl.events)
        objs = np.flatnonzero(wl.events.kind == OBJECT)
        return np.isin(rows, objs).sum() / len(objs)

    q1, q2 = obj_copies("q1", "live"), obj_copies("q2", "live")
    assert q2 < 0.7 * q1, (q1, q2)
    assert obj_copies("q2", "all") > 0.9 * obj_copies("q1", "all")  # the drop is the live rule's
