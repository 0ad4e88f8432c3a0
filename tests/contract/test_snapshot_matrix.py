"""SSTD's six query types in one stream through every registered strategy at 2, 3, 8 and 16 workers
over several epochs, and with units moving between epochs: always the brute-force oracle's answers;
a strategy that says it cannot keep every object where a later snapshot query looks refuses the
workload."""

from __future__ import annotations

import pytest

from harness.engine.simulate import simulate
from harness.families import registry as families
from harness.families.workload import WorkloadConfig
from strategies import registry
from tests.helpers import random_objects



@pytest.fixture(scope="module")
def workloads():
    objects, df, extent = random_objects(1500, seed=4)
    out = {}
    for fam, proto, extra in (("range", "srq", {"area_fraction": 0.02}), ("knn", "skq", {"k_min": 1, "k_max": 6})):
        cfg = WorkloadConfig(name="tiny", family=fam, protocol=proto, queries=120, batch=20, preload_objects=800,
                             objects_per_s=100, op="and", keywords_max=1, tau_hours=200, **extra)
        out[fam] = families.get(fam).build_workload(objects, df, extent, cfg, 7)
    return out


def test_the_tiny_workloads_have_answers(workloads):
    """So that the matrix below compares something: most queries have a non-empty answer."""
    for fam, wl in workloads.items():
        keys = families.get(fam).oracle(wl.events)
        assert len({int(k) >> 32 for k in keys}) > 60, fam


def test_single_type_snapshot_streams_equal_the_oracle(workloads):
    """SRQ and SKQ streams alone (the mixed stream below runs every strategy): a space, a text and
    a broadcast strategy."""
    for family, wl in workloads.items():
        for strategy in ("quadtree", "text_frequency", "dkmsks"):
            res = simulate(wl.events, wl.warmup, strategy, 3, epoch_events=len(wl.events) // 4)
            assert res.exact, (family, strategy, res.digest, res.oracle_digest)


def test_a_strategy_that_cannot_keep_objects_is_refused(workloads, monkeypatch):
    monkeypatch.setattr(registry.get("grid"), "stores_objects", False)
    wl = workloads["range"]
    with pytest.raises(ValueError, match="strategy 'grid' cannot answer snapshot queries exactly.*strategies that can: "
                                         "agrid"):
        simulate(wl.events, wl.warmup, "grid", 4)


@pytest.mark.parametrize("name", [n for n in registry.names() if registry.get(n).filters_objects
                                  and registry.get(n).stores_objects])
def test_a_strategy_that_drops_objects_has_a_rule_to_keep_them(name):
    """Answering snapshot queries while dropping objects needs Router.store_objects of its own."""
    from harness.engine.simulate import default_context
    from strategies.base import Router

    objects, df, extent = random_objects(300, seed=1)
    wl = families.get("range").build_workload(
        objects, df, extent, WorkloadConfig(name="t", family="range", protocol="srq", queries=20, batch=10,
                                            preload_objects=200, objects_per_s=50, op="and"), 1)
    cls = registry.get(name)
    router = cls().fit(wl.sample, 3, cls.make_params({}), default_context(wl.events))
    assert type(router).store_objects is not Router.store_objects


@pytest.fixture(scope="module")
def mixed():
    """SSTD's six query types in one stream (protocol mix)."""
    objects, df, extent = random_objects(1500, seed=4)
    cfg = WorkloadConfig(name="mix", family="range", protocol="mix", types=["srq", "skq", "stq", "crq", "ckq", "ctq"],
                         queries=40, batch=20, preload_objects=600, sample_queries=10, objects_per_s=100, op="and",
                         keywords_max=1, area_fraction=0.02, k_min=2, k_max=5, ctq_span_s=4.0, ctq_step_hours=40,
                         ctq_window_hours=60, tau_hours=300)
    return families.get("range").build_workload(objects, df, extent, cfg, 1)


def test_the_mixed_stream_holds_the_six_types_with_distinct_ids(mixed):
    from harness.core.events import INSERT, KNN, RANGE, SNAPSHOT, TERMS

    ev = mixed.events
    kinds = {(int(f), int(k)) for f, k in zip(ev.family[ev.family >= 0], ev.kind[ev.family >= 0])}
    assert kinds == {(f, k) for f in (RANGE, KNN, TERMS) for k in (INSERT, SNAPSHOT)}
    for code in (RANGE, KNN, TERMS):  # each type's ids in its own hundred million
        ids = ev.id[(ev.family == code)]
        assert len(set((ids // 100_000_000).tolist())) == 2


@pytest.mark.parametrize("strategy", registry.names())
def test_the_mixed_stream_equals_the_oracle(mixed, strategy):
    for n_workers in (2, 3, 8, 16):
        res = simulate(mixed.events, mixed.warmup, strategy, n_workers, epoch_events=len(mixed.events) // 3)
        assert res.exact, (strategy, n_workers, res.digest, res.oracle_digest)


UNIT_ROUTERS = [n for n in registry.names() if registry.get(n).unit_router]


@pytest.mark.parametrize("strategy", UNIT_ROUTERS)
def test_answers_stay_exact_when_units_move_and_objects_stay(mixed, strategy):
    """Units move to random workers after every epoch; the kept objects stay where they were and
    snapshot queries also go where the earlier routers kept them (harness/engine/versions.py)."""
    from harness.engine.simulate import default_context
    from tests.engine.test_migration import RandomMoves

    adjuster = RandomMoves(RandomMoves.make_params({}), 4, default_context(mixed.events), strategy)
    res = simulate(mixed.events, mixed.warmup, strategy, 4, epoch_events=len(mixed.events) // 8, adjust=adjuster)
    assert len(res.plans) >= 3
    assert res.exact, (strategy, res.digest, res.oracle_digest)


def test_earlier_routers_are_needed_and_forgotten_past_the_look_back(mixed, monkeypatch):
    """Without the earlier routers a snapshot query misses objects kept before a move; a router
    whose objects are all older than any look-back is dropped."""
    from harness.engine import loop, versions
    from harness.engine.simulate import default_context
    from tests.engine.test_migration import RandomMoves

    old = [versions.Version("a", 10, 5.0), versions.Version("b", 20, 9.0)]
    assert [v.router for v in versions.keep_versions(old, 12.0, 4.0)] == ["b"]
    assert versions.versioned("r", []) == "r"
    monkeypatch.setattr(loop, "keep_versions", lambda older, ts_now, look_back: [])
    adjuster = RandomMoves(RandomMoves.make_params({}), 4, default_context(mixed.events), "grid")
    res = simulate(mixed.events, mixed.warmup, "grid", 4, epoch_events=len(mixed.events) // 8, adjust=adjuster)
    assert not res.exact
