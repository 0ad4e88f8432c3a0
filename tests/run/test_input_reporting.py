"""What the input did to a run is never silent: rows skipped, objects the workload reused and idle
workers reach the runs table, metrics.json, MLflow and the comparison table; a user's bad input
is one line (exit 2) and still leaves an error row."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow.parquet as pq
import pytest
from hydra import compose, initialize_config_dir

from datasets import prepare_dataset
from datasets.workloads.range import build_workload
from harness.core.events import OBJECT, Events
from harness.families.workload import WorkloadConfig
from harness.report import metrics, results
from harness.report.results import PROJECT_ROOT, RUN_KEYS, RUNS_TABLE_COLUMNS
from harness.report.table import comparison_table, status_lines, input_line, print_comparison
from harness.run.config import ConfigError, register_configs, validate
from harness.run.record import input_metrics
from harness.run.runner import DataPreparationError, run_experiment
from harness.run.workload_cache import load_or_build_workload
from tests.helpers import random_objects

register_configs()
SMALL = ["workload=tiny", "progress=false", "seed=9", "strategy=grid"]
BAD_CSV = "lon,lat,text,ts\n-73.9,40.7,,1\n-74.0,40.8,,2\n"  # every row without text


def config(results_dir: Path, *overrides):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        return compose(config_name="config", overrides=[*SMALL, f"results_dir={results_dir}", *overrides])


def cli(*args, cwd=PROJECT_ROOT):
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


def test_queries_message_names_the_real_bound():
    for q in (-5, 0):
        with pytest.raises(ConfigError, match=r"workload.queries=.* an integer >= 1$"):
            validate(config("/tmp/unused", f"workload.queries={q}"))
    validate(config("/tmp/unused", "workload.queries=1"))


def test_workload_counts_the_objects_it_reuses():
    objects, df, extent = random_objects(50, seed=3)
    wl = build_workload(objects, df, extent, WorkloadConfig(name="tiny", queries=40, updates=80), seed=2)
    n_obj = int((wl.events.kind == OBJECT).sum())
    assert n_obj > 50
    assert wl.info == {"workload_objects": n_obj, "dataset_objects": 50, "objects_reused": n_obj - 50,
                       "object_reuse_factor": n_obj / 50}
    big, df, extent = random_objects(5000, seed=3)
    assert build_workload(big, df, extent, WorkloadConfig(queries=40, updates=80), seed=2).info["objects_reused"] == 0


def test_input_metrics_and_footer_carry_skips_reuse_and_anomalies():
    ds = SimpleNamespace(n_input_rows=1000, bad_rows={"empty_text": 0, "latitude_out_of_range": 622},
                         swapped_lat_lon_rows=0, rescued_rows=41)
    meta = {"info": {"workload_objects": 2500, "dataset_objects": 1000, "objects_reused": 1500,
                     "object_reuse_factor": 2.5, "orphan_deletes": 3, "duplicate_inserts": 0}}
    row = input_metrics(ds, meta)
    assert row["bad_rows"] == 622 and row["bad_rows_latitude_out_of_range"] == 622 and row["orphan_deletes"] == 3
    assert all(metrics.known(k) and k not in RUN_KEYS for k in row)
    assert set(metrics.INPUT_METRICS) <= set(RUNS_TABLE_COLUMNS)
    assert all(metrics.higher_is_better(k) is None for k in metrics.INPUT_METRICS)
    assert metrics.known("bad_rows_a_reason_no_longer_listed")
    line = input_line(row)
    assert line.startswith("input: 622 of 1,000 rows skipped (latitude_out_of_range 622)")
    assert "workload reuses each object 2.50 times" in line and "orphan_deletes 3" in line
    assert "; 41 rows rescued (their text held the delimiter)" in line
    assert "duplicate_inserts" not in line
    assert "no object reused" in input_line(input_metrics(ds, {"info": {"objects_reused": 0,
                                                                         "object_reuse_factor": 0.5}}))


def test_workers_used_column_only_when_some_are_idle():
    ok = {"strategy": "grid", "status": "ok", "workers": 1000, "partitions_actual": 1000.0}
    headers = [c.header for c in comparison_table([ok]).columns]
    assert "used" not in headers
    rows = [ok, {**ok, "strategy": "kdtree", "partitions_actual": 454.0},
            {"strategy": "hash", "status": "error", "error": "boom\n  at line 3", "workers": 1000}]
    idle = comparison_table(rows)
    column = next(c for c in idle.columns if c.header == "used")
    assert list(column.cells) == ["1000", "454/1000"]  # a failed run is a line under the table
    assert len({len(list(c.cells)) for c in idle.columns}) == 1
    assert "failed: hash: boom at line 3" in status_lines(rows)


def test_reuse_and_idle_workers_reach_row_files_mlflow_and_table(spark, tmp_path, capsys):
    """20 objects for a workload of a few thousand object events; 256 workers for 20 places."""
    root = tmp_path / "results"
    cfg = config(root, "dataset.size=20", "workers=256")
    [row] = run_experiment(cfg)
    assert row["status"] == "ok", row.get("traceback")
    [events_path] = (root / "cache" / "workloads").glob("*/events.parquet")
    n_obj = int((pq.read_table(events_path).column("kind").to_numpy() == OBJECT).sum())
    expected = {"dataset_objects": 20, "workload_objects": n_obj, "objects_reused": n_obj - 20,
                "object_reuse_factor": pytest.approx(n_obj / 20), "bad_rows": 0, "input_rows": 20}
    assert {k: row[k] for k in expected} == expected
    stored = json.loads((Path(row["run_dir"]) / "metrics.json").read_text())
    assert {k: stored[k] for k in expected} == expected
    table = results.read_runs_table(root).iloc[-1]
    assert {k: table[k] for k in expected} == expected

    import mlflow

    client = mlflow.tracking.MlflowClient(results.tracking_uri(root))
    [run] = client.search_runs([client.get_experiment_by_name("stps-harness").experiment_id])
    assert run.data.metrics["objects_reused"] == n_obj - 20 and run.data.metrics["bad_rows"] == 0

    used = int(row["partitions_actual"])
    assert used < 256
    err = capsys.readouterr().err  # the progress console's warning
    assert f"workers=256 requested, {used} received events; L_max/L_min is inf" in " ".join(err.split())
    print_comparison([row])
    out = capsys.readouterr().out
    assert f"{used}/256" in out
    assert f"input: 0 of 20 rows skipped; workload reuses each object {n_obj / 20:.2f} times" in out

    # a cached workload reports the same (the prepared dataset and the workload are cache hits now)
    ds = prepare_dataset(cfg.dataset, spark, root / "cache" / "datasets")
    events, _, folder, meta = load_or_build_workload(ds, cfg, root / "cache")
    assert meta["info"]["objects_reused"] == n_obj - 20
    assert ds._objects is None  # a cached workload never reads the dataset's objects

    # the driver maps the stream (read-only views of events.arrow), the same rows Spark reads
    stored = Events.from_arrow(pq.read_table(folder / "events.parquet"))
    assert not events.x.flags.writeable and not events.values.flags.writeable
    for name in ("seq", "kind", "id", "x", "ymax", "ts"):
        np.testing.assert_array_equal(events.cols[name], stored.cols[name])
    np.testing.assert_array_equal(events.offsets, stored.offsets)
    np.testing.assert_array_equal(events.values, stored.values)
    (folder / "events.arrow").unlink()  # a cache from before the mapped copy: made from its Parquet
    again, *_ = load_or_build_workload(ds, cfg, root / "cache")
    assert (folder / "events.arrow").exists()
    np.testing.assert_array_equal(again.values, stored.values)
    np.testing.assert_array_equal(again.cols["x"], stored.cols["x"])


def test_failed_data_preparation_leaves_error_rows(spark, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text(BAD_CSV)
    root = tmp_path / "results"
    cfg = config(root, "dataset=file", f"dataset.path={bad}", "mlflow.enabled=false",
                 "strategy=baselines")
    with pytest.raises(DataPreparationError) as err:
        run_experiment(cfg)
    labels = [r.label for r in validate(cfg)]
    table = results.read_runs_table(root)
    assert table["variant"].tolist() == labels and (table["status"] == "error").all()
    assert all(str(err.value) in e for e in table["error"])
    assert [r["variant"] for r in err.value.rows] == labels
    stored = json.loads((Path(err.value.rows[0]["run_dir"]) / "metrics.json").read_text())
    assert stored["status"] == "error" and str(err.value) in stored["error"]


def test_cli_missing_file_is_one_line_before_spark(tmp_path):
    proc = cli("dataset=file", f"dataset.path={tmp_path / 'nope.csv'}", f"results_dir={tmp_path}")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "dataset.path" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.slow  # CI time: make test-cluster runs it
def test_cli_bad_rows_are_one_dataset_error_line_and_an_error_row(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text(BAD_CSV)
    root = tmp_path / "results"
    proc = cli(*SMALL, "dataset=file", f"dataset.path={bad}", "dataset.on_bad_rows=error", f"results_dir={root}",
               "mlflow.enabled=false")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("dataset error: ")]
    assert len(lines) == 1, proc.stderr[-2000:]
    assert "bad.csv" in lines[0]
    table = results.read_runs_table(root)
    assert table["status"].tolist() == ["error"] and table["variant"].tolist() == ["grid"]
