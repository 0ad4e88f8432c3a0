"""Every query family x every strategy that routes it, from the registries, through the public
checkers (harness/engine/contract.py): a family's declarations are usable (`check_family_parts`),
and its own generator's tiny workload, run in process over several epochs and worker counts,
equals the family's oracle (`check_runs`, what `check_family` runs for each strategy); a strategy
that cannot route a family says so, naming the families it routes."""

from __future__ import annotations

import numpy as np
import pytest

from harness.engine.contract import check_family_parts, check_runs, tiny_workload
from harness.families import registry as families
from strategies import registry
from strategies.base import UnsupportedFamilyError

BUILT_IN = [n for n in families.names() if families.get(n).__module__.startswith("harness.families.")]
MATRIX = [(f, s) for f in BUILT_IN for s in registry.supporting(f)]


@pytest.fixture(scope="module")
def streams():
    return {name: tiny_workload(families.get(name)) for name in BUILT_IN}


def test_every_registered_family_has_its_parts():
    assert "range" in BUILT_IN
    for name in families.names():
        check_family_parts(families.get(name))


@pytest.mark.parametrize("family,strategy", MATRIX)
@pytest.mark.parametrize("n_workers", [3, 8])
def test_family_results_equal_its_oracle_over_epochs(streams, family, strategy, n_workers):
    check_runs(family, streams[family], strategy, workers=(n_workers,))


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
