"""A record's evidence (harness/report/evidence.py): the per-run tables gathered beside the runs
table give every run's tables back once the run folders are gone, and the gathered runs table
names no machine path."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from harness.report import evidence, results
from harness.report.results import RUNS_TABLE_COLUMNS


def _results(tmp_path):
    root = tmp_path / "results"
    rows = []
    for i, preset in enumerate(("p", "p", "q")):
        run_dir = root / "runs" / f"r{i}"
        run_dir.mkdir(parents=True)
        pd.DataFrame({"epoch": [0, 1, 2], "operation": ["insert"] * 3, "migrated_queries": [0, i, 2 * i]}) \
            .to_parquet(run_dir / "epochs.parquet")
        pd.DataFrame({"worker": [0, 1], "busy_s": [0.1 * (i + 1), 0.2]}).to_parquet(run_dir / "workers.parquet")
        rows.append({"run_id": f"r{i}", "status": "ok", "strategy": "qttree", "experiment": preset,
                     "started_at": f"2026-01-0{i + 1}", "run_dir": str(run_dir)})
    results.append_runs_table(root, rows)
    return root


def test_gathered_tables_give_each_run_its_own_rows_without_the_run_folders(tmp_path):
    root = _results(tmp_path)
    before = {r["run_id"]: (results.run_frame(r, "epochs"), results.run_frame(r, "workers"))
              for _, r in results.read_runs_table(root).iterrows()}
    dest = tmp_path / "evidence"
    written = evidence.gather(root, dest, presets=["p"])
    assert written["runs"][0] == 2 and written["epochs"][0] == 6 and "latency" not in written
    shutil.rmtree(root)
    table = results.read_runs_table(dest)
    assert sorted(table["run_id"]) == ["r0", "r1"] and table["run_dir"].isna().all()
    for _, run in table.iterrows():
        for got, want in zip((results.run_frame(run, "epochs"), results.run_frame(run, "workers")), before[run["run_id"]]):
            pd.testing.assert_frame_equal(got, want)
        assert results.run_frame(run, "latency") is None


def test_a_preset_without_runs_and_an_unknown_table_are_refused(tmp_path):
    root = _results(tmp_path)
    with pytest.raises(ValueError, match=r"presets=nope have no runs .*; allowed: p, q"):
        evidence.gather(root, tmp_path / "e", presets=["nope"])
    run = results.read_runs_table(root).iloc[0]
    with pytest.raises(ValueError, match=r"per-run table 'router' is unknown; allowed: epochs, workers"):
        results.run_frame(run, "router")


def test_the_runs_table_keeps_every_column(tmp_path):
    dest = tmp_path / "evidence"
    evidence.gather(_results(tmp_path), dest)
    assert set(RUNS_TABLE_COLUMNS) <= set(pd.read_parquet(dest / "runs.parquet").columns)


def test_the_gathered_runs_table_names_the_cached_streams_without_a_machine_path(tmp_path):
    root = _results(tmp_path)
    table = results.read_runs_table(root)
    inside = root / "cache" / "workloads" / "q1-abc" / "events.parquet"
    table["workload_events"] = [str(inside), "/elsewhere/results/cache/workloads/q2-def/events.parquet", None]
    table.drop(columns=[results.TABLES_DIR], errors="ignore").to_parquet(root / "runs.parquet", index=False)
    dest = tmp_path / "evidence"
    evidence.gather(root, dest)
    got = pd.read_parquet(dest / "runs.parquet").set_index("run_id")["workload_events"]
    assert got["r0"] == "cache/workloads/q1-abc/events.parquet"  # relative to the results folder
    assert got["r1"] == "cache/workloads/q2-def/events.parquet"  # another folder's cache: from cache/ on
    assert got["r2"] is None
    assert evidence.portable("/some/machine/stream.parquet") == "stream.parquet"  # no cache folder: the name
