"""A size-dependent claim judged at every step of its size sweep (harness/report/sizes.py), on
hand-built runs tables: each step reads its own runs (and its own newest code version), the
claim's `where` is narrowed to what the sweep runs, its x axis is mapped from the sweep's, the
ratio's log-log trend is extrapolated to the paper's size and labelled as such, and a step that
failed or was refused is shown with its reason, never dropped."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from harness.report import claims, sizes
from harness.run import sizes as run_sizes

SWEEP = "size_tornado"  # a real size preset (claims name only existing ones); its axes are faked below


def _axes(mapping):
    return lambda preset: mapping.get(preset, (None, None))


NO_X = _axes({"p": (None, None), SWEEP: ("workload.queries", None)})


def _row(variant, size, eps, *, lo=None, hi=None, workers=25, started=None, code="v1", preset=SWEEP,
         facet=None, **extra):
    lo = eps if lo is None else lo
    hi = eps if hi is None else hi
    return {"variant": variant, "strategy": variant, "status": "ok", "dataset": "synthetic", "workload": "q1",
            "workers": workers, "experiment": preset, "started_at": started or f"2026-01-01T{int(math.log10(size)):02d}",
            "x": str(size), "facet": facet, "throughput_eps": eps, "throughput_compute_eps": eps,
            "throughput_compute_eps_ci_lo": lo, "throughput_compute_eps_ci_hi": hi, "throughput_network_eps": eps,
            "throughput_network_eps_ci_lo": eps, "throughput_network_eps_ci_hi": eps, "oracle_ok": True,
            "too_short": 0.0, "code_version": code, "run_id": f"{variant}-{size}-{workers}-{facet}", **extra}


def _claim(kind="better", value=None, where=None, preset="p", sweep=SWEEP, **check):
    chk = {"kind": kind, "metric": "throughput_eps", "subject": "a", "others": ["b"], **check}
    if value is not None:
        chk["value"] = value
    if where is not None:
        chk["where"] = where
    return claims.load_claims_from([{"id": "c", "paper": "tornado", "claim": "a beats b", "preset": preset,
                                     "sizes": sweep, "check": chk}])


def _sweep(points):
    """Runs of a and b at each size: {size: (a's eps, b's eps)}, tight intervals (+-1%)."""
    rows = []
    for s, (a, b) in points.items():
        rows += [_row("a", s, a, lo=a * 0.99, hi=a * 1.01), _row("b", s, b, lo=b * 0.99, hi=b * 1.01)]
    return pd.DataFrame(rows)


def test_the_claim_is_judged_at_each_step_on_that_steps_runs_alone():
    table = _sweep({10_000: (200.0, 100.0), 100_000: (150.0, 100.0), 1_000_000: (90.0, 100.0)})
    steps, [sc] = sizes.evaluate_sweep(table, SWEEP, _claim(), paper_size=5e6, axes=NO_X)
    assert steps == [10_000, 100_000, 1_000_000]
    got = {s: sc.steps[s].on("compute").verdict for s in steps}
    assert got == {10_000: "holds", 100_000: "holds", 1_000_000: "does not hold"}
    # the claim's own verdict is untouched: it reads its preset "p", which has no run here
    assert claims.evaluate(sc.claim, table).verdict == "not measured"


def test_each_step_reads_its_own_newest_code_version():
    table = pd.concat([_sweep({10_000: (200.0, 100.0)}).assign(code_version="v1"),
                       _sweep({100_000: (300.0, 100.0)}).assign(code_version="v2")])
    _, [sc] = sizes.evaluate_sweep(table, SWEEP, _claim(), paper_size=5e6, axes=NO_X)
    assert [sc.steps[s].on("compute").verdict for s in (10_000, 100_000)] == ["holds", "holds"]
    # within one step, an older version's run is still left out (and listed)
    stale = _row("b", 10_000, 500.0, code="v0", started="2025-01-01")
    _, [sc] = sizes.evaluate_sweep(pd.concat([table, pd.DataFrame([stale])]), SWEEP, _claim(), 5e6, axes=NO_X)
    v = sc.steps[10_000].on("compute")
    assert v.verdict == "holds" and "older code versions" in v.excluded[0]


def test_where_is_narrowed_to_what_the_sweep_runs_and_says_so():
    table = _sweep({10_000: (200.0, 100.0), 100_000: (200.0, 100.0)})
    claim = _claim(where={"workers": [16, 25], "dataset": ["synthetic"]})
    _, [sc] = sizes.evaluate_sweep(table, SWEEP, claim, paper_size=5e6, axes=NO_X)
    assert sc.steps[10_000].on("compute").verdict == "holds"
    assert any("workers narrowed from [16, 25] to [25]" in n for n in sc.notes)
    # a where value the sweep never runs is not narrowed away: the claim is not measured there
    other = _claim(where={"dataset": ["geonames"]})
    _, [sc] = sizes.evaluate_sweep(table, SWEEP, other, paper_size=5e6, axes=NO_X)
    assert sc.steps[10_000].on("compute").verdict == "not measured"


def test_the_claims_x_axis_maps_from_the_sweeps_size_or_facet_or_is_left_out():
    # the claim's preset sweeps the same knob: each step is one x, so gap_grows cannot be judged per step
    same = _axes({"p": ("workload.queries", None), SWEEP: ("workload.queries", None)})
    table = _sweep({10_000: (200.0, 100.0), 100_000: (300.0, 100.0)})
    gap = _claim("gap_grows")
    _, [sc] = sizes.evaluate_sweep(table, SWEEP, gap, paper_size=5e6, axes=same)
    assert sc.steps[10_000].on("compute").verdict == "not measured"
    # the sweep's facet is the claim's x: the step's facet values are the claim's x values
    faceted = _axes({"p": ("workload.area_fraction", None), SWEEP: ("workload.queries", "workload.area_fraction")})
    rows = [_row("a", 10_000, 110.0, facet="0.01"), _row("b", 10_000, 100.0, facet="0.01"),
            _row("a", 10_000, 300.0, facet="1"), _row("b", 10_000, 100.0, facet="1")]
    _, [sc] = sizes.evaluate_sweep(pd.DataFrame(rows), SWEEP, gap, paper_size=5e6, axes=faceted)
    assert sc.steps[10_000].on("compute").verdict == "holds"  # the lead grows from x=0.01 to x=1
    # not swept by the sweep: where.x is left out (read at the sweep's own setting), with a note
    pinned = _claim(where={"x": [0.01]})
    _, [sc] = sizes.evaluate_sweep(table, SWEEP, pinned, paper_size=5e6, axes=NO_X)
    assert sc.steps[10_000].on("compute").verdict == "holds"
    assert any("not swept here" in n for n in sc.notes)


def test_the_trend_is_a_log_log_fit_extrapolated_to_the_papers_size():
    # a / b = 3 (s / 1e4)^-0.15: holds at every measured step, falls below 1.2 by the paper's 5M
    pts = {s: (100.0 * 3 * (s / 1e4) ** -0.15, 100.0) for s in (10_000, 100_000, 1_000_000)}
    _, [sc] = sizes.evaluate_sweep(_sweep(pts), SWEEP, _claim("ratio_at_least", value=1.2), 5e6, axes=NO_X)
    assert all(sc.steps[s].on("compute").kind == "holds" for s in pts)
    [t] = [t for t in sc.trends if t.basis == "compute"]
    assert t.slope == pytest.approx(-0.15, abs=1e-9) and t.r2 == pytest.approx(1.0)
    assert t.at_paper == pytest.approx(3 * 500 ** -0.15, rel=1e-9)
    assert t.at_paper < 1.2 and t.verdict == "would not hold"
    # the report labels it an extrapolation, beside the measured ratios
    text = "\n".join(sizes.section(_sweep(pts), SWEEP, [], _claim("ratio_at_least", value=1.2), axes=NO_X))
    assert "would not hold (extrapolation)" in text and "is an extrapolation, not a measurement" in text
    assert "3.00" in text  # the measured ratio at the smallest step


def test_the_extrapolation_interval_needs_three_steps_and_can_be_undecided():
    two = sizes.fit_trend([sizes.Ratio("compute", "p", 1e4, 2.0, 2.0, 2.0),
                           sizes.Ratio("compute", "p", 1e5, 1.5, 1.5, 1.5)], 1e7, 1.0, True)
    # 2.0 x 0.75 per decade: 0.84 three decades on, below 1, and with two steps no interval
    assert two.at_paper == pytest.approx(2.0 * 0.75 ** 3)
    assert math.isnan(two.lo) and two.steps == 2 and two.verdict == "would not hold"
    noisy = [sizes.Ratio("compute", "p", s, r, r, r) for s, r in ((1e4, 1.4), (3e4, 0.9), (1e5, 1.3), (3e5, 0.95))]
    t = sizes.fit_trend(noisy, 1e7, 1.0, True)
    assert t.lo < 1.0 < t.hi and t.verdict == "undecided"
    assert sizes.fit_trend(noisy[:1], 1e7, 1.0, True) is None


def test_failed_and_refused_steps_are_shown_with_their_reason():
    table = _sweep({10_000: (200.0, 100.0)}).assign(wall_s=5.0, driver_peak_rss_bytes=2**31,
                                                      executor_peak_rss_bytes=2**30)
    attempts = [{"step": 10_000, "status": "ok", "reason": "", "wall_s": 12.0, "maxrss_bytes": 3 * 2**30},
                {"step": 100_000, "status": "failed", "reason": "killed by SIGKILL (the out-of-memory killer's signal)",
                 "wall_s": 50.0, "maxrss_bytes": 20 * 2**30},
                {"step": 1_000_000, "status": "skipped", "reason": "extrapolated 9000 s > the 3600 s left",
                 "extrapolated_s": 9000, "wall_s": None, "maxrss_bytes": None}]
    costs = sizes.step_costs(table, SWEEP, attempts)
    assert list(costs["status"]) == ["ok", "failed", "skipped"]
    assert costs.loc[0, "runs_wall_s"] == 10.0 and costs.loc[0, "driver_peak_bytes"] == 2**31
    assert sizes.largest_feasible(costs) == 10_000
    text = "\n".join(sizes.section(table, SWEEP, attempts, _claim(), axes=NO_X))
    assert "SIGKILL" in text and "~9000 s (extrapolated, not run)" in text and "Largest step that ran: **10k**" in text
    # a run that failed inside an ok step is counted and its error shown
    bad = pd.concat([table, pd.DataFrame([{**_row("c", 10_000, 1.0), "status": "error", "error": "MemoryError"}])])
    c = sizes.step_costs(bad, SWEEP, [])
    assert c.loc[0, "runs_failed"] == 1 and "MemoryError" in c.loc[0, "reason"]


def test_every_attempt_at_a_step_is_counted_and_its_log_kept(tmp_path):
    table = _sweep({10_000: (200.0, 100.0)}).assign(wall_s=5.0)
    attempts = [{"step": 10_000, "status": "failed", "reason": "killed by SIGKILL (the out-of-memory killer's signal)",
                 "wall_s": 3001.0, "maxrss_bytes": 20 * 2**30},
                {"step": 10_000, "status": "failed", "reason": "over the step time limit (2100 s): stopped",
                 "wall_s": 2101.0, "maxrss_bytes": 9 * 2**30},
                {"step": 10_000, "status": "ok", "reason": "", "wall_s": 203.0, "maxrss_bytes": 4 * 2**30},
                {"step": 100_000, "status": "skipped", "reason": "not started: no estimate", "wall_s": None,
                 "maxrss_bytes": None}]
    costs = sizes.step_costs(table, SWEEP, attempts).set_index("size")
    first = costs.loc[10_000]
    assert first["status"] == "ok" and first["step_wall_s"] == 203.0  # the newest attempt
    assert first["attempts"] == 3 and first["attempts_wall_s"] == 3001.0 + 2101.0 + 203.0
    assert first["attempts_peak_bytes"] == 20 * 2**30
    assert "SIGKILL" in first["earlier"] and "time limit" in first["earlier"] and "203" not in first["earlier"]
    assert costs.loc[100_000, "attempts"] == 0  # a refusal started nothing
    text = "\n".join(sizes.section(table, SWEEP, attempts, _claim(), axes=NO_X))
    assert "| 3 (5305 s, 20.0 GiB) |" in text and "earlier attempts: failed (killed by SIGKILL" in text
    (tmp_path / "sizes" / SWEEP / "logs").mkdir(parents=True)
    names = []
    for _ in range(3):
        log = run_sizes.attempt_log(tmp_path, SWEEP, 1000)
        log.write_text("x")
        names.append(log.name)
    assert names == ["1000.log", "1000.2.log", "1000.3.log"]


def test_the_step_runner_extrapolates_wall_time_log_log():
    done = [(1e4, 10.0), (1e5, 100.0)]
    assert run_sizes.extrapolate_seconds(done, 1e6) == pytest.approx(1000.0)
    assert run_sizes.extrapolate_seconds(done[:1], 1e6) is None


def test_sizes_must_name_a_size_sweep():
    base = {"id": "c", "paper": "tornado", "claim": "x", "preset": "p",
            "check": {"kind": "better", "metric": "throughput_eps", "subject": "a", "others": ["b"]}}
    for bad in ("tornado_routing", "size_nowhere", 3):
        with pytest.raises(ValueError, match="sizes="):
            claims.load_claims_from([{**base, "sizes": bad}])
    assert claims.load_claims_from([{**base, "sizes": SWEEP}])[0]["sizes"] == SWEEP


def test_an_estimate_records_the_step_as_not_run_with_its_extrapolated_time(tmp_path):
    rec = sizes.steps_file(tmp_path, SWEEP)
    rec.parent.mkdir(parents=True)
    rec.write_text('{"step": 10000, "status": "ok", "wall_s": 10.0, "new_runs": 5}\n'
                   '{"step": 100000, "status": "ok", "wall_s": 100.0, "new_runs": 5}\n')
    assert run_sizes.main([SWEEP, "--steps", "1000000", "--results", str(tmp_path), "--estimate"]) == 0
    last = sizes.read_steps(tmp_path, SWEEP)[-1]
    assert last["status"] == "skipped" and last["extrapolated_s"] == 1000 and "not started" in last["reason"]
    assert not (tmp_path / "runs.parquet").exists()  # nothing ran


def test_the_overview_lists_each_sweep_with_its_largest_step_and_what_stopped_the_next(tmp_path):
    rec = sizes.steps_file(tmp_path, SWEEP)
    rec.parent.mkdir(parents=True)
    rec.write_text('{"step": 20000, "status": "ok", "reason": "", "wall_s": 10.0}\n'
                   '{"step": 1000000, "status": "failed", "reason": "over the step time limit (60 s): stopped", '
                   '"wall_s": 60.0}\n')
    text = "\n".join(sizes.overview(tmp_path, _sweep({20_000: (2.0, 1.0)})))
    assert f"[{SWEEP}](plots/{SWEEP}/report.md)" in text
    assert "20k (ok), 1M (failed) | 20k |" in text and "1M: over the step time limit" in text


def test_the_figure_is_drawn_before_a_step_is_recorded_and_with_failed_steps(tmp_path):
    table = _sweep({10_000: (200.0, 100.0), 100_000: (150.0, 100.0)}).assign(wall_s=5.0)
    attempts = [{"step": 1_000_000, "status": "failed", "reason": "killed by SIGKILL", "wall_s": 9.0}]
    out = sizes.figure(table, SWEEP, attempts, tmp_path / "f.png", _claim(), axes=NO_X)
    assert out.stat().st_size > 10_000


def test_a_step_not_measured_says_why():
    # b's run at 10k was too short (its busiest worker under measure.min_bottleneck_s): left out, so
    # the claim reads no run of b there; the report names the cell and the reason, not a bare n/m
    table = _sweep({10_000: (200.0, 100.0), 100_000: (200.0, 100.0)})
    table.loc[(table["variant"] == "b") & (table["x"] == "10000"), "too_short"] = 1.0
    text = "\n".join(sizes.section(table, SWEEP, [], _claim(), axes=NO_X))
    assert "| `c` | n/m / n/m | holds / holds |" in text
    why = [line for line in text.splitlines() if line.startswith("- `c` at 10k:")]
    assert len(why) == 1 and "no usable run of b" in why[0] and "1 run too short to measure" in why[0]
    assert not any(line.startswith("- `c` at 100k:") for line in text.splitlines())


# the knobs that set how long a workload's measured part is (not what is measured)
MEASURED_LENGTH = ("updates", "queries", "ctq_span_s", "measured_messages")


def test_each_size_sweep_measures_at_least_as_long_as_the_claim_presets_it_judges():
    # a step shorter than the claim's own preset has its fast strategies' runs 'too short' (issue 40)
    # and the claim not measured at any step: size_sstd and size_sstd_crq ran the workloads' default
    # 2,000 snapshot queries and 8,000 updates, so SSTD's SKQ, SRQ and CRQ claims read no run
    import yaml

    def workload(preset):
        return (yaml.safe_load((run_sizes.PRESETS_DIR / f"{preset}.yaml").read_text()) or {}).get("workload") or {}

    short = []
    for claim in claims.load_claims():
        if not claim.get("sizes"):
            continue
        knob, _ = run_sizes.sweep_axis(claim["sizes"])
        mine, theirs = workload(claim["sizes"]), workload(claim["preset"])
        for key in MEASURED_LENGTH:
            if f"workload.{key}" == knob or not isinstance(theirs.get(key), (int, float)):
                continue
            if not isinstance(mine.get(key), (int, float)) or mine[key] < theirs[key]:
                short.append(f"{claim['sizes']} workload.{key}={mine.get(key)} < {claim['preset']}'s {theirs[key]}")
    assert not short, sorted(set(short))
