"""The count mode on Spark (counts.executor=spark, harness/counts/spark.py; issue 51 part 1): for
every built-in query family and every registered strategy that routes it (from the registries),
the counts the Spark workers return through Arrow (their own counters, the dispatch and worker
tasks' tallies) equal the in-process count mode's exactly, per worker, per dispatcher and per
epoch, the objects sampled too (range), an adjusted run's migrations too; the knob is checked
before Spark starts; and, marked
`cluster`, a count on a real standalone cluster on loopback equals the same count in process."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import partial

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hydra import compose, initialize_config_dir

from datasets.workloads.anomalies import normalise_prefix
from harness.core import store
from harness.counts.app import check_counts
from harness.counts.spark import count_lanes
from harness.counts.tally import count_run, count_stream
from harness.engine.assembly import oracle_digest
from harness.engine.contract import tiny_workload
from harness.engine.simulate import default_context
from harness.families import registry as families
from harness.report.results import PROJECT_ROOT
from harness.run.config import ConfigError, register_configs
from strategies import registry

register_configs()
BUILT_IN = [n for n in families.names() if families.get(n).__module__.startswith("harness.families.")]
INDEX = {"range": {"cells_per_side": 16}}
TABLES = ("workers", "dispatchers", "epochs")


def _count(cls, stream, n_workers, context, kw, lane):
    return count_run(cls, stream, n_workers, context, spark=lane, **kw)


def both_ways(spark, tmp_path, family: str, object_sample: float = 1.0, n_workers: int = 3, n_dispatchers: int = 2):
    """Every strategy routing `family` counted over the family's tiny workload in process and, as
    lanes of shared epoch jobs, on Spark: per strategy (in-process counts, Spark counts)."""
    wl = tiny_workload(families.get(family))
    events, warmup, anomalies = normalise_prefix(wl.events, wl.warmup)
    context = default_context(events)
    stream = count_stream(events, warmup, epoch_size=(len(events) - warmup) // 2 + 1, object_sample=object_sample,
                          sample_seed=3, workload_family=family)
    path = tmp_path / f"{family}-events.parquet"  # the whole stream's table, as publish_events gives it
    pq.write_table(pa.Table.from_batches([events.to_arrow()]), path)
    kw = dict(index_params=INDEX, n_dispatchers=n_dispatchers, anomalies=anomalies, workload_family=family)
    names = registry.supporting(family)
    local = [count_run(registry.get(n), stream, n_workers, context, **kw) for n in names]
    state = tmp_path / f"{family}-state"
    remote = count_lanes(spark, stream, str(path), store.as_uri(state), n_workers, f"test-counts-{family}",
                         [partial(_count, registry.get(n), stream, n_workers, context, kw) for n in names])
    assert not state.exists()  # the workers' state (and a sample's table) is removed
    return names, local, remote, oracle_digest(events, local[0].meta["families"])


def assert_same_counts(name, local, remote):
    assert not isinstance(remote, BaseException), (name, remote)
    assert local.meta["executor"] == "in_process" and remote.meta["executor"] == "spark"
    for table in TABLES:
        pd.testing.assert_frame_equal(getattr(local, table), getattr(remote, table), check_exact=True,
                                      check_dtype=False, obj=f"{name}: counts_{table}")
    assert local.digest == remote.digest, name
    for key in ("events_run", "objects_measured_run", "indexes", "plans"):
        assert local.meta[key] == remote.meta[key], (name, key)


@pytest.mark.spark
@pytest.mark.parametrize("family", BUILT_IN)
def test_spark_counts_equal_the_in_process_counts_for_every_strategy_of_every_family(spark, tmp_path, family):
    names, local, remote, oracle = both_ways(spark, tmp_path, family)
    assert names and len(remote) == len(names)
    for name, lc, rc in zip(names, local, remote):
        assert_same_counts(name, lc, rc)
        assert rc.digest == oracle, name  # every object: the results are the oracle's
        # not empty tables (a family's tiny workload may register every subscription in the warm-up)
        assert rc.workers.loc[rc.workers.epoch > 0, "messages_in"].sum() > 0 and rc.workers["inserts"].sum() > 0
        assert len(rc.dispatchers) == 2 * len(rc.epochs)  # every dispatcher of every epoch


@pytest.mark.spark
def test_sampled_spark_counts_equal_the_in_process_ones(spark, tmp_path):
    """Objects sampled (p = 0.5): the kept events are the jobs' table, epochs asked by seq range."""
    names, local, remote, _ = both_ways(spark, tmp_path, "range", object_sample=0.5)
    for name, lc, rc in zip(names, local, remote):
        assert_same_counts(name, lc, rc)
        assert rc.meta["events_run"] < rc.meta["events_full"]
        assert (rc.workers["objects_se"] > 0).any(), name  # scaled, with a stated error


@pytest.mark.spark
def test_an_adjusted_spark_count_equals_the_in_process_one_migrations_included(spark, tmp_path):
    """A load adjuster moves subscriptions between epochs: on Spark the migration job's per-worker
    infos (MigrationResult.infos) give the same migrated counts as in process."""
    import numpy as np

    from strategies.base import FitContext
    from tests.contract.test_adjuster_matrix import _strategy_for
    from tests.strategies.sstd.test_sstd_balance import drifting_stream

    events, warmup, anomalies = normalise_prefix(drifting_stream(seed=3), 1200)
    ctx = FitContext((0.0, 0.0, 100.0, 100.0), np.bincount(events.values).astype(np.float64), 0)
    cls = registry.get(_strategy_for("tornado"))
    stream = count_stream(events, warmup, epoch_size=300)
    kw = dict(index_params=INDEX, adjust="tornado", anomalies=anomalies)
    path = tmp_path / "events.parquet"
    pq.write_table(pa.Table.from_batches([events.to_arrow()]), path)
    local = count_run(cls, stream, 4, ctx, **kw)
    [remote] = count_lanes(spark, stream, str(path), store.as_uri(tmp_path / "state"), 4, "test-counts-adjusted",
                           [partial(_count, cls, stream, 4, ctx, kw)])
    assert local.meta["plans"] > 0 and local.workers["migrated_in"].sum() > 0  # something moved
    assert_same_counts(cls.name, local, remote)


def composed(*overrides):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        return compose(config_name="config", overrides=list(overrides))


def test_a_bad_executor_fails_naming_it():
    with pytest.raises(ConfigError, match=r"counts\.executor='gpu' is invalid; allowed: in_process, spark"):
        check_counts(composed("counts.executor=gpu"))
    assert check_counts(composed("counts.executor=spark")) == 1.0  # local[*]: nothing to check


def test_a_spark_count_on_a_cluster_that_is_not_up_fails_before_spark_starts(tmp_path):
    env = {**os.environ, "STPS_RESULTS": str(tmp_path / "results"), "STPS_CLUSTER_DIR": str(tmp_path / "none")}
    out = subprocess.run([sys.executable, "-m", "harness.counts", "hydra.mode=RUN", "cluster=standalone",
                          "counts.executor=spark", "workload=tiny", "progress=false"], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "cluster.master='cluster-up' is invalid" in out.stderr and "make cluster-up" in out.stderr


@pytest.mark.cluster
def test_a_count_on_a_standalone_cluster_equals_the_count_in_process(tmp_path, spark):
    from harness.counts.app import run_counts
    from harness.run import cluster

    state_dir = tmp_path / "cluster"
    state = cluster.up(workers=2, cores=1, memory="1g", port=17277, webui_port=18281, directory=state_dir,
                       timeout=180, log=lambda *_: None)
    try:
        job = ["workload=tiny", "dataset.size=4000", "strategy=grid", "workers=3", "progress=false",
               f"results_dir={tmp_path / 'results'}"]
        run_counts(composed(*job, f"counts.out={tmp_path / 'local'}"))  # in process; prepares the data too
        shared = tmp_path / "shared"  # what executors of a multi-host cluster would reach by URI
        env = {**os.environ, "STPS_RESULTS": str(tmp_path / "results"), "SPARK_LOCAL_IP": "127.0.0.1",
               "PYSPARK_PYTHON": sys.executable, "STPS_CLUSTER_DIR": str(state_dir)}
        cmd = [sys.executable, "-m", "harness.counts", "hydra.mode=RUN", *job, "cluster=standalone", "counts.executor=spark",
               f"state_uri=file://{shared}", f"counts.out={tmp_path / 'cluster'}"]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        apps = cluster.master_status(state.webui_url)["completedapps"]  # it ran on this cluster
        assert [a["name"] for a in apps] == ["stps-harness"]
        assert len(list(shared.glob("workloads/*/events.parquet"))) == 1  # the executors read the published table
        assert not list(shared.glob("counts/*"))  # and left no state
        for table in TABLES:
            local = pd.read_parquet(tmp_path / "local" / "grid" / f"counts_{table}.parquet")
            remote = pd.read_parquet(tmp_path / "cluster" / "grid" / f"counts_{table}.parquet")
            pd.testing.assert_frame_equal(local, remote, check_exact=True, check_dtype=False)
        assert local["object_sample"].eq(1.0).all()
    finally:
        cluster.down(state_dir, log=lambda *_: None)
    assert not any(cluster._alive(p) for p in state.pids.values())
