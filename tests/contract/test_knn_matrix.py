"""The kNN family through every strategy that routes it, at the worker counts test_families.py
leaves out (2 and 16; it runs 3 and 8), and with adjusters moving subscriptions, their kept
results and replicas between epochs: always the oracle's entries. The replicas that feedback
makes unneeded are dropped along the way, and results stay exact."""

from __future__ import annotations

import pytest

from harness.engine.simulate import default_context, simulate
from harness.families import registry as families
from harness.families.workload import WorkloadConfig
from strategies import registry
from tests.engine.test_migration import RandomMoves
from tests.helpers import random_objects

STRATEGIES = registry.supporting("knn")


@pytest.fixture(scope="module")
def knn():
    objects, df, extent = random_objects(1500, seed=4)
    cfg = WorkloadConfig(name="tiny", family="knn", queries=150, updates=300)
    return families.get("knn").build_workload(objects, df, extent, cfg, 7)


def test_every_strategy_but_none_routes_knn():
    assert set(STRATEGIES) == set(registry.names())


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("n_workers", [2, 16])
def test_knn_results_equal_the_oracle(knn, strategy, n_workers):
    res = simulate(knn.events, knn.warmup, strategy, n_workers, epoch_events=len(knn.events) // 5)
    assert res.exact, (strategy, n_workers, res.digest, res.oracle_digest)
    assert res.feedback_rows > 0  # the global k-th distances flowed back


@pytest.mark.parametrize("strategy,adjust,params", [
    ("kdt", "gr", {}), ("qttree", "pm", {}), ("agrid", "tornado", {}), ("grid", "dp", {})])
def test_knn_stays_exact_when_an_adjuster_moves_state(knn, strategy, adjust, params):
    res = simulate(knn.events, knn.warmup, strategy, 4, epoch_events=len(knn.events) // 8, adjust=adjust,
                   adjust_params=params)
    assert res.exact, (strategy, adjust)


@pytest.mark.parametrize("strategy", ["kop", "sop", "dkmsks"])
@pytest.mark.parametrize("n_workers", [2, 8])
def test_dkmsks_methods_with_their_paper_indexes(knn, strategy, n_workers):
    """index.knn.layout=paper: KOP's inverted file, SOP's subsets with their R, DkM-SKS's grid."""
    res = simulate(knn.events, knn.warmup, strategy, n_workers, epoch_events=len(knn.events) // 5,
                   index_params={"knn": {"layout": "paper"}})
    assert res.exact, (strategy, n_workers)


@pytest.mark.parametrize("strategy", ["qttree", "quadtree", "text_only"])
@pytest.mark.parametrize("adjust", ["none", "pm", "fg"])
def test_sstd_routing_ckqs_to_every_worker_is_exact(knn, strategy, adjust):
    """SSTD's own CKQ rule (ckq_routing: all): every worker holds every CKQ, objects one leaf each;
    the adjuster's rebuilt trees keep the rule."""
    res = simulate(knn.events, knn.warmup, strategy, 4, epoch_events=len(knn.events) // 6, adjust=adjust,
                   strategy_params={"ckq_routing": "all"})
    assert res.exact, (strategy, adjust)
    assert sum(e.get("replicas_dropped", 0) for e in res.epochs) == 0  # every worker stays on its route


def test_knn_stays_exact_under_random_migrations(knn):
    context = default_context(knn.events, 3)
    adjuster = RandomMoves(RandomMoves.make_params({}), 4, context, "grid")
    res = simulate(knn.events, knn.warmup, "grid", 4, epoch_events=len(knn.events) // 8, adjust=adjuster,
                   strategy_params={"cells_per_side": 8}, context=context)
    assert res.plans and sum(e["migrated_queries"] for e in res.epochs) > 0
    assert res.exact


def test_space_partitioners_drop_replicas_the_balls_left():
    objects, df, extent = random_objects(3000, seed=5)
    cfg = WorkloadConfig(name="tiny", family="knn", queries=200, updates=200, init_objects=2000)
    wl = families.get("knn").build_workload(objects, df, extent, cfg, 3)
    res = simulate(wl.events, wl.warmup, "grid", 8, epoch_events=len(wl.events) // 6,
                   strategy_params={"cells_per_side": 8})
    assert res.exact
    dropped = sum(e.get("replicas_dropped", 0) for e in res.epochs)
    assert dropped > 0
