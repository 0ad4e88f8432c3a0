"""On a real SparkSession, two runs sharing their epoch jobs with two repetitions each (their
repetitions interleaved in the tasks, harness/core/interleave.py) still equal the oracle, and each
row carries the machine's load while it measured (harness/core/machine_load.py) in the runs table."""

from __future__ import annotations

import math

from hydra import compose, initialize_config_dir

from harness.core import machine_load
from harness.report.results import PROJECT_ROOT, read_runs_table
from harness.run.config import register_configs
from harness.run.runner import run_experiment

register_configs()


def test_interleaved_lanes_stay_exact_and_rows_carry_the_load(spark, tmp_path):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        cfg = compose(config_name="config", overrides=[
            "workload=tiny", "dataset.size=4000", "progress=false", "mlflow.enabled=false", "strategy=grid",
            "+strategy.variants=[{label: text_hash_b, name: text_hash}]", "run_plots=false", "measure.repeat=2",
            "machine.max_load_per_core=1000", "machine.min_cpu_wall=0", "machine.max_steal=1", "machine.max_others_busy=1",
            f"results_dir={tmp_path}"])
    rows = run_experiment(cfg)
    assert [r["variant"] for r in rows] == ["grid", "text_hash_b"]
    assert all(r["status"] == "ok" and r["oracle_ok"] for r in rows), [r.get("error") for r in rows]
    assert rows[0]["result_count"] == rows[1]["result_count"]
    for r in rows:
        assert 0 < r["cpu_wall_ratio"] < 64 and math.isfinite(r["load1_start"])
        assert 0 <= r["others_busy_frac"] <= 1  # the machine's busy time less the run's own tree
        assert r["loaded"] == 0.0 and r["loaded_reason"] == ""  # thresholds out of reach
        assert r["aa_role"] is None  # not a preset's sweep: no A/A pair
    table = read_runs_table(tmp_path)
    assert set(machine_load.COLUMNS) | {"aa_role"} <= set(table.columns)
    assert (table["loaded"] == 0).all()
