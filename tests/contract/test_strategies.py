"""Every registered strategy, picked up from the registry: it passes the public `check_strategy`,
results equal the oracle's, and the routing invariant holds (every matching pair meets on a common worker; a deletion reaches every
worker its insertion reached)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datasets.workloads.range import build_workload
from harness.core.events import DELETE, INSERT, OBJECT, sorted_unique, unpack_keys
from harness.engine.contract import check_strategy
from harness.families.base import IndexContext, StateBundle
from harness.families.range.gi2 import GI2Index
from harness.families.range.oracle import oracle_keys
from harness.families.workload import WorkloadConfig
from strategies import registry
from strategies.base import FitContext, route_stream
from tests.helpers import random_objects
from tests.streams import random_stream

STRATEGIES = registry.supporting("range")


@pytest.fixture(scope="module")
def tiny():
    objects, df, extent = random_objects(2000, seed=11)
    cfg = WorkloadConfig(name="tiny", profile="q3", queries=300, updates=600)
    wl = build_workload(objects, df, extent, cfg, seed=5)
    return wl, df, extent


def route_and_match(name, events, sample, n_workers, df, extent):
    cls = registry.get(name)
    router = cls().fit(sample, n_workers, cls.make_params({}), FitContext(extent, df.astype(float)))
    rows, workers = route_stream(router, events)
    assert rows.dtype == np.int64 and workers.dtype == np.int64
    assert workers.min(initial=0) >= 0 and workers.max(initial=0) < n_workers
    keys = []
    for w in range(n_workers):
        sub = np.sort(rows[workers == w])
        idx = GI2Index(IndexContext(extent, len(df)))
        idx.restore(StateBundle())
        keys.append(idx.process(events.take(sub)).results)
    return sorted_unique(np.concatenate(keys)), rows, workers


@pytest.mark.parametrize("name", registry.names())
def test_every_strategy_passes_its_public_contract_check(name):
    """check_strategy (harness/engine/contract.py) without the family runs, which
    tests/contract/test_families.py makes for every family: its parameters, the families its router
    routes (route_<family> methods, and only those) and the routing invariant on small STS streams."""
    done = check_strategy(registry.get(name), families=[])
    assert done[0] == "parameters" and len(done) == 4


def test_registry_lists_the_spine_strategies():
    assert {"grid", "kdtree", "text_frequency", "hash"} <= set(STRATEGIES)


@pytest.mark.parametrize("name", STRATEGIES)
@pytest.mark.parametrize("n_workers", [2, 3, 8, 16])
def test_merged_results_equal_the_oracle(tiny, name, n_workers):
    wl, df, extent = tiny
    expected = oracle_keys(wl.events)
    assert len(expected) > 100  # the workload is dense enough to mean something
    got, _, _ = route_and_match(name, wl.events, wl.sample, n_workers, df, extent)
    np.testing.assert_array_equal(got, expected)


def worker_sets(rows, workers, n_events):
    sets = [set() for _ in range(n_events)]
    for r, w in zip(rows.tolist(), workers.tolist()):
        sets[r].add(w)
    return sets


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n_workers=st.integers(1, 16), name=st.sampled_from(STRATEGIES))
def test_routing_invariant(seed, n_workers, name):
    ev = random_stream(seed, n_objects=80, n_queries=30)
    cut = max(1, len(ev) // 3)
    sample = ev.take(np.arange(cut))
    cls = registry.get(name)
    df = np.bincount(ev.values, minlength=12).astype(float)
    router = cls().fit(sample, n_workers, cls.make_params({}), FitContext((0.0, 0.0, 100.0, 100.0), df))
    rows, workers = route_stream(router, ev)
    sets = worker_sets(rows, workers, len(ev))
    row_of_insert = {int(ev.id[r]): r for r in np.flatnonzero(ev.kind == INSERT)}
    row_of_object = {int(ev.id[r]): r for r in np.flatnonzero(ev.kind == OBJECT)}
    qids, oids = unpack_keys(oracle_keys(ev))
    for q, o in zip(qids.tolist(), oids.tolist()):
        assert sets[row_of_insert[q]] & sets[row_of_object[o]], f"{name}: pair ({q}, {o}) never meets"
    for r in np.flatnonzero(ev.kind == DELETE):
        assert sets[r] == sets[row_of_insert[int(ev.id[r])]], f"{name}: deletion routed unlike its insertion"


def test_unknown_strategy_lists_the_registered_ones():
    with pytest.raises(ValueError) as err:
        registry.get("gird")
    for name in STRATEGIES:
        assert name in str(err.value)
