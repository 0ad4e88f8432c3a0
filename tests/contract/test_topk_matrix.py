"""The top-k family through every strategy that routes it: the generator's stream at the worker
counts test_families.py leaves out (2 and 16), random streams with registrations, deletions, ties
and refills (hypothesis), and the refusals: strategies that cannot route top-k, adjusters (a
replica's state is its worker's own), bad workload values, all before Spark starts."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.engine.simulate import simulate
from harness.families import registry as families
from harness.families.workload import WorkloadConfig
from harness.run.config import ConfigError, validate
from strategies import registry
from tests.run.test_config import composed
from tests.helpers import random_objects
from tests.streams import random_topk_stream

STRATEGIES = registry.supporting("topk")
METHODS = families.get("topk").methods  # every index.topk.method (IGPT, IPT, CIQ)


@pytest.fixture(scope="module")
def topk():
    objects, df, extent = random_objects(1500, seed=4)
    cfg = WorkloadConfig(name="tiny", family="topk", queries=120, window=250, measured_messages=400, k_min=3,
                         k_max=8)
    return families.get("topk").build_workload(objects, df, extent, cfg, 11)


def test_the_term_partitioners_and_hash_route_topk_and_space_partitioners_do_not():
    assert {"hash", "text_frequency", "text_hash", "text_hypergraph", "text_metric"} <= set(STRATEGIES)
    assert not {"grid", "kdtree", "kdt", "qttree", "agrid", "dkmsks", "sop"} & set(STRATEGIES)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("n_workers", [2, 16])
def test_topk_results_equal_the_oracle(topk, strategy, n_workers, method):
    res = simulate(topk.events, topk.warmup, strategy, n_workers, epoch_events=len(topk.events) // 5,
                   index_params={"topk": {"method": method}})
    assert len(res.epochs) >= 2
    assert res.exact, (strategy, n_workers, method, res.digest, res.oracle_digest)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), strategy=st.sampled_from(STRATEGIES), n_workers=st.sampled_from([1, 2, 3, 8]),
       epoch=st.integers(1, 40), window=st.integers(1, 30))
def test_random_streams_equal_the_oracle(seed, strategy, n_workers, epoch, window):
    ev = random_topk_stream(seed, n_objects=60, n_queries=12, window=window)
    res = simulate(ev, window, strategy, n_workers, epoch_events=epoch)
    assert res.exact, (seed, strategy, n_workers, epoch, window)


def test_a_strategy_that_cannot_route_topk_names_those_that_can():
    with pytest.raises(ConfigError, match="does not route 'topk' queries.*strategies that do: .*hash"):
        validate(composed("workload=topk_q", "strategy=grid"))
    runs = validate(composed("workload=topk_q", "strategy=all"))
    assert [r.name for r in runs] == STRATEGIES


def test_adjusters_refuse_topk():
    with pytest.raises(ConfigError, match="cannot run a 'topk' workload.*allowed: adjust=none"):
        validate(composed("workload=topk_q", "strategy=text_frequency", "adjust=gr", "epochs.size=1000"))
    ev = random_topk_stream(1)
    with pytest.raises(ValueError, match="cannot run a 'topk' stream"):
        simulate(ev, 15, "text_frequency", 2, epoch_events=10, adjust="gr")


@pytest.mark.parametrize("override,message", [
    ("workload.alpha_low=0", "alpha_low=0.0 is invalid; allowed: a number strictly between 0 and 1"),
    ("workload.alpha_high=1.0", "alpha_high=1.0 is invalid; allowed: a number strictly between 0 and 1"),
    ("workload.k_min=0", "k_min=0 is invalid; allowed: an integer >= 1"),
    ("workload.window=0", "window=0 is invalid; allowed: an integer >= 1"),
])
def test_bad_topk_workload_values_are_named(override, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate(composed("workload=topk_q", "strategy=hash", override))


def test_an_epoch_as_long_as_the_window_is_refused_for_threshold_routing_only():
    for strategy in ("dskype_prefix", "dskype_spatial_first"):
        with pytest.raises(ConfigError, match=r"epochs.size=2000 is invalid; allowed: an epoch shorter than the top-k "
                                              r"window \(workload.window=2000 messages\) for " + strategy):
            validate(composed("workload=topk_q", f"strategy={strategy}", "workload.window=2000", "epochs.size=2000"))
    with pytest.raises(ConfigError, match="workload.measured_messages=10000 is invalid; .*window=5000"):
        validate(composed("workload=topk_q", "strategy=dskype_prefix", "workload.window=5000"))  # one epoch
    validate(composed("workload=topk_q", "strategy=dskype_prefix", "workload.window=2000", "epochs.size=1999"))
    validate(composed("workload=topk_q", "strategy=hash", "workload.window=2000", "epochs.size=2000"))
    for bad in ("0", "-3", "inf", "true"):  # cSkyband's price of a scored pair
        with pytest.raises(ConfigError, match=f"index.topk.pair_cost={bad if bad != 'true' else 'True'}.* is invalid; "
                                              "allowed: a finite number > 0"):
            validate(composed("workload=topk_q", "strategy=hash", f"index.topk.pair_cost={bad}"))
    validate(composed("workload=topk_q", "strategy=hash", "index.topk.pair_cost=75"))


def test_a_window_larger_than_the_dataset_is_refused():
    objects, df, extent = random_objects(100, seed=1)
    cfg = WorkloadConfig(name="t", family="topk", queries=5, window=101, measured_messages=10)
    with pytest.raises(ValueError, match="window=101 is larger than the dataset \\(100 objects\\); allowed: at most 100"):
        families.get("topk").build_workload(objects, df, extent, cfg, 1)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), mode=st.sampled_from(["cskyband", "skyband", "recompute", "kmax"]),
       strategy=st.sampled_from(["hash", "dskype_keyword", "dskype_prefix"]), epoch=st.integers(4, 40),
       window=st.integers(1, 30), pair_cost=st.sampled_from([1.0, 150.0, 1e6]), method=st.sampled_from(METHODS))
def test_every_reevaluation_mode_equals_the_oracle(seed, mode, strategy, epoch, window, pair_cost, method):
    ev = random_topk_stream(seed, n_objects=70, n_queries=10, window=window, k_max=6)
    res = simulate(ev, window, strategy, 3, epoch_events=epoch,
                   index_params={"topk": {"reevaluation": mode, "skyband_ratio": 0.8, "kmax": 4,
                                          "pair_cost": pair_cost, "method": method}})
    assert res.exact, (seed, mode, strategy, epoch, window, pair_cost, method)


def test_every_method_is_tested_and_a_bad_method_is_refused_naming_the_allowed():
    assert set(METHODS) == {"igpt", "ipt", "ciq"}
    with pytest.raises(ConfigError, match="index.topk.method='tree'.*allowed: igpt, ipt, ciq"):
        validate(composed("workload=topk_q", "strategy=hash", "index.topk.method=tree"))
