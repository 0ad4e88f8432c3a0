"""DkM-SKS's figures: per-time-stamp metrics from hand-made service times, the bound claim kind,
and the timeline and decomposition plots drawing what the runs say."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.core.events import DELETE, INSERT, OBJECT, Events, NUMPY_DTYPES
from harness.engine.pipeline import EpochResult
from harness.report import claims, experiments
from harness.measure.timestamps import growth, per_timestamp, timestamp_metrics, timestamp_series


def _events(kinds, ts):
    n = len(kinds)
    cols = {c: np.zeros(n, NUMPY_DTYPES[c]) for c in NUMPY_DTYPES}
    cols.update(seq=np.arange(n, dtype=np.int64), kind=np.asarray(kinds, np.int8), ts=np.asarray(ts, float))
    return Events(cols, np.zeros(n + 1, np.int64), np.zeros(0, np.int32))


def test_update_time_is_the_slowest_worker_per_time_stamp_plus_the_main_server():
    # time-stamp 1: a delete, an insert, two objects; time-stamp 2: two objects
    ev = _events([DELETE, INSERT, OBJECT, OBJECT, OBJECT, OBJECT], [1, 1, 1, 1, 2, 2])
    e = EpochResult(1, 6, 0, 0, 0, 0)
    e.service = {0: (np.array([0, 2, 4]), np.array([0.001, 0.004, 0.002])),
                 1: (np.array([1, 3, 5]), np.array([0.003, 0.001, 0.010]))}
    e.observe_s = 0.002  # the main server's time, spread over the epoch's two time-stamps
    m = timestamp_metrics(per_timestamp([e], ev, 2))
    # ts 1: worker 0 5 ms, worker 1 4 ms; ts 2: worker 0 2 ms, worker 1 10 ms; +1 ms each
    assert m["timestamps"] == 2
    assert m["update_time_ms_per_ts"] == pytest.approx(((5 + 1) + (10 + 1)) / 2)
    assert m["update_spread_ms_per_ts"] == pytest.approx(((5 - 4) + (10 - 2)) / 2)
    assert m["knn_update_ms_per_ts"] == pytest.approx((4 + 10) / 2)  # slowest on objects: w0 4, w1 10
    assert m["ins_ms_per_ts"] == pytest.approx((3 + 1 + 0 + 1) / 2)
    assert m["del_ms_per_ts"] == pytest.approx(1 / 2)
    rows = timestamp_series(per_timestamp([e], ev, 2))
    assert rows["timestamp"].tolist() == [1.0, 2.0] and rows["update_time_ms"].iloc[1] == pytest.approx(11)


def test_no_time_stamps_no_figures():
    ev = _events([OBJECT, OBJECT], [0.5, 1.25])
    e = EpochResult(1, 2, 0, 0, 0, 0)
    e.service = {0: (np.array([0, 1]), np.array([0.001, 0.002]))}
    assert timestamp_metrics(per_timestamp([e], ev, 1)) == {} and timestamp_series(per_timestamp([e], ev, 1)).empty


def test_growth_compares_the_last_tenth_with_the_first():
    assert growth(np.r_[np.ones(10), np.full(10, 3.0)]) == pytest.approx(3.0)
    assert np.isnan(growth(np.ones(5)))


def _row(variant, **values):
    return {"variant": variant, "strategy": variant, "status": "ok", "dataset": "geonames", "workload": "knn_q",
            "workers": 20, "started_at": "2026-01-01", "x": None, "facet": None, **values}


def test_bound_claims_check_the_subjects_own_value():
    claim = {"id": "t", "paper": "dkmsks", "claim": "flat", "preset": "dkmsks_timeline",
             "check": {"kind": "bound", "metric": "update_time_growth", "subject": "dkmsks", "min": 0.8, "max": 1.25}}
    table = pd.DataFrame([_row("dkmsks", update_time_growth=1.1, experiment="dkmsks_timeline"),
                          _row("sop", update_time_growth=3.0, experiment="dkmsks_timeline")])
    assert claims.evaluate(claim, table).verdict == "holds"
    claim["check"]["subject"] = "sop"
    assert claims.evaluate(claim, table).verdict == "does not hold"


def _swept(variant, x, **values):
    return {**_row(variant, **values), "experiment": "dkmsks_subscriptions", "x": x}


def test_linear_claims_fit_a_line_over_the_experiments_sweep():
    claim = {"id": "t", "paper": "dkmsks", "claim": "linear in |S|", "preset": "dkmsks_subscriptions",
             "check": {"kind": "linear", "metric": "update_time_ms_per_ts", "subject": "dkmsks", "value": 0.9}}
    xs = [5000, 10000, 15000, 20000]
    line = [_swept("dkmsks", x, update_time_ms_per_ts=1.0 + x / 1000) for x in xs]
    bent = [_swept("dkmsks", x, update_time_ms_per_ts=v) for x, v in zip(xs, [1.0, 9.0, 1.5, 8.0])]
    falling = [_swept("dkmsks", x, update_time_ms_per_ts=30.0 - x / 1000) for x in xs]
    unswept = [_row("dkmsks", update_time_ms_per_ts=100.0)]  # a default run: not part of the sweep
    assert claims.evaluate(claim, pd.DataFrame(line + unswept)).verdict == "holds"
    assert claims.evaluate(claim, pd.DataFrame(bent)).verdict == "does not hold"
    assert claims.evaluate(claim, pd.DataFrame(falling)).verdict == "does not hold"
    assert claims.evaluate(claim, pd.DataFrame(line[:2])).verdict == "not measured"  # two points fit any line
    claim["check"]["experiment"] = "dkmsks_subscriptions"  # the old way to name the sweep
    with pytest.raises(ValueError, match="check.experiment is no longer read"):
        claims.load_claims_from([claim])


def test_comparisons_within_a_sweep_are_made_at_each_x():
    claim = {"id": "t", "paper": "dkmsks", "claim": "DkM-SKS always beats KOP", "preset": "dkmsks_subscriptions",
             "check": {"kind": "better", "metric": "update_time_ms_per_ts", "subject": "dkmsks", "others": ["kop"]}}
    rows = [_swept("dkmsks", x, update_time_ms_per_ts=x / 1000) for x in (5000, 10000)]
    rows += [_swept("kop", 5000, update_time_ms_per_ts=9.0), _swept("kop", 10000, update_time_ms_per_ts=2.0)]
    verdict = claims.evaluate(claim, pd.DataFrame(rows))
    assert verdict.verdict == "partly (1/2)"
    assert any("x=5000" in n for n in verdict.comparisons)


def test_timeline_and_decomposition_plots_draw_the_runs(tmp_path):
    rows = []
    for v, scale in (("dkmsks", 1.0), ("kop", 5.0)):
        run_dir = tmp_path / v
        run_dir.mkdir()
        pd.DataFrame({"timestamp": [1.0, 2.0, 3.0], "update_time_ms": [scale, 2 * scale, 3 * scale]}).to_parquet(
            run_dir / "timestamps.parquet")
        rows.append(_row(v, run_dir=str(run_dir), scenario="knn_q/geonames", knn_update_ms_per_ts=4 * scale,
                         ins_ms_per_ts=scale, del_ms_per_ts=0.5))
    runs = pd.DataFrame(rows)
    series = experiments._timestamp_series(runs, "t")
    lines = {ln.get_label(): ln.get_ydata().tolist() for ln in series.axes[0].lines}
    assert lines == {"dkmsks": [1.0, 2.0, 3.0], "kop": [5.0, 10.0, 15.0]}
    bars = experiments._stacked(runs, experiments.PLOT_METRICS["decomposed_bars"], "t")
    top: dict[float, float] = {}
    for p in bars.axes[0].patches:
        x = round(p.get_x(), 6)
        top[x] = max(top.get(x, 0.0), p.get_y() + p.get_height())
    assert [round(top[x], 6) for x in sorted(top)] == [5.5, 25.5]  # kNN update + insertion + deletion
