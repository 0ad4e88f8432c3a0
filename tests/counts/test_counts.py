"""The count mode (harness/counts/, issue 51 part 1): its per-worker counts are those of the
ordinary in-process run for every registered range strategy (and an adjusted one, migrations
included), its results equal the oracle's, a sampled run's scaled counts fall within their stated
error of the full counts, and bad knobs fail naming field, value and what is allowed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from datasets.workloads.anomalies import normalise_prefix
from datasets.workloads.range import build_workload
from harness.counts.app import check_counts
from harness.counts.tally import SCALED, check_sampling, count_run, count_stream, sample_objects
from harness.engine.epochs import epoch_bounds
from harness.engine.simulate import default_context, run_stream, simulate
from harness.families.workload import WorkloadConfig
from harness.report.results import PROJECT_ROOT
from harness.run.config import ConfigError, register_configs
from strategies import registry
from tests.contract.test_adjuster_matrix import _strategy_for
from tests.helpers import random_objects
from tests.strategies.sstd.test_sstd_balance import drifting_stream

register_configs()
INDEX = {"range": {"cells_per_side": 16}}  # simulate's default for tiny streams
WORKER_COUNTERS = ("events", "objects", "inserts", "deletes", "candidates", "results", "restored", "kept")


@pytest.fixture(scope="module")
def tiny():
    objects, df, extent = random_objects(2000, seed=11)
    wl = build_workload(objects, df, extent, WorkloadConfig(name="tiny", profile="q3", queries=300, updates=600), 5)
    events, warmup, anomalies = normalise_prefix(wl.events, wl.warmup)
    return events, warmup, anomalies, default_context(events)


def ordinary_worker_stats(cls, events, warmup, anomalies, context, n_workers, epoch_events, n_dispatchers,
                          adjust="none", strategy_params=None):
    """Per (epoch, worker) statistics of the ordinary in-process run (no tally)."""
    bounds = epoch_bounds(events, warmup, "count", epoch_events)
    loop, _ = run_stream(cls, events, warmup, bounds, context, n_workers, INDEX, adjust=adjust,
                         strategy_params=strategy_params, anomalies=anomalies, n_dispatchers=n_dispatchers)
    return {(res.epoch, w): res.worker_stats.get(w, {}) for res in loop.epochs for w in range(n_workers)}, loop


@pytest.mark.parametrize("name", registry.supporting("range"))
def test_counts_equal_the_in_process_run_for_every_range_strategy(tiny, name):
    events, warmup, anomalies, context = tiny
    cls, n_workers, epoch_events, n_disp = registry.get(name), 4, (len(events) - warmup) // 3, 2
    counts = count_run(cls, count_stream(events, warmup, epoch_size=epoch_events), n_workers, context,
                       index_params=INDEX, n_dispatchers=n_disp, anomalies=anomalies)
    want, loop = ordinary_worker_stats(cls, events, warmup, anomalies, context, n_workers, epoch_events, n_disp)
    got = counts.workers.set_index(["epoch", "worker"])
    assert len(got) == len(want) == 4 * n_workers  # the warm-up and three measured epochs
    for key, st in want.items():
        for c in WORKER_COUNTERS:
            col = "messages_in" if c == "events" else c
            assert got.loc[key, col] == st.get(c, 0), (name, key, c)
        for c in SCALED:  # no sample: no error
            assert got.loc[key, f"{c}_se"] == 0
    sim = simulate(events, warmup, name, n_workers, epoch_events=epoch_events, n_dispatchers=n_disp)
    assert sim.exact and counts.digest == sim.digest == sim.oracle_digest, name
    # what the dispatchers sent is what the workers received, epoch by epoch
    per_epoch = counts.workers.groupby("epoch")[["objects", "updates", "messages_in"]].sum()
    disp = counts.dispatchers.groupby("epoch")[["object_copies_out", "messages_out", "events_in"]].sum()
    ep = counts.epochs.set_index("epoch")
    for res in loop.epochs:
        assert ep.loc[res.epoch, "object_copies"] == res.routed_objects == per_epoch.loc[res.epoch, "objects"]
        assert disp.loc[res.epoch, "object_copies_out"] == res.routed_objects
        assert disp.loc[res.epoch, "messages_out"] == res.routed_pairs
        assert disp.loc[res.epoch, "events_in"] == res.n_events


def test_an_adjusted_run_counts_its_migrations():
    ev = drifting_stream(seed=3)
    from strategies.base import FitContext

    ctx = FitContext((0.0, 0.0, 100.0, 100.0), np.bincount(ev.values).astype(np.float64), 0)
    events, warmup, anomalies = normalise_prefix(ev, 1200)
    adjust = "tornado"
    strategy = _strategy_for(adjust)
    cls = registry.get(strategy)
    counts = count_run(cls, count_stream(events, warmup, epoch_size=300), 4, ctx, index_params=INDEX,
                       adjust=adjust, anomalies=anomalies)
    want, loop = ordinary_worker_stats(cls, events, warmup, anomalies, ctx, 4, 300, 1, adjust=adjust)
    assert loop.plans, "the hot spot must make the adjuster move something"
    got = counts.workers.set_index(["epoch", "worker"])
    for key, st in want.items():
        for c in ("objects", "candidates", "results", "inserts"):
            assert got.loc[key, c] == st.get(c, 0), (key, c)
    moved = sum(r["migrated_bytes"] for r in loop.series)
    assert moved > 0 and counts.workers["migrated_in_bytes"].sum() == moved == counts.epochs["migrated_bytes"].sum()
    assert counts.workers["migrated_in"].sum() == sum(r["migrated_queries"] for r in loop.series)


@pytest.fixture(scope="module")
def many_objects():
    """A crafted stream with many measured objects per subscription update (12 per update, in
    clustered places: objects' candidate and result counts vary a lot from object to object)."""
    objects, df, extent = random_objects(20000, seed=2, clusters=3)
    cfg = WorkloadConfig(name="many", profile="q1", queries=400, updates=1200, objects_per_update=12.0)
    wl = build_workload(objects, df, extent, cfg, 1)
    events, warmup, anomalies = normalise_prefix(wl.events, wl.warmup)
    return events, warmup, anomalies, default_context(events)


@pytest.mark.parametrize("name", ["grid", "kdtree"])
def test_sampled_counts_are_within_their_stated_error(many_objects, name):
    events, warmup, anomalies, context = many_objects
    cls, p = registry.get(name), 0.25
    kw = dict(index_params=INDEX, n_dispatchers=2, anomalies=anomalies)
    full = count_run(cls, count_stream(events, warmup), 4, context, **kw)
    part = count_run(cls, count_stream(events, warmup, object_sample=p, sample_seed=9), 4, context, **kw)
    assert part.meta["objects_measured_run"] < 0.4 * part.meta["objects_measured_full"]
    # the warm-up's objects are sampled too, the fit is the full run's: the same router
    assert part.epochs.objects_run[0] < 0.4 * part.epochs.objects_full[0]
    assert part.meta["indexes"] == full.meta["indexes"]
    f = full.workers[full.workers.epoch > 0].set_index("worker")
    s = part.workers[part.workers.epoch > 0].set_index("worker")
    for c in ("objects", "candidates", "results", "messages_in"):
        for w in f.index:
            est, se, truth = s.loc[w, c], s.loc[w, f"{c}_se"], f.loc[w, c]
            if truth == 0:
                assert est == 0
                continue
            # a stated error that is neither zero nor as large as the count itself ...
            assert 0 < se < 0.2 * truth, (name, c, w, se, truth)
            # ... and that covers the truth (4 standard errors: 12 checks fail together by chance < 1e-3)
            assert abs(est - truth) <= 4 * se, (name, c, w, est, truth, se)
    for c in ("inserts", "deletes", "restored", "kept"):  # the subscriptions are not sampled
        assert (s[c] == f[c]).all(), c
    d_full, d_part = (x.dispatchers[x.dispatchers.epoch > 0].set_index("dispatcher") for x in (full, part))
    for d in d_full.index:
        truth, est, se = (d_full.loc[d, "object_copies_out"], d_part.loc[d, "object_copies_out"],
                          d_part.loc[d, "object_copies_out_se"])
        assert 0 < se and abs(est - truth) <= 4 * se
        assert d_part.loc[d, "query_copies_out"] == d_full.loc[d, "query_copies_out"]


@pytest.mark.parametrize("p", [0.25, 1.0])
@pytest.mark.parametrize("epochs_by", ["count", "time"])
def test_a_stream_given_in_chunks_counts_as_the_whole_stream(many_objects, p, epochs_by):
    """The count mode reads the cached stream as its mapped chunks (harness/run/workload_cache.py):
    the object sample drawn chunk by chunk is the whole stream's draw, and the tables, the sample
    and the digest are those of the stream given whole (chunks of 997 events: boundaries inside
    the warm-up and the epochs)."""
    from harness.core.events import Events

    events, warmup, anomalies, context = many_objects
    size = 1500 if epochs_by == "count" else float(events.ts[-1] - events.ts[warmup]) / 3  # three epochs
    chunks = [events.slice(lo, min(lo + 997, len(events))) for lo in range(0, len(events), 997)]
    assert len(chunks) > 5 and len(Events.concat(chunks)) == len(events)
    np.testing.assert_array_equal(sample_objects(chunks, p, 9) if p < 1 else [],
                                  sample_objects(events, p, 9) if p < 1 else [])
    read = dict(object_sample=p, sample_seed=9, epochs_by=epochs_by, epoch_size=size, workload_family="range")
    kw = dict(index_params=INDEX, n_dispatchers=2, anomalies=anomalies, workload_family="range")
    whole = count_run(registry.get("kdtree"), count_stream(events, warmup, **read), 4, context, **kw)
    parts = count_run(registry.get("kdtree"), count_stream(chunks, warmup, **read), 4, context, **kw)
    assert parts.digest == whole.digest and len(whole.epochs) > 2
    for name in ("workers", "epochs", "dispatchers"):
        pd.testing.assert_frame_equal(getattr(parts, name), getattr(whole, name))
    assert {k: v for k, v in parts.meta.items() if k != "loop_s"} == {k: v for k, v in whole.meta.items()
                                                                     if k != "loop_s"}


def composed(*overrides):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        return compose(config_name="config", overrides=list(overrides))


@pytest.mark.parametrize("value", [0, -0.5, 1.5])
def test_a_bad_object_sample_fails_naming_it(value):
    with pytest.raises(ConfigError, match=r"counts\.object_sample=.*allowed: a number in \(0, 1\]"):
        check_counts(composed(f"counts.object_sample={value}"))


def test_a_sample_that_is_not_a_number_is_refused_by_composition():
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match=r"counts\.object_sample=half"):
        composed("counts.object_sample=half")


def test_sampling_a_family_whose_answers_are_over_the_objects_together_is_refused():
    with pytest.raises(ConfigError, match=r"counts\.object_sample=0\.1 is invalid for a 'knn' workload.*allowed: 1"):
        check_counts(composed("workload=knn_q", "counts.object_sample=0.1"))
    with pytest.raises(ValueError, match="topk"):
        check_sampling(0.5, ["topk"])
    check_sampling(0.5, ["range"])  # allowed
    assert check_counts(composed("counts.object_sample=0.01")) == 0.01


def test_a_bad_sample_seed_fails_naming_it():
    with pytest.raises(ConfigError, match=r"counts\.sample_seed=-1 is invalid; allowed"):
        check_counts(composed("counts.sample_seed=-1"))


def test_the_tables_carry_their_config(tiny, tmp_path):
    import json

    import pyarrow.parquet as pq

    from harness.counts.app import TABLES, write_counts

    events, warmup, anomalies, context = tiny
    counts = count_run(registry.get("grid"), count_stream(events, warmup, object_sample=0.5, sample_seed=1), 3,
                       context, index_params=INDEX, anomalies=anomalies)
    meta = {**counts.meta, "label": "grid", "workload": {"name": "tiny", "queries": 300}}
    write_counts(tmp_path, counts, meta)
    for name in TABLES:
        table = pq.read_table(tmp_path / f"counts_{name}.parquet")
        stated = json.loads(table.schema.metadata[b"counts"])
        assert stated["object_sample"] == 0.5 and stated["strategy"] == "grid" and stated["workers"] == 3
        assert "sqrt" in stated["standard_error"]
        frame = table.to_pandas()
        assert (frame["object_sample"] == 0.5).all() and (frame["queries"] == 300).all() and len(frame)
    assert json.loads((tmp_path / "meta.json").read_text())["label"] == "grid"


def test_an_invocation_keeps_the_strategies_it_finished_when_a_later_one_fails(tmp_path, monkeypatch):
    """In process each strategy's tables are written as soon as it is counted: a count of several
    strategies at a paper's size runs for an hour, and a failure (or a stop) in the last must not
    lose the others."""
    from harness.counts import app

    real = app.count_run

    def failing_second(cls, *args, **kwargs):
        if kwargs.get("label") == "kdtree":
            raise RuntimeError("the second strategy failed")
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(app, "count_run", failing_second)
    cfg = composed("workload=tiny", "dataset.size=4000", "strategy=all", "strategy.include=[grid,kdtree]",
                   "workers=3", "progress=false", f"results_dir={tmp_path / 'results'}",
                   f"counts.out={tmp_path / 'out'}")
    with pytest.raises(RuntimeError, match="the second strategy failed"):
        app.run_counts(cfg)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["grid"]
    assert (tmp_path / "out" / "grid" / "meta.json").exists()
    assert len(pd.read_parquet(tmp_path / "out" / "grid" / "counts_workers.parquet"))
