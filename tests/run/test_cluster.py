"""A real Spark standalone cluster on loopback, started and stopped by the harness's own manager
(harness/run/cluster.py, `make cluster-up/-status/-down`), running an experiment through
`cluster=standalone` (the URL from the state file, worker state under a `state_uri`, the events
shipped to the workers) with the oracle's digest, the digest of the same job on local[*] and the
network model's bytes against the bytes shipped; and, in `make test-cluster` (marked
slow), an executor killed in the middle of a worker stage, a merge stage and a migration job, and a
worker that never comes back."""

from __future__ import annotations

import os
import subprocess
import time
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hydra import compose, initialize_config_dir

from harness.report.results import PROJECT_ROOT, read_runs_table
from harness.run.config import register_configs
from harness.run.runner import run_experiment
from harness.run import cluster

register_configs()
PORT, WEBUI = 17177, 18181  # not Spark's defaults: a developer's own cluster keeps running


@pytest.mark.cluster
def test_cluster_up_runs_an_experiment_and_down_stops_only_its_processes(tmp_path, spark):
    state_dir = tmp_path / "cluster"
    state = cluster.up(workers=2, cores=1, memory="1g", port=PORT, webui_port=WEBUI, directory=state_dir,
                       timeout=180, log=lambda *_: None)  # JVMs start slowly on a busy 2-core machine
    try:
        assert state.master_url == f"spark://127.0.0.1:{PORT}"
        st = cluster.status(state_dir)
        assert st["running"] and st["master"] == "ALIVE" and st["alive_workers"] == 2
        with pytest.raises(cluster.ClusterError, match="still running"):
            cluster.up(workers=1, port=PORT, webui_port=WEBUI, directory=state_dir, log=lambda *_: None)
        env = {**os.environ, "STPS_RESULTS": str(tmp_path / "results"), "SPARK_LOCAL_IP": "127.0.0.1",
               "PYSPARK_PYTHON": sys.executable, "STPS_CLUSTER_DIR": str(state_dir)}
        # state carried from the warm-up epoch to the measured one through the state_uri
        job = ["workload=tiny", "dataset.size=4000", "strategy=grid", "workers=3",
               "progress=false", "mlflow.enabled=false"]
        with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
            local_cfg = compose(config_name="config", overrides=[*job, f"results_dir={tmp_path / 'results'}"])
        run_experiment(local_cfg)  # this process's local[*] session; it also prepares the data the cluster reuses
        local = read_runs_table(tmp_path / "results").iloc[-1]
        shared = tmp_path / "shared"  # what executors of a multi-host cluster would reach by URI
        # the dispatchers ship the events themselves, so the bytes the network model charges can be
        # checked against what the pipeline shipped to the worker stage
        cmd = [sys.executable, "-m", "harness", "cluster=standalone", *job, f"state_uri=file://{shared}",
               "keep_pairs=true", "ship_events=true", "local_pairs=false"]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        row = read_runs_table(tmp_path / "results").iloc[-1]
        assert row["status"] == "ok" and bool(row["oracle_ok"]), row.to_dict()
        assert row["cluster"] == "standalone"
        # the model's event bytes are what the dispatch stage shipped, less the IPC framing of each block
        framing = row["shipped_bytes"] - row["network_payload_bytes"]
        print(f"shipped {row['shipped_bytes']:,.0f} bytes in {row['shipped_blocks']:.0f} blocks; the model's event "
              f"bytes {row['network_payload_bytes']:,.0f}; framing {framing / row['shipped_blocks']:,.0f} bytes per "
              f"block, {framing / row['shipped_bytes']:.2%} of the bytes")
        assert row["network_payload_bytes"] > 0 and 0 < framing <= row["shipped_blocks"] * 2600
        apps = cluster.master_status(state.webui_url)["completedapps"]  # it ran on this cluster, not local[*]
        assert [a["name"] for a in apps] == ["stps-harness"]
        # the executors read the events and wrote the kept pairs under state_uri, and left no state
        assert len(list(shared.glob("workloads/*/events.parquet"))) == 1
        pair_files = list(shared.glob(f"runs/{row['run_id']}/pairs/epoch=*/part-*.parquet"))
        keys = pa.concat_tables([pq.read_table(f) for f in pair_files]).column("key").to_numpy()
        assert len(np.unique(keys)) == len(keys) == row["result_count"] > 0
        assert not (shared / "runs" / row["run_id"] / "state").exists()
        # the same job on local[*] (run first, in this process): the same digest
        assert local["cluster"] == "local"
        assert local["result_digest"] == row["result_digest"]
    finally:
        stopped = cluster.down(state_dir, log=lambda *_: None)
    assert stopped == 3
    assert not any(cluster._alive(p) for p in state.pids.values())
    assert cluster.status(state_dir)["running"] is False


def test_standalone_without_a_running_cluster_fails_before_spark_starts(tmp_path):
    env = {**os.environ, "STPS_RESULTS": str(tmp_path / "results"), "STPS_CLUSTER_DIR": str(tmp_path / "none")}
    out = subprocess.run([sys.executable, "-m", "harness", "cluster=standalone", "workload=tiny", "progress=false",
                          "mlflow.enabled=false"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    assert "cluster.master='cluster-up' is invalid" in out.stderr + out.stdout
    assert "make cluster-up" in out.stderr + out.stdout


@pytest.mark.cluster
@pytest.mark.slow  # make test-cluster
@pytest.mark.parametrize("stage", ["worker", "merge", "migration"])
def test_an_executor_killed_mid_stage_is_retried_and_the_run_stays_exact(tmp_path, stage, monkeypatch):
    """The executor JVM running the stage's first task is SIGKILLed (harness/engine/faults.py; the
    workers' environment carries STPS_FAULT to the executors they launch, the driver has none);
    the standalone worker starts a new one, Spark runs the lost tasks again, the run equals the
    oracle and its row counts the failed attempts."""
    state_dir = tmp_path / "cluster"
    marker = tmp_path / "killed"
    monkeypatch.setenv("STPS_FAULT", f"{stage}:{marker}")
    state = cluster.up(workers=2, cores=1, memory="1g", port=PORT + 1, webui_port=WEBUI + 1, directory=state_dir,
                       timeout=180, log=lambda *_: None)
    monkeypatch.delenv("STPS_FAULT")
    try:
        env = {**os.environ, "STPS_RESULTS": str(tmp_path / "results"), "SPARK_LOCAL_IP": "127.0.0.1",
               "PYSPARK_PYTHON": sys.executable, "STPS_CLUSTER_DIR": str(state_dir)}
        cmd = [sys.executable, "-m", "harness", "cluster=standalone", "workload=tiny", "dataset.size=4000",
               "strategy=grid", "workers=3", "progress=false", "mlflow.enabled=false"]
        if stage == "migration":  # a hot spot that the gr adjuster moves subscriptions away from
            cmd += ["workload=hotspot_objects", "workload.queries=300", "workload.updates=1200",
                    "workload.drift_start=0.1", "workload.hotspot_fraction=0.9", "seed=9", "epochs.size=1500",
                    "workers=4", "adjust=gr", "adjust.params.sigma=1.05"]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, out.stderr[-3000:]
        assert marker.exists()  # the fault fired
        row = read_runs_table(tmp_path / "results").iloc[-1]
        assert row["status"] == "ok" and bool(row["oracle_ok"]), row.to_dict()
        assert row["task_failures"] >= 1, (row.to_dict(), out.stdout[-2000:])
        if stage == "migration":
            assert row["migrated_queries"] > 0
    finally:
        cluster.down(state_dir, log=lambda *_: None)
    assert not any(cluster._alive(p) for p in state.pids.values())


@pytest.mark.cluster
@pytest.mark.slow  # make test-cluster
def test_a_worker_that_never_returns_fails_the_run_in_bounded_time_and_loses_nothing(tmp_path, monkeypatch):
    """The only worker's daemon and executor are SIGKILLed in a worker stage (STPS_FAULT ...:host):
    no executor can come back, so the watchdog cancels the run after cluster.lost_executors_timeout_s;
    its row says status=error with that reason, and the run recorded before it is still there."""
    state_dir = tmp_path / "cluster"
    marker = tmp_path / "killed"
    marker.touch()  # disarmed for the first run
    monkeypatch.setenv("STPS_FAULT", f"worker:{marker}:host")
    state = cluster.up(workers=1, cores=1, memory="1g", port=PORT + 2, webui_port=WEBUI + 2, directory=state_dir,
                       timeout=180, log=lambda *_: None)
    monkeypatch.delenv("STPS_FAULT")
    timeout_s = 20
    try:
        env = {**os.environ, "STPS_RESULTS": str(tmp_path / "results"), "SPARK_LOCAL_IP": "127.0.0.1",
               "PYSPARK_PYTHON": sys.executable, "STPS_CLUSTER_DIR": str(state_dir)}
        cmd = [sys.executable, "-m", "harness", "cluster=standalone", "workload=tiny", "dataset.size=4000",
               "strategy=grid", "workers=3", "progress=false", "mlflow.enabled=false",
               f"cluster.lost_executors_timeout_s={timeout_s}"]
        first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        assert first.returncode == 0, first.stderr[-3000:]
        marker.unlink()  # armed
        t0 = time.monotonic()
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        elapsed = time.monotonic() - t0
        assert marker.exists()  # the fault fired
        assert out.returncode == 1, out.stderr[-3000:]
        assert elapsed < 240, elapsed  # the run's own work takes well under a minute; Spark alone waits forever
        table = read_runs_table(tmp_path / "results")
        assert list(table["status"]) == ["ok", "error"]
        assert bool(table.iloc[0]["oracle_ok"])
        assert "LostExecutors" in table.iloc[1]["error"] and "lost_executors_timeout_s" in table.iloc[1]["error"]
    finally:
        cluster.down(state_dir, log=lambda *_: None)
    assert not any(cluster._alive(p) for p in state.pids.values())
