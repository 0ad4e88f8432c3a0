"""The metrics registry names every metric a run reports, and every reader takes its names,
directions and formats from it (harness/report/metrics.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import yaml

from harness.engine.blocks import OUT_SCHEMA
from harness.engine.epochs import epoch_row
from harness.engine.monitor import UNIT_COLUMNS, worker_table
from harness.engine.pipeline import Lane, collect_lanes
from harness.measure import latency
from harness.report import claims, experiments, metrics, table
from harness.measure.run_metrics import run_metrics
from harness.report.metrics import METRICS, UnknownMetric
from harness.report.results import EPOCH_KEYS, PROJECT_ROOT, RUN_KEYS, RUNS_TABLE_COLUMNS

STATS = {0: {"events": 5, "objects": 3, "inserts": 2, "candidates": 4, "results": 1, "busy_s": 0.2,
             "index_bytes": 100, "restored": 1},
         1: {"events": 2, "objects": 1, "inserts": 1, "busy_s": 0.1, "index_bytes": 50}}
# the pipeline's result of an (empty) epoch job shared by two runs
EPOCH = collect_lanes(1, OUT_SCHEMA.empty_table(), [Lane(None, None, "", collect_service=False)] * 2, 1.0)[0][0]
TIMINGS = EPOCH.timings  # its per-epoch stage timings


def run_row_metrics() -> set[str]:
    """The metric names run_metrics and the latency summary put in a run row, from a tiny fake run."""
    feedback = {0: pa.table({"qid": [1], "value": [0.5]})}
    epochs = [replace(EPOCH, n_events=7, route_ns=10**6, routed_objects=4, routed_queries=3, feedback=feedback)]
    names = set(run_metrics(epochs, worker_table([STATS], 2), 1, 4, 3))
    names |= set(latency.summarise(np.array([0.05, 0.5, 2.0]))) | set(latency.summarise(np.zeros(0)))
    return names | {f"epoch1_{k}" for k in TIMINGS}


def epoch_series_metrics() -> set[str]:
    units = pa.table({c: pa.array([0, 1] if c in ("unit", "worker") else [1.0, 2.0]) for c in UNIT_COLUMNS})
    return (set(epoch_row(1, 7, STATS, 0.001, 1, 2, [units])) | set(TIMINGS)) - set(EPOCH_KEYS)


def test_every_metric_a_run_row_carries_is_registered():
    unknown = sorted(n for n in run_row_metrics() | epoch_series_metrics() if not metrics.known(n))
    assert not unknown
    assert not sorted(c for c in RUNS_TABLE_COLUMNS if c not in RUN_KEYS and not metrics.known(c))
    assert not set(RUN_KEYS) & set(METRICS) and not set(EPOCH_KEYS) & set(METRICS)
    assert {"observe_s", "merge_s", "feedback_rows"} <= set(METRICS)  # the lead's new run-row metrics


def test_every_claim_and_plot_metric_in_conf_is_registered():
    for c in claims.load_claims():
        assert metrics.known(c["check"]["metric"]), c["id"]
        if c["check"]["kind"] != "bound":  # a bound needs no direction: the value is in range or not
            assert claims.higher_is_better(c) is not None
    presets = sorted((PROJECT_ROOT / "conf" / "experiment").glob("*.yaml"))
    assert presets
    for path in presets:
        for plot in yaml.safe_load(path.read_text())["experiment"].get("plots", []):
            assert plot in experiments.PLOT_METRICS, (path.name, plot)
            for name in experiments.PLOT_METRICS[plot]:
                assert metrics.known(name), (path.name, plot, name)


def test_directions_follow_the_definitions():
    assert all(m.better in metrics.BETTER for m in METRICS.values())
    assert metrics.higher_is_better("throughput_eps") and metrics.higher_is_better("throughput_wall_eps")
    rates = [m for m in METRICS.values() if m.unit == "events/s"]
    assert {m.name for m in rates if m.better is None} == {"latency_rate_eps"}  # an input, not a result
    assert all(m.better == "higher" for m in rates if m.name != "latency_rate_eps")
    lower = [n for n in METRICS if n.startswith(("latency_mean", "latency_p")) or "replication" in n
             or n.startswith(("load_max", "unit_load_max")) or METRICS[n].unit == "bytes"]
    assert len(lower) >= 10 and all(metrics.higher_is_better(n) is False for n in lower), lower
    for name in ("build_s", "dispatcher_s", "observe_s", "merge_s", "worker_busy_max_s", "bottleneck_s",
                 "latency_share_gt_1s", "migrated_queries"):
        assert metrics.higher_is_better(name) is False, name
    assert metrics.higher_is_better("latency_share_lt_100ms") is True
    for name in ("events", "result_count", "results_raw", "result_digest", "feedback_rows", "partitions_actual",
                 "epochs", "adjustments", "job_s", "wall_s"):
        assert metrics.higher_is_better(name) is None, name


def test_labels_formats_and_per_epoch_names():
    assert metrics.label("throughput_eps") == "throughput (events/s)"
    assert metrics.label("dispatcher_bytes") == "dispatcher memory (MB)"
    assert metrics.show("dispatcher_bytes", 2.5e6, unit=True) == "2.50 MB"
    assert metrics.show("throughput_eps", 12345.6) == "12,346"
    assert metrics.show("latency_p50_ms", None) == "-" and metrics.show("latency_p50_ms", float("nan")) == "-"
    for m in METRICS.values():
        assert metrics.show(m.name, 1.5) not in ("", "-"), m.name
    epoch = metrics.metric("epoch3_job_s")
    assert (epoch.unit, epoch.better) == ("s", None) and "epoch 3" in epoch.description
    t = table.comparison_table([])
    assert [c.header for c in t.columns][1:] == [table.HEADERS.get(c, metrics.label(c)) for c in table.COLUMNS]
    assert t.columns[0].no_wrap  # a strategy's name is never cut


def test_unknown_names_raise_naming_the_known_ones(tmp_path):
    for name in ("thruput", "epoch1_thruput", "epoch_job_s"):
        with pytest.raises(UnknownMetric, match="throughput_eps"):
            metrics.metric(name)
    bad = tmp_path / "claims.yaml"
    bad.write_text(yaml.safe_dump([{"id": "x", "preset": "p", "check": {"kind": "better", "metric": "thruput", "subject": "a"}}]))
    with pytest.raises(ValueError, match="'x'.*throughput_eps"):
        claims.load_claims(bad)
    with pytest.raises(UnknownMetric, match="throughput_eps"):
        experiments._registered({"figure": ("throughput_eps", "thruput")})


def _claim(metric, **extra):
    return {"id": "t", "preset": "p", "check": {"kind": "better", "metric": metric, "subject": "a", "others": ["b"], **extra}}


def test_claim_directions_come_from_the_registry():
    runs = pd.DataFrame([{"variant": v, "strategy": v, "status": "ok", "dataset": "d", "workload": "w", "workers": 8,
                          "experiment": "p", "started_at": "2026", "latency_p50_ms": ms, "events": n}
                         for v, ms, n in (("a", 5.0, 10.0), ("b", 9.0, 20.0))])
    assert claims.evaluate(_claim("latency_p50_ms"), runs).verdict == "holds"  # lower latency wins
    with pytest.raises(ValueError, match="contradicts the registry"):
        claims.evaluate(_claim("latency_p50_ms", higher_is_better=True), runs)
    with pytest.raises(ValueError, match="no better direction"):
        claims.evaluate(_claim("events"), runs)
    assert claims.evaluate(_claim("events", higher_is_better=False), runs).verdict == "holds"


def test_best_follows_the_direction_and_mlflow_logs_registered_numbers():
    frame = pd.DataFrame({8: [2.0, 4.0]}, index=["a", "b"])
    assert experiments.relative_to_best(frame, "throughput_eps")[8].tolist() == [0.5, 1.0]
    assert experiments.relative_to_best(frame, "latency_p50_ms")[8].tolist() == [1.0, 0.5]
    with pytest.raises(ValueError, match="no best"):
        experiments.relative_to_best(frame, "events")
    row = {"throughput_eps": 3, "workers": 8, "oracle_ok": True, "load_max_min": float("inf"),
           "result_digest": "12:ab", "epoch0_job_s": 0.5, "status": "ok"}
    assert metrics.numeric(row) == {"throughput_eps": 3.0, "oracle_ok": 1.0, "epoch0_job_s": 0.5}


@pytest.mark.parametrize("xs, scale", [(["cskyband", "skyband", "kmax"], "linear"), ([1.0, 10.0, 1000.0], "log"),
                                       ([4.0, 8.0, 16.0], "linear")])
def test_line_figures_take_names_and_decades_on_their_x(xs, scale):
    """A swept x of names (skype_reevaluation's re-evaluation modes) is drawn as categories; a
    numeric x over decades (SSTD's region areas) on a log axis; one within a decade stays linear."""
    runs = pd.DataFrame({"scenario": "topk_q/synthetic", "variant": "hash", "x": [str(x) for x in xs],
                         "emp_us": [3.0, 2.0, 1.0]})
    fig = experiments._lines(runs, "x", "x", "t", metric="emp_us")
    ax = fig.axes[0]
    assert ax.get_xscale() == scale
    line = ax.lines[0]
    drawn = dict(zip((str(x) for x in line.get_xdata()), line.get_ydata().tolist()))
    assert drawn == {str(x): y for x, y in zip(xs, [3.0, 2.0, 1.0])}  # each point at its own x
