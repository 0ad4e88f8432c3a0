"""Snapshot queries against the brute force, by hand and at random: the object store's look-back
and seq bounds, its ring search's ties, its eviction, the merge of local answers, and the clear
errors of bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.events import AND, KNN, OBJECT, RANGE, SNAPSHOT, Events, pair_keys
from harness.engine.simulate import simulate
from harness.families import registry as families
from harness.families.knn.oracle import snapshot_knn_keys
from harness.families.knn.snapshot import answer_knn
from harness.families.object_store import ObjectStore
from harness.families.range.oracle import snapshot_range_keys
from harness.families.range.snapshot import answer_range
from harness.families.workload import WorkloadConfig
from tests.helpers import random_objects
from tests.streams import item_events, random_snapshot_stream


def _snapshot(ev: Events, rows, tau, family=RANGE, k=0) -> Events:
    cols = {c: v.copy() for c, v in ev.cols.items()}
    cols["kind"][rows] = SNAPSHOT
    cols["family"][rows] = family
    cols["tau"] = np.where(np.isin(np.arange(len(ev)), rows), tau, np.nan)
    cols["k"][rows] = k
    return Events(cols, ev.offsets, ev.values)


# SSTD Figs. 2-3 rebuilt (the paper's coordinates are lost): region P = [0, 8]^2, five objects, one
# SRQ for keyword a over [2.5, 6.5] x [1.5, 6]; o2 and o4 hold a inside it, o3 is inside without a.
FIG2 = [("o", 1, 1, [0]), ("o", 3, 5, [0, 1]), ("o", 5, 5, [1]), ("o", 6, 2, [0, 2]), ("o", 7, 7, [2]),
        ("q", (2.5, 1.5, 6.5, 6.0), [0], AND)]


@pytest.mark.parametrize("strategy", ["grid", "quadtree", "qttree", "text_only", "text_frequency", "hash", "agrid"])
def test_sstd_figure_2_query_answer(strategy):
    ev = _snapshot(item_events(FIG2), [5], tau=100.0)
    res = simulate(ev, 5, strategy, 4)
    assert res.exact
    assert sorted(snapshot_range_keys(ev, RANGE).tolist()) == [int(pair_keys(5, 1)), int(pair_keys(5, 3))]


def test_a_textual_split_asks_one_worker_a_spatial_split_every_overlapped_one():
    """SSTD Fig. 3: the text partitioner visits the keyword's owner only; the grid every quadrant."""
    from harness.engine.simulate import default_context
    from strategies import registry

    ev = _snapshot(item_events(FIG2), [5], tau=100.0)
    reached = {}
    for name in ("text_frequency", "grid"):
        cls = registry.get(name)
        router = cls().fit(ev.take(np.arange(5)), 4, cls.make_params({}), default_context(ev))
        rows, workers = router.route(ev)
        reached[name] = set(workers[rows == 5].tolist())
    assert len(reached["text_frequency"]) == 1
    assert len(reached["grid"]) > 1


def _store(objects: Events, look_back: float = 1e9, cells: int = 4) -> ObjectStore:
    store = ObjectStore((0.0, 0.0, 10.0, 10.0), cells, look_back, 8)
    store.add(objects)
    return store


def test_look_back_and_arrival_bounds():
    """Visible: seq < the query's, ts > t_q - tau (an object exactly tau old is out)."""
    items = [("o", 1, 1, [1]), ("o", 2, 2, [1]), ("o", 3, 3, [1]), ("q", (0, 0, 9, 9), [1], AND), ("o", 4, 4, [1])]
    ev = item_events(items)
    ev.cols["ts"] = np.array([0.0, 5.0, 10.0, 10.0, 10.0])
    ev = _snapshot(ev, [3], tau=5.0)
    keys, work = answer_range(_store(ev), ev, np.array([3]))
    assert sorted((keys & 0xFFFFFFFF).tolist()) == [2]  # o1 is 10 old, o2 exactly 5 (out), o4 after
    assert sorted(snapshot_range_keys(ev, RANGE).tolist()) == sorted(keys.tolist())
    assert work[0] >= 1


def test_equal_distances_the_older_object_wins(monkeypatch):
    from harness.families.knn import snapshot

    items = [("o", 8, 5, [1]), ("o", 2, 5, [1]), ("o", 5, 8, [1]), ("q", (0, 0, 10, 10), [1], AND)]
    ev = item_events(items)
    ev.cols["x"][3], ev.cols["y"][3] = 5.0, 5.0
    ev = _snapshot(ev, [3], tau=1e9, family=KNN, k=2)
    for direct in (0, 2048):  # the ring search, and the keyword's holders checked directly
        monkeypatch.setattr(snapshot, "DIRECT_POSTINGS", direct)
        ids, d2, _ = answer_knn(_store(ev), ev, np.array([3]))
        assert ids[:, 1].tolist() == [0, 1] and d2.tolist() == [9.0, 9.0]
    assert sorted((snapshot_knn_keys(ev, KNN) & 0xFFFFFFFF).tolist()) == [0, 1]


def test_the_store_forgets_what_no_query_of_the_epoch_can_see():
    """Once per epoch, at its first slice: a query of the epoch may be answered after it (a
    two-round query's second round), so later slices forget nothing."""
    items = [("o", i % 10, i % 7, [1]) for i in range(40)]
    ev = item_events(items)
    ev.cols["ts"] = np.arange(40, dtype=np.float64)
    store = ObjectStore((0.0, 0.0, 10.0, 10.0), 4, 5.0, 8)
    store.add(ev.take(np.arange(20)))
    store.add(ev.take(np.arange(20, 30)))
    assert len(store.objects) == 30  # the same epoch: the query at ts 0 may still be answered
    store.restore(store.objects)  # the next epoch
    store.add(ev.take(np.arange(30, 40)))
    assert store.objects.ts.min() > 30 - 5.0  # its first slice starts at ts 30
    assert len(store.objects) == 14


@settings(max_examples=24, deadline=None)
@given(seed=st.integers(0, 10_000), knn=st.booleans(), mixed=st.booleans(), workers=st.sampled_from([1, 3, 5]),
       strategy=st.sampled_from(["grid", "text_frequency", "qttree", "kop"]), direct=st.sampled_from([0, 2048]))
def test_random_snapshot_streams_equal_the_oracle(seed, knn, mixed, workers, strategy, direct):
    """Snapshot queries with and without subscriptions of the same family beside them, over
    several epochs: the run's answers are the oracle's (kNN ones by the ring search, `direct` 0,
    or from the rarest keyword's holders)."""
    from harness.families.knn import snapshot

    snapshot.DIRECT_POSTINGS = direct  # read at each call; hypothesis runs examples in turn
    ev = random_snapshot_stream(seed, KNN if knn else RANGE, with_subscriptions=mixed)
    warm = int(np.flatnonzero(ev.kind != OBJECT)[0]) if (ev.kind != OBJECT).any() else len(ev)
    if strategy == "kop" and not knn:
        strategy = "hash"
    try:
        res = simulate(ev, max(warm, 1), strategy, workers, epoch_events=max(len(ev) // 4, 1))
    finally:
        snapshot.DIRECT_POSTINGS = 2048
    assert res.exact, (seed, knn, mixed, workers, strategy, direct)


def test_a_look_back_that_is_not_positive_is_refused():
    ev = _snapshot(item_events(FIG2), [5], tau=0.0)
    with pytest.raises(ValueError, match=r"tau=0\.0; allowed: a look-back in seconds > 0"):
        simulate(ev, 5, "grid", 2)


def test_event_time_going_back_is_refused_with_snapshot_queries():
    ev = _snapshot(item_events(FIG2), [5], tau=10.0)
    ev.cols["ts"] = np.array([0.0, 2.0, 1.0, 3.0, 4.0, 5.0])
    with pytest.raises(ValueError, match="ts nondecreasing in seq"):
        simulate(ev, 5, "grid", 2)


@pytest.mark.parametrize("field,value,allowed", [
    ("area_fraction", 0.0, "a share of the extent's area"), ("area_fraction", 2.0, "a share of the extent's area"),
    ("k_min", 0, "an integer >= 1"), ("batch", 0, "an integer >= 1"), ("tau_hours", -1.0, "a number > 0"),
    ("batch_every_s", 0.0, "a number > 0"), ("hour_s", 0.0, "a number > 0, or null")])
def test_bad_snapshot_workload_settings_are_named(field, value, allowed):
    cfg = WorkloadConfig(name="t", family="range", protocol="srq", op="and", **{field: value})
    with pytest.raises(ValueError, match=f"workload.{field}={value!r} is invalid; allowed: {allowed}"):
        families.get("range").validate_workload(cfg)


def test_the_generator_sends_batches_after_the_preload():
    """The warm-up: the preload, then the sample queries; then a batch every batch_every_s."""
    objects, df, extent = random_objects(400, seed=2)
    cfg = WorkloadConfig(name="t", family="knn", protocol="skq", op="and", queries=50, batch=20, preload_objects=300,
                         sample_queries=20, objects_per_s=100, batch_every_s=2.0, k_min=3, k_max=3)
    wl = families.get("knn").build_workload(objects, df, extent, cfg, 3)
    ev = wl.events
    snap = np.flatnonzero(ev.kind == SNAPSHOT)
    assert wl.warmup == 320 and (ev.kind[:300] == OBJECT).all() and (ev.kind[300:320] == SNAPSHOT).all()
    assert len(snap) == 70 and sorted(np.unique(ev.ts[snap]).tolist()) == [3.0, 5.0, 7.0, 9.0]
    assert (ev.k[snap] == 3).all() and (ev.family[snap] == KNN).all() and (ev.tau[snap] > 0).all()
    assert (np.diff(ev.ts) >= 0).all() and len(np.unique(ev.id[snap])) == 70


def test_snapshot_regions_and_k_are_checked_against_the_space():
    from dataclasses import replace

    from harness.engine.simulate import default_context

    ev = _snapshot(item_events(FIG2), [5], tau=10.0)
    ev.cols["xmin"][5], ev.cols["xmax"][5] = 100.0, 120.0
    context = replace(default_context(ev), extent=(0.0, 0.0, 8.0, 8.0))
    with pytest.raises(ValueError, match=r"region=\(100.0, 1.5, 120.0, 6.0\); allowed: a rectangle meeting the space"):
        simulate(ev, 5, "grid", 2, context=context)
    knn = _snapshot(item_events(FIG2), [5], tau=10.0, family=KNN, k=0)
    for c, v in zip(("xmin", "ymin", "xmax", "ymax"), (0.0, 0.0, 8.0, 8.0)):
        knn.cols[c][5] = v
    with pytest.raises(ValueError, match="has k=0; allowed: an integer >= 1"):
        simulate(knn, 5, "grid", 2, context=context)
    knn.cols["k"][5], knn.cols["xmax"][5] = 3, 6.0
    with pytest.raises(ValueError, match="allowed: a rectangle covering every object"):
        simulate(knn, 5, "grid", 2, context=context)


@pytest.mark.parametrize("slice_size", [0, 4])
def test_a_query_one_worker_counts_alone_sends_its_top_k_only(slice_size):
    """terms_answers (through answer_terms): with one bit in the query's mask every object is
    counted here, so only the top k terms by (count desc, term asc) go to the merge; with two bits
    every counted term goes (another worker counts the rest). Counts from a plain tally of the
    objects in the rectangle."""
    from harness.families.terms.snapshot import answer_terms, count_tables

    rng = np.random.default_rng(5)
    items = [("o", float(x), float(y), sorted(set(rng.integers(0, 12, 4).tolist())))
             for x, y in rng.uniform(0, 10, (300, 2))]
    items.append(("q", (1.0, 1.0, 8.5, 8.0), [], AND))
    ev = item_events(items)
    ev.cols["ts"] = np.arange(len(ev), dtype=np.float64)
    ev.cols["kind"][-1], ev.cols["tau"], ev.cols["k"][-1] = SNAPSHOT, np.full(len(ev), 1e9), 3
    store = ObjectStore((0.0, 0.0, 10.0, 10.0), 8, 1e9, 12)
    store.add(ev)
    o, rows = store.objects, np.array([len(ev) - 1])
    inside = (o.x >= 1.0) & (o.x <= 8.5) & (o.y >= 1.0) & (o.y <= 8.0)
    tally = np.bincount(np.concatenate([o.values[o.offsets[p]:o.offsets[p + 1]] for p in np.flatnonzero(inside)]),
                        minlength=12)
    best = sorted(range(12), key=lambda t: (-tally[t], t))[:3]
    o_mask = np.ones((len(o), 1), np.uint64)  # every object held by worker 0 alone
    tables = count_tables(store, np.ones(len(o), np.bool_), max(slice_size, 1))
    for q_bits, expect in ((1, best), (3, [t for t in range(12) if tally[t]])):
        q_mask = np.full((1, 1), q_bits, np.uint64)
        _, term, count = answer_terms(store, ev, rows, q_mask, o_mask, 0, np.ones(1, np.int64), slice_size, tables)
        assert sorted(term.tolist()) == sorted(expect)
        assert count.tolist() == tally[term].tolist()
