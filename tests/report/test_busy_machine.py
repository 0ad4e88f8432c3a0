"""Comparisons a busy machine cannot reverse (issue 48, part 3), on hand-built runs tables: the
preset's A/A pair widens the intervals a verdict reads by its spread, a run measured on a loaded
machine is left out with its reason, and a claim whose runs were all loaded is not measured,
never "does not hold"."""

from __future__ import annotations

import math
import os

import pandas as pd
import pytest

from harness.core import machine_load
from harness.report import claims
from harness.report.claims import aa_pairs
from harness.report.claims.checks import Value


def _row(variant, eps, *, lo=None, hi=None, workers=8, started="2026-01-01", **extra):
    lo = eps if lo is None else lo
    hi = eps if hi is None else hi
    return {"variant": variant, "strategy": variant, "status": "ok", "dataset": "synthetic", "workload": "q1",
            "workers": workers, "experiment": "p", "started_at": started, "x": None, "facet": None,
            "throughput_eps": eps, "throughput_compute_eps": eps, "throughput_compute_eps_ci_lo": lo,
            "throughput_compute_eps_ci_hi": hi, "throughput_network_eps": eps, "throughput_network_eps_ci_lo": eps,
            "throughput_network_eps_ci_hi": eps, "oracle_ok": True, "too_short": 0.0, "code_version": "v1",
            "run_id": f"{variant}-{started}-{workers}", **extra}


def _claim(kind="better", value=None):
    check = {"kind": kind, "metric": "throughput_eps", "subject": "a", "others": ["b"], "where": {"workers": [8]}}
    if value is not None:
        check["value"] = value
    return claims.load_claims_from([{"id": "c", "paper": "ps2stream", "claim": "a beats b", "preset": "p",
                                     "check": check}])[0]


def _runs(a2_eps):
    """a beats b (110 [108-112] vs 100 [98-102]) in the preset's cell; a's A/A pair, on 1 worker,
    measured 100 at the start and `a2_eps` at the end."""
    return pd.DataFrame([
        _row("a", 100.0, workers=1, started="2026-01-01T00:00", aa_role="a1"),
        _row("a", 110.0, lo=108.0, hi=112.0, started="2026-01-01T00:01"),
        _row("b", 100.0, lo=98.0, hi=102.0, started="2026-01-01T00:02"),
        _row("a", a2_eps, workers=1, started="2026-01-01T00:03", aa_role="a2"),
    ])


def test_the_aa_spread_widens_a_comparison_until_it_is_within_the_noise():
    # an A/A pair that agrees leaves the verdict as the repetition intervals give it
    same = claims.evaluate(_claim(), _runs(100.0), "compute")
    assert same.verdict == "holds"
    assert not any("A/A spread" in n for n in same.comparisons)
    # 100 then 120 for one configuration: s = 20 / 110 = 18.2%; a's 108 x (1 - s) < b's 102 x (1 + s)
    wide = claims.evaluate(_claim(), _runs(120.0), "compute")
    assert wide.verdict.startswith("inconclusive")
    note = next(n for n in wide.comparisons if "A/A spread" in n)
    assert "18.2%" in note and "a at q1/synthetic/1w" in note and "0.182" in note
    # the repeat is listed among the runs left out, and never read as the cell's run
    assert any(aa_pairs.REPEAT_REASON in e for e in wide.excluded)
    assert all("1w" not in c for c in wide.comparisons if "A/A" not in c)


def test_the_aa_spread_widens_a_ratios_interval():
    # a / b = 1.1 [108/102, 112/98] = [1.059, 1.143]: at least 1.05 holds without the pair's spread
    assert claims.evaluate(_claim("ratio_at_least", 1.05), _runs(100.0), "compute").verdict == "holds"
    # with s = 2 / 101 the lower end is 108 (1 - s) / (102 (1 + s)) = 1.018 < 1.05: within the noise
    v = claims.evaluate(_claim("ratio_at_least", 1.05), _runs(102.0), "compute")
    assert v.verdict.startswith("inconclusive")


def test_spread_and_widen_follow_their_formula():
    table = _runs(120.0)
    pair = aa_pairs.spread(table, "throughput_compute_eps")
    assert pair is not None and pair.variant == "a" and pair.pairs == 1
    assert pair.rel == pytest.approx(20.0 / 110.0)
    w = pair.widen(Value(110.0, 108.0, 112.0))
    assert (w.mid, w.lo, w.hi) == pytest.approx((110.0, 108.0 * (1 - 20 / 110), 112.0 * (1 + 20 / 110)))
    # no a1 for the a2's cell: no pair
    assert aa_pairs.spread(table[table["aa_role"] != "a1"], "throughput_compute_eps") is None
    # a spread over 100% does not send a lower end below 0
    huge = aa_pairs.Spread(1.5, "throughput_compute_eps", "a", (), 1.0, 10.0, 1)
    assert huge.widen(Value(5.0, 4.0, 6.0)).lo == 0.0


def test_a_loaded_run_is_left_out_with_its_reason():
    """Judged from the load figures the row keeps, with today's thresholds (a run flagged by the
    stricter limits it was measured under is judged anew)."""
    reason = "other processes used 40% of the machine > 15%"
    table = pd.DataFrame([
        _row("a", 200.0, started="2026-01-01"), _row("b", 100.0, started="2026-01-01"),
        # a newer run of b that would reverse the claim, measured while other processes ran
        _row("b", 400.0, started="2026-01-02", others_busy_frac=0.4, loaded=0.0),
    ])
    v = claims.evaluate(_claim(), table, "compute")
    assert v.verdict == "holds"
    assert any("loaded machine" in e and reason in e for e in v.excluded)
    # the same run on a quiet machine is read, and reverses it: the test can tell the two apart;
    # the stored flag (1: an older, stricter limit) does not decide
    table.loc[2, ["others_busy_frac", "loaded"]] = [0.02, 1.0]
    assert claims.evaluate(_claim(), table, "compute").verdict == "does not hold"


def test_a_claim_whose_runs_were_all_loaded_is_not_measured_never_does_not_hold():
    reason = "CPU/wall 0.21 of the timed work < 0.3"
    table = pd.DataFrame([_row("a", 50.0, cpu_wall_ratio=0.21), _row("b", 100.0, cpu_wall_ratio=0.21)])
    v = claims.evaluate(_claim(), table, "compute")
    assert v.verdict == "not measured"
    assert v.missing and sum(reason in e for e in v.excluded) == 2
    table["cpu_wall_ratio"] = 0.9  # read, the same throughputs fail it
    assert claims.evaluate(_claim(), table, "compute").verdict == "does not hold"


def test_judge_flags_each_threshold_and_names_it():
    limits = machine_load.Thresholds(max_load_per_core=1.5, min_cpu_wall=0.7, max_steal=0.05)
    calm = machine_load.judge({"load1_start": 1.0, "load1_end": 2.0, "cpu_busy_frac": 0.5, "steal_frac": 0.0,
                               "cpu_wall_ratio": 0.95}, 2, limits)
    assert calm["loaded"] == 0.0 and calm["loaded_reason"] == "" and calm["load_per_core_max"] == 1.0
    busy = machine_load.judge({"load1_start": 1.0, "load1_end": 3.2, "cpu_busy_frac": 1.0, "steal_frac": 0.1,
                               "cpu_wall_ratio": 0.5}, 2, limits)
    assert busy["loaded"] == 1.0
    assert "1.60 per core" in busy["loaded_reason"] and "CPU/wall 0.50" in busy["loaded_reason"]
    assert "steal 10.0%" in busy["loaded_reason"]
    unknown = machine_load.judge({"load1_start": float("nan"), "load1_end": float("nan")}, 2, limits)
    assert unknown["loaded"] == 0.0 and math.isnan(unknown["load_per_core_max"])
    assert set(busy) == set(machine_load.COLUMNS)


def test_cpu_wall_ratio_reads_the_counted_repetitions():
    class Res:
        def __init__(self, cpu, wall):
            self.worker_stats = {0: {"rep_cpu_s": cpu, "rep_wall_s": wall}, 1: {"rep_cpu_s": cpu, "rep_wall_s": wall}}

    # the discarded first repetition (compilation: CPU 0.1 of 1 s) does not count
    reps = [[Res(0.1, 1.0), Res(0.9, 1.0), Res(0.8, 1.0)]]
    assert machine_load.cpu_wall_ratio(reps, 1) == pytest.approx(0.85)
    assert machine_load.cpu_wall_ratio(reps, 0) == pytest.approx(1.8 / 3)
    assert machine_load.cpu_wall_ratio([], 1) is None


def test_a_probe_reads_this_machine():
    probe = machine_load.LoadProbe.start()
    out = probe.finish(0.9, machine_load.Thresholds())
    assert set(out) == set(machine_load.COLUMNS) and out["cpu_wall_ratio"] == pytest.approx(0.9)
    assert out["loaded"] in (0.0, 1.0) and (out["loaded"] == 1.0) == bool(out["loaded_reason"])


def test_the_repeat_command_is_one_job_of_the_first_jobs_overrides():
    from harness.run import aa_pair

    cmd = aa_pair.repeat_command(["experiment=sstd_balancing", "workload=hotspot_objects", "adjust=none",
                                  "progress=true", "+strategy.variants=[{label: x, name: grid}]"])
    assert cmd[1:3] == ["-m", "harness"]
    assert cmd[3:] == ["experiment=sstd_balancing", "workload=hotspot_objects", "adjust=none",
                       "+strategy.variants=[{label: x, name: grid}]", "aa_role=a2", "progress=false",
                       "hydra.mode=RUN"]


def test_a_preset_figure_reads_the_first_job_not_its_repeat(tmp_path):
    from harness.report import experiments, results

    table = _runs(120.0).assign(run_dir="", sweep_id="s")
    results.append_runs_table(tmp_path, table.to_dict("records"))
    rows = experiments.sweep_rows(tmp_path, "s", "p")
    one = rows[rows["workers"] == 1]
    assert len(one) == 1 and one["aa_role"].iloc[0] == "a1" and one["throughput_compute_eps"].iloc[0] == 100.0


def test_a_presets_report_shows_the_first_job_and_flags_a_loaded_run():
    from harness.report.claims import report as claims_report

    table = _runs(120.0)
    table.loc[2, "steal_frac"] = 0.09
    shown = claims_report.preset_runs("p", table, "v1")
    assert list(shown.loc[shown["workers"] == 1, "aa_role"]) == ["a1"]
    text = "\n".join(claims_report.throughput_tables(shown))
    assert "loaded machine (steal 9.0% > 5%)" in text
    assert text.count("loaded machine") == 1


def test_the_runs_own_process_tree_is_not_counted_as_others_load():
    """A child the run waited for counts as the run's own CPU (its ticks reach the parent's tree),
    so only other processes' CPU makes a run loaded; a crafted sample where others used 30% of the
    machine is flagged, naming it."""
    import subprocess
    import sys

    before = machine_load.tree_ticks()
    assert before is not None and before > 0
    subprocess.run([sys.executable, "-c", "import time\nt=time.process_time()\nwhile time.process_time()-t<0.3: pass"],
                   check=True)
    assert machine_load.tree_ticks() - before >= 0.2 * os.sysconf("SC_CLK_TCK")
    limits = machine_load.Thresholds()
    quiet = machine_load.judge({"load1_start": 3.0, "load1_end": 3.2, "cpu_busy_frac": 0.9, "steal_frac": 0.0,
                                "cpu_wall_ratio": 0.5, "others_busy_frac": 0.02}, 2, limits)
    assert quiet["loaded"] == 0.0, quiet["loaded_reason"]  # the run's own load on 2 cores
    busy = machine_load.judge({"load1_start": 2.0, "load1_end": 2.0, "cpu_busy_frac": 0.95, "steal_frac": 0.0,
                               "cpu_wall_ratio": 0.8, "others_busy_frac": 0.3}, 2, limits)
    assert busy["loaded"] == 1.0 and "other processes used 30% of the machine > 15%" in busy["loaded_reason"]
