"""Every built-in query family x every strategy that routes it, from the registries: its own
workload generator's stream, run in process over several epochs and worker counts, equals the
family's oracle; a strategy that cannot route a family says so, naming the families it routes."""

from __future__ import annotations

import numpy as np
import pytest

from datasets.workloads.config import WorkloadConfig
from harness.core.events import SNAPSHOT
from harness.engine.simulate import simulate
from harness.families import registry as families
from strategies import registry
from strategies.base import UnsupportedFamilyError
from tests.helpers import random_objects

BUILT_IN = [n for n in families.names() if families.get(n).__module__.startswith("harness.families.")]
MATRIX = [(f, s) for f in BUILT_IN for s in registry.supporting(f)]
# a family's own generator settings where the shared defaults do not make its workload (terms: SSTD's
# CTQ, registrations and their reports over a preloaded store)
SETTINGS = {"frequent_terms": dict(protocol="ctq", queries=40, preload_objects=800, objects_per_s=100, ctq_span_s=6.0,
                          area_fraction=0.02, ctq_step_hours=40.0, ctq_window_hours=60.0, k_min=3, k_max=5)}


@pytest.fixture(scope="module")
def streams():
    objects, df, extent = random_objects(1500, seed=4)
    out = {}
    for name in BUILT_IN:
        cfg = WorkloadConfig(**{**dict(name="tiny", family=name, queries=150, updates=300, window=300,
                                       measured_messages=500), **SETTINGS.get(name, {})})
        wl = families.get(name).build_workload(objects, df, extent, cfg, 7)
        out[name] = wl
    return out


def test_every_built_in_family_has_its_parts():
    assert "range" in BUILT_IN
    for name in BUILT_IN:
        fam = families.get(name)
        assert families.by_code(fam.code) is fam
        assert fam.index.family == name and fam.merger.blocks is not None
        fam.check_params(fam.make_params({}))  # the defaults run


@pytest.mark.parametrize("family,strategy", MATRIX)
@pytest.mark.parametrize("n_workers", [3, 8])
def test_family_results_equal_its_oracle_over_epochs(streams, family, strategy, n_workers):
    wl = streams[family]
    if (wl.events.kind == SNAPSHOT).any() and not registry.get(strategy).stores_objects:
        with pytest.raises(ValueError, match="cannot answer snapshot queries exactly"):
            simulate(wl.events, wl.warmup, strategy, n_workers)
        return
    res = simulate(wl.events, wl.warmup, strategy, n_workers, epoch_events=len(wl.events) // 4)
    assert len(res.epochs) >= 2
    assert res.exact, (family, strategy, res.digest, res.oracle_digest)


def test_a_family_a_router_does_not_route_is_a_clear_error():
    router = registry.get("grid")().fit(*_tiny_fit())
    ev = _tiny_fit()[0]
    ev.cols["family"][ev.family >= 0] = families.get("range").code + 100  # no such family
    with pytest.raises(UnsupportedFamilyError, match="cannot route .*supports \\['frequent_terms', 'range'\\]"):
        router.route(ev)


def _tiny_fit():
    from strategies.base import FitContext
    from tests.streams import random_stream

    ev = random_stream(seed=2, n_objects=40, n_queries=10)
    df = np.bincount(ev.values, minlength=int(ev.values.max()) + 1).astype(float)
    return ev, 2, registry.get("grid").make_params({}), FitContext((-5.0, -5.0, 105.0, 105.0), df)
