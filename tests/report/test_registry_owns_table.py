"""The metrics registry owns the runs table (issue 49 part 2): the table's columns are the run keys
plus every registered metric that says it is a column (`Metric.column`), and docs/metrics.md's
table of every metric is generated from the registry, so a new metric is added in one place."""

from __future__ import annotations

import pandas as pd

from harness.report import metrics, results
from harness.report.metrics import METRICS, Metric
from harness.report.results import PROJECT_ROOT, RUN_KEYS

DOCS = PROJECT_ROOT / "docs" / "metrics.md"


def test_docs_metrics_md_is_generated_from_the_registry():
    current = DOCS.read_text()
    assert metrics.docs_text(current) == current, "docs/metrics.md is stale: run `make docs`"
    rows = {line.split("`")[1] for line in metrics.docs_table().splitlines() if line.startswith("| `")}
    builtin = {n for n in METRICS if n not in metrics._plugin_only()}
    assert rows == builtin
    # the metrics the issue found missing from the hand-kept docs
    assert {"worker_index_bytes_mean", "stored_replication", "window"} <= rows


def test_the_columns_are_the_keys_and_the_column_metrics():
    columns = results.runs_table_columns()
    assert len(columns) == len(set(columns))
    keys = [c for c in columns if c in RUN_KEYS]
    assert keys == [k for k in RUN_KEYS if k not in results.KEYS_NOT_COLUMNS]
    assert [c for c in columns if c not in RUN_KEYS] == [n for n, m in METRICS.items() if m.column]
    assert not set(results.KEYS_NOT_COLUMNS) & set(columns)
    # the top-k window |W| is an input figure like ctq_reports: a column since issue 49
    assert "window" in columns and "window" in metrics.INPUT_METRICS
    # a per-epoch timing is a metric but not a column
    assert metrics.known("job_s") and "job_s" not in columns and not metrics.metric("epoch0_job_s").column


def test_a_new_metric_is_added_in_one_place(monkeypatch, tmp_path):
    """Registering one metric puts it in the runs table (and what append_runs_table writes), the
    generated docs and what MLflow logs; one that says column=False stays out of the table only."""
    monkeypatch.setitem(METRICS, "widgets_per_event", Metric("widgets_per_event", "widgets", "widgets",
                                                              "widgets a test counted per event", "lower"))
    monkeypatch.setitem(METRICS, "epoch_widgets", Metric("epoch_widgets", "epoch widgets", "widgets",
                                                         "widgets of one epoch", None, column=False))
    assert "widgets_per_event" in results.runs_table_columns()
    assert "epoch_widgets" not in results.runs_table_columns()
    docs = metrics.docs_table()
    assert "| `widgets_per_event` | widgets | widgets | lower | yes | widgets a test counted per event |" in docs
    assert "| `epoch_widgets` | epoch widgets | widgets |  | no | widgets of one epoch |" in docs
    assert metrics.docs_text(DOCS.read_text()) != DOCS.read_text()  # the committed docs are now stale
    row = {"run_id": "r1", "status": "ok", "strategy": "grid", "widgets_per_event": 2.5, "epoch_widgets": 3.0}
    assert metrics.numeric(row) == {"widgets_per_event": 2.5, "epoch_widgets": 3.0}  # MLflow logs both
    written = pd.read_parquet(results.append_runs_table(tmp_path, [row]))
    assert written.loc[0, "widgets_per_event"] == 2.5 and "epoch_widgets" not in written
