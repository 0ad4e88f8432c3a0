"""Top-k over a time-based window (Skype Sec. 6.3, `workload.window_by=time`): a message stays for
T seconds of the dataset's own time, so the window's size follows the arrival rate. Every strategy
that routes top-k equals the oracle, which reads T from the subscriptions and applies it itself;
a count window of the same mean size gives other entries (the rule is live); bad values are
refused naming the field."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from harness.core.events import OBJECT, digest_of
from harness.engine.simulate import simulate
from harness.families import registry as families
from harness.families.topk.oracle import topk_oracle
from harness.families.workload import WorkloadConfig
from strategies import registry
from tests.helpers import random_objects


def bursty(n=1500, seed=4):
    """random_objects with arrivals alternating between 1 and 20 per second, 100 messages at a time."""
    objects, df, extent = random_objects(n, seed=seed)
    rng = np.random.default_rng(seed)
    rate = np.where((np.arange(n) // 100) % 2 == 0, 1.0, 20.0)
    ts = np.cumsum(rng.exponential(1.0 / rate))
    return objects.set_column(objects.schema.get_field_index("ts"), "ts", pa.array(ts)), df, extent


def workload(window_by="time", window_s=40.0, window=250, objects=None):
    objects, df, extent = objects or bursty()
    cfg = WorkloadConfig(name="tiny", family="topk", queries=100, window=window, measured_messages=500, k_min=3,
                         k_max=8, window_by=window_by, window_s=window_s)
    return families.get("topk").build_workload(objects, df, extent, cfg, 11)


@pytest.fixture(scope="module")
def timed():
    return workload()


def test_the_window_holds_the_last_T_seconds_whatever_their_count(timed):
    ev = timed.events
    objs = np.flatnonzero(ev.kind == OBJECT)
    leaves = np.isfinite(ev.win[objs])
    stay = ev.ts[ev.win[objs][leaves].astype(np.int64)] - ev.ts[objs][leaves]
    assert (stay >= 40.0).all()  # a message leaves only once T seconds have passed
    before = ev.win[objs][leaves].astype(np.int64)
    prior = objs[np.searchsorted(objs, before) - 1]  # the message before the one it leaves with
    assert (ev.ts[prior] - ev.ts[objs][leaves] < 40.0).all()  # ... and at the first message that late
    sizes = np.searchsorted(objs, before) - np.flatnonzero(leaves)
    # slow stretches hold about 40 messages (40 s at 1/s); one starting a fast block holds the block
    # (100 messages in 5 s) and about 35 s of the slow one after it
    assert sizes.min() < 50 and sizes.max() > 110
    assert timed.info["window"] == int(np.searchsorted(ev.ts[objs], ev.ts[objs[0]] + 40.0))


@pytest.mark.parametrize("strategy", registry.supporting("topk"))
def test_every_strategy_equals_the_oracle(timed, strategy):
    res = simulate(timed.events, timed.warmup, strategy, 3, epoch_events=len(timed.events) // 4)
    assert res.exact, (strategy, res.digest, res.oracle_digest)


@pytest.mark.parametrize("reevaluation", ["cskyband", "kmax"])
@pytest.mark.parametrize("method", families.get("topk").methods)
def test_every_method_equals_the_oracle_on_a_time_window(timed, method, reevaluation):
    """Skype's Fig. 20 pair (IGPT-cSkyband against CIQ-Kmax, skype.txt l.813) and the rest."""
    res = simulate(timed.events, timed.warmup, "hash", 1, epoch_events=len(timed.events) // 4,
                   index_params={"topk": {"method": method, "reevaluation": reevaluation}})
    assert res.exact, (method, reevaluation, res.digest, res.oracle_digest)


def test_a_count_window_of_the_same_fill_gives_other_entries(timed):
    count = workload(window_by="count", window=timed.info["window"])
    assert digest_of(topk_oracle(timed.events)) != digest_of(topk_oracle(count.events))


@pytest.mark.parametrize("field,value,allowed", [
    ("window_by", "sliding", "count .* or time"), ("window_s", 0.0, "a number of seconds > 0"),
    ("window_s", 1e9, "spans the whole dataset")])
def test_bad_time_windows_are_refused_naming_the_field(field, value, allowed):
    kwargs = {"window_by": "time", "window_s": 40.0, field: value}
    with pytest.raises(ValueError, match=f"workload.{field}={value!r}.*{allowed}"):
        workload(**kwargs)
