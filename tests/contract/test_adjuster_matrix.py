"""Every registered adjuster, driven by the registry: on a stream whose objects drift into a hot
spot, it moves subscriptions, and its run (plans checked, state moved) still equals the brute-force oracle, with a strategy it
adjusts. A new adjuster is covered with no test edit; one that adjusts none of the candidate
strategies fails here until it names one."""

from __future__ import annotations

import numpy as np
import pytest

from harness.engine.simulate import simulate
from strategies.adjust_base import adjuster_names, get_adjuster
from strategies.base import FitContext
from tests.strategies.sstd.test_sstd_balance import drifting_stream

# strategies with migration units, one per paper that adjusts (tried in this order)
CANDIDATES = ("kdt", "qttree", "agrid", "grid")


def _strategy_for(name: str) -> str:
    cls = get_adjuster(name)
    for s in (sorted(cls.strategies) if cls.strategies else CANDIDATES):
        if cls.applies_to(s):
            return s
    raise AssertionError(f"adjuster {name!r} adjusts none of {CANDIDATES}")


@pytest.fixture(scope="module")
def stream():
    ev = drifting_stream(seed=3)
    return ev, FitContext((0.0, 0.0, 100.0, 100.0), np.bincount(ev.values).astype(np.float64), 0)


@pytest.mark.parametrize("name", [n for n in adjuster_names() if n != "none"])
def test_every_adjuster_keeps_results_equal_to_the_oracle(stream, name):
    ev, ctx = stream
    strategy = _strategy_for(name)
    res = simulate(ev, 1200, strategy, 4, epoch_events=300, adjust=name, context=ctx,
                   strategy_params={"theta": 16} if strategy == "qttree" else None)
    assert res.exact, (name, strategy, res.digest, res.oracle_digest)
    # the hot spot is severe enough for every adjuster to act: the exactness above covered a move
    assert res.plans and sum(e["migrated_queries"] for e in res.epochs) > 0, (name, strategy)
    for plan in res.plans:  # a plan names the units that move, on the router it installs
        assert plan.router is not None and plan.router.n_workers == 4


@pytest.fixture(scope="module")
def six_types():
    """SSTD's six query types in one stream (continuous range, kNN and frequent-terms subscriptions
    beside snapshot queries): an adjuster's plan must move every family's subscriptions."""
    from harness.engine.warmup import MIXED
    from harness.families import registry as families
    from harness.families.workload import WorkloadConfig
    from tests.engine.test_rounds import random_objects

    objects, df, extent = random_objects(3000, seed=0)
    return families.get("range").build_workload(objects, df, extent,
                                                WorkloadConfig(**{**MIXED, "queries": 100, "preload_objects": 1500}), 0)


@pytest.mark.parametrize("name", [n for n in adjuster_names() if n != "none" and get_adjuster(n).applies_to("qttree")])
def test_every_qt_tree_adjuster_moves_every_familys_subscriptions_exactly(six_types, name):
    sstd = "lam" in get_adjuster(name).Params.__dataclass_fields__  # SSTD's: lambda low enough to act
    for dispatchers in (1, 3):  # the one-copy QT-tree decides objects per dispatcher
        res = simulate(six_types.events, six_types.warmup, "qttree", 4, epoch_events=500, adjust=name,
                       adjust_params={"lam": 1.2} if sstd else {}, n_dispatchers=dispatchers)
        assert res.exact, (name, dispatchers, res.digest, res.oracle_digest)
        assert res.plans or not sstd, (name, dispatchers)
