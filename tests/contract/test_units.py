"""Every strategy whose router has migration units: routing an event is exactly sending it to
the owners of its units (objects of a filtering router: a subset), and reassigning units gives a
router that routes by the new owners. Picked up from the registry like test_strategies.py."""

from __future__ import annotations

import numpy as np
import pytest

from datasets.workloads.range import build_workload
from harness.core.events import OBJECT
from harness.families.workload import WorkloadConfig
from strategies import registry
from strategies.base import FitContext, route_stream
from tests.helpers import random_objects

UNIT_STRATEGIES = [n for n in registry.supporting("range") if registry.get(n).unit_router]


@pytest.fixture(scope="module")
def tiny():
    objects, df, extent = random_objects(1500, seed=3)
    wl = build_workload(objects, df, extent, WorkloadConfig(name="tiny", profile="q3", queries=200, updates=400),
                        seed=2)
    return wl, FitContext(extent, df.astype(float), seed=2)


def _pairs(rows, workers, n_workers):
    return set((np.asarray(rows, np.int64) * n_workers + np.asarray(workers, np.int64)).tolist())


def _owner_pairs(router, ev, rows):
    r, u = router.units(ev, rows)
    owner = router.unit_owner()
    assert u.min(initial=0) >= 0 and u.max(initial=0) < len(owner)
    return _pairs(r, owner[u], router.n_workers)


def test_the_spine_grid_has_units():
    assert "grid" in UNIT_STRATEGIES


@pytest.mark.parametrize("name", UNIT_STRATEGIES)
@pytest.mark.parametrize("n_workers", [3, 8])
def test_routing_is_the_owners_of_the_units(tiny, name, n_workers):
    wl, context = tiny
    cls = registry.get(name)
    router = cls().fit(wl.sample, n_workers, cls.make_params({}), context)
    ev = wl.events
    rows, workers = route_stream(router, ev)
    is_obj = ev.kind[rows] == OBJECT
    all_rows = np.arange(len(ev))
    owners = _owner_pairs(router, ev, all_rows)
    routed = _pairs(rows, workers, n_workers)
    obj_rows = set(np.flatnonzero(ev.kind == OBJECT).tolist())
    owners_q = {k for k in owners if k // n_workers not in obj_rows}
    routed_q = {k for k in routed if k // n_workers not in obj_rows}
    assert routed_q == owners_q
    routed_o = routed - routed_q
    owners_o = owners - owners_q
    if cls.filters_objects:
        assert routed_o <= owners_o
    else:
        assert routed_o == owners_o
    assert is_obj.any() and (~is_obj).any()


@pytest.mark.parametrize("name", UNIT_STRATEGIES)
def test_reassigned_units_route_to_their_new_owners(tiny, name):
    wl, context = tiny
    cls = registry.get(name)
    router = cls().fit(wl.sample, 4, cls.make_params({}), context)
    route_stream(router, wl.events)  # routers with growing state have seen the stream
    owner = router.unit_owner()
    new_owner = (owner + 1) % 4
    moved = router.with_unit_owner(new_owner)
    np.testing.assert_array_equal(moved.unit_owner(), new_owner)
    np.testing.assert_array_equal(router.unit_owner(), owner)  # the original is untouched
    q = np.flatnonzero(wl.events.kind != OBJECT)
    r, w = moved.route_queries(wl.events, q)
    assert _pairs(r, w, 4) == _owner_pairs(moved, wl.events, q)
