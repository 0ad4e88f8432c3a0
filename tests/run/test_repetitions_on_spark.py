"""Repetitions on a real SparkSession: one Spark job per epoch however many repetitions (they run
inside its tasks), the strategy that runs first is not slower than when it runs last (two
strategies in both orders, each order after a fresh dataset preparation), the runs table keeps
every counted repetition, and the network model's columns are filled."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from harness.engine import lockstep as lockstep_mod
from harness.report.results import PROJECT_ROOT
from harness.run.config import register_configs
from harness.run.runner import run_experiment

register_configs()
SMALL = ["workload=sts_q1", "workload.queries=2000", "workload.updates=2000", "dataset.size=20000",
         "progress=false", "run_plots=false", "mlflow.enabled=false", "measure.repeat=4", "workers=4"]


def rows_in_order(results_dir, first: str, last: str) -> dict[str, dict]:
    overrides = [*SMALL, f"results_dir={results_dir}", f"strategy={first}",
                 f"+strategy.variants=[{{label: {last}_last, name: {last}}}]"]
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        cfg = compose(config_name="config", overrides=overrides)
    rows = run_experiment(cfg)
    assert [r.get("variant") or r["strategy"] for r in rows] == [first, f"{last}_last"]
    return {r["strategy"]: r for r in rows}


@pytest.fixture
def epoch_jobs(monkeypatch):
    """The repetitions of every epoch job the real pipeline ran (a spy: the job itself runs)."""
    real, seen = lockstep_mod.run_epoch, []

    def spy(*args, **kwargs):
        answers = real(*args, **kwargs)
        seen.append([len(reps) for reps in answers])
        return answers

    monkeypatch.setattr(lockstep_mod, "run_epoch", spy)
    return seen


def test_the_first_strategy_is_not_slower_than_when_it_runs_last(spark, tmp_path, epoch_jobs):
    a = rows_in_order(tmp_path / "a", "grid", "kdtree")  # each on a fresh cache: the dataset prepared anew
    b = rows_in_order(tmp_path / "b", "kdtree", "grid")
    # one Spark job per epoch however many repetitions: the warm-up once, each measured epoch's
    # job returns its four repetitions, for both lanes
    epochs = a["grid"]["epochs"] + 1
    assert epoch_jobs == 2 * ([[1, 1]] + [[4, 4]] * (epochs - 1))
    for row in [*a.values(), *b.values()]:
        assert row["status"] == "ok" and row["oracle_ok"], row.get("error")
        assert row["repetitions"] == 3 and row["repetitions_discarded"] == 1
        reps = json.loads(row["reps_worker_busy_max_s"])
        assert len(reps) == 3 and row["worker_busy_max_s_ci_lo"] <= row["worker_busy_max_s"] <= \
            row["worker_busy_max_s_ci_hi"]
        assert row["throughput_basis"] == "network (lan)" and row["throughput_eps"] == row["throughput_network_eps"]
        assert row["network_bytes"] > row["network_payload_bytes"] > 0
    for name, first, last in (("grid", a, b), ("kdtree", b, a)):
        # the cold start (compilation, first touch, a fresh dataset) falls in the discarded repetition;
        # the issue saw 20-40x, a shared 2-core machine moves a timing by up to 2x
        assert first[name]["worker_busy_max_s"] <= 2.0 * last[name]["worker_busy_max_s_ci_hi"] + 0.005, name
        assert last[name]["worker_busy_max_s"] <= 2.0 * first[name]["worker_busy_max_s_ci_hi"] + 0.005, name


@pytest.mark.parametrize("repeat", [1])
def test_one_repetition_has_no_interval_and_the_epoch_series_agrees(spark, tmp_path, repeat):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        cfg = compose(config_name="config", overrides=["workload=tiny", "dataset.size=4000", "progress=false",
                                                       "mlflow.enabled=false", "strategy=grid", "network=lan",
                                                       "network.headline=compute", "run_plots=false",
                                                       f"measure.repeat={repeat}", f"results_dir={tmp_path}"])
    (row,) = run_experiment(cfg)
    assert row["repetitions"] == 1 and row["ci_coverage"] == 0.0
    assert row["throughput_basis"] == "compute" and row["throughput_eps"] == row["throughput_compute_eps"]
    assert row["bottleneck_s"] == row["bottleneck_compute_s"] and row["throughput_network_eps"] > 0
    # one measured epoch: its row in epochs.parquet carries the run's two throughputs
    (epoch,) = pd.read_parquet(f"{row['run_dir']}/epochs.parquet").to_dict("records")
    assert epoch["throughput_eps"] == epoch["throughput_compute_eps"]
    assert epoch["throughput_network_eps"] == pytest.approx(row["throughput_network_eps"], rel=1e-12)
