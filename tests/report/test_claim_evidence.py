"""What a claim reads and how it decides, on hand-built runs tables: only its own preset's runs of
the newest code version, never a run that failed, disagreed with the oracle or was too short;
overlapping repetition intervals decide nothing; `gap_grows` needs the subject to lead; facets are
read apart; `scales` fits every worker count; throughput claims are judged on both bases and a
flip between them is reported; mean latency is compared at one common input rate."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from harness.report import claims


def _row(variant, eps=100.0, *, lo=None, hi=None, preset="p", workers=8, workload="q1", started="2026-01-01",
         network=None, **extra):
    lo = eps if lo is None else lo
    hi = eps if hi is None else hi
    net = eps if network is None else network
    return {"variant": variant, "strategy": variant, "status": "ok", "dataset": "synthetic", "workload": workload,
            "workers": workers, "experiment": preset, "started_at": started, "x": None, "facet": None,
            "throughput_eps": net, "throughput_compute_eps": eps, "throughput_compute_eps_ci_lo": lo,
            "throughput_compute_eps_ci_hi": hi, "throughput_network_eps": net, "throughput_network_eps_ci_lo": net,
            "throughput_network_eps_ci_hi": net, "oracle_ok": True, "too_short": 0.0,
            "run_id": f"{variant}-{started}-{workers}-{preset}", **extra}


def _claim(kind="better", subject="a", others=("b",), metric="throughput_eps", preset="p", **check):
    return claims.load_claims_from([{"id": "c", "paper": "ps2stream", "claim": "a beats b", "preset": preset,
                                     "check": {"kind": kind, "metric": metric, "subject": subject,
                                               "others": list(others), **check}}])[0]


def test_runs_that_failed_the_oracle_or_were_too_short_are_excluded_and_listed():
    table = pd.DataFrame([_row("a", 200.0), _row("b", 100.0)])
    assert claims.evaluate(_claim(), table).verdict == "holds"
    # a newer run of a that disagrees with the oracle is not read: the older, exact one is
    wrong = pd.DataFrame([_row("a", 50.0, started="2026-02-01", oracle_ok=False)])
    v = claims.evaluate(_claim(), pd.concat([table, wrong]))
    assert v.verdict == "holds" and any("disagreed with the oracle" in e for e in v.excluded)
    # the only run of b is too short to measure: the claim is not measured, the run listed
    short = pd.DataFrame([_row("a", 200.0), _row("b", 100.0, too_short=1.0)])
    v = claims.evaluate(_claim(), short)
    assert v.verdict == "not measured"
    assert any("too short" in e for e in v.excluded) and "no usable run of b" in v.missing[0]
    failed = pd.DataFrame([_row("a", 200.0), {**_row("b", 900.0), "status": "error"}])
    v = claims.evaluate(_claim(), failed)
    assert v.verdict == "not measured" and any("failed" in e for e in v.excluded)


def test_an_unchecked_run_is_read_and_a_wrong_one_excluded_when_oracle_ok_is_a_nullable_boolean():
    """A runs table whose oracle_ok holds True, False and unchecked (no oracle ran) comes back from
    Parquet as pandas' nullable boolean; the unchecked run is read, the wrong one is not."""
    table = pd.DataFrame([_row("a", 200.0), _row("b", 100.0), _row("b", 300.0, started="2026-02-01")])
    table["oracle_ok"] = pd.array([None, True, False], dtype="boolean")
    v = claims.evaluate(_claim(), table)
    assert v.verdict == "holds" and any("disagreed with the oracle" in e for e in v.excluded)


def test_a_foreign_presets_newer_row_and_older_code_are_ignored():
    table = pd.DataFrame([_row("a", 200.0, code_version="v2"), _row("b", 100.0, code_version="v2")])
    foreign = pd.DataFrame([_row("a", 1.0, preset="other", started="2026-05-01", code_version="v2")])
    assert claims.evaluate(_claim(), pd.concat([table, foreign])).verdict == "holds"
    # the preset's newest runs are of code v3: the v2 rows are left out, so b is not measured
    newer = pd.DataFrame([_row("a", 50.0, started="2026-03-01", code_version="v3")])
    v = claims.evaluate(_claim(), pd.concat([table, newer]))
    assert v.verdict == "not measured" and "older code versions" in v.excluded[0]


def test_overlapping_intervals_are_inconclusive():
    apart = pd.DataFrame([_row("a", 120.0, lo=115.0, hi=125.0), _row("b", 100.0, lo=95.0, hi=105.0)])
    assert claims.evaluate(_claim(), apart).verdict == "holds"
    overlap = pd.DataFrame([_row("a", 102.0, lo=96.0, hi=108.0), _row("b", 100.0, lo=95.0, hi=105.0)])
    v = claims.evaluate(_claim(), overlap)
    assert v.verdict == "inconclusive" and "within the noise" in v.comparisons[0]
    below = pd.DataFrame([_row("a", 80.0, lo=75.0, hi=85.0), _row("b", 100.0, lo=95.0, hi=105.0)])
    assert claims.evaluate(_claim(), below).verdict == "does not hold"
    # a ratio whose interval straddles the published value decides nothing either
    ratio = _claim("ratio_at_least", value=1.2)
    assert claims.evaluate(ratio, overlap).verdict == "does not hold"  # at most 108/95 = 1.14 < 1.2
    assert claims.evaluate(ratio, pd.DataFrame([_row("a", 121.0, lo=110.0, hi=130.0),
                                                _row("b", 100.0, lo=98.0, hi=102.0)])).verdict == "inconclusive"
    # one cell holds, one is within the noise: inconclusive, with the share
    two = pd.concat([apart, overlap.assign(workload="q2")])
    assert claims.evaluate(_claim(), two).verdict == "inconclusive (1/2 hold, 1 within the noise)"


def test_a_timing_without_an_interval_borrows_its_runs_busy_time_interval():
    rows = [_row(v, 100.0, update_time_ms_per_ts=ms, worker_busy_max_s=1.0, worker_busy_max_s_ci_lo=0.9,
                 worker_busy_max_s_ci_hi=1.1) for v, ms in (("a", 10.0), ("b", 10.5))]
    v = claims.evaluate(_claim(metric="update_time_ms_per_ts"), pd.DataFrame(rows))
    assert v.verdict == "inconclusive"  # 9-11 ms against 9.45-11.55 ms
    rows[1]["update_time_ms_per_ts"] = 14.0
    assert claims.evaluate(_claim(metric="update_time_ms_per_ts"), pd.DataFrame(rows)).verdict == "holds"


def test_gap_grows_fails_while_the_subject_trails():
    def rows(a_small, a_large):
        return pd.DataFrame([_row(v, eps, preset="s", x=x) for v, x, eps in
                             (("a", 1, a_small), ("b", 1, 100.0), ("a", 4, a_large), ("b", 4, 100.0))])

    gap = _claim("gap_grows", preset="s")
    assert claims.evaluate(gap, rows(110.0, 150.0)).verdict == "holds"
    # the deficit shrinks from x0.56 to x0.64 (audit: sstd-fig8a-gap-grows) but a still trails
    v = claims.evaluate(gap, rows(56.0, 64.0))
    assert v.verdict == "does not hold" and "leads at the largest x: no" in v.comparisons[0]


def test_facets_are_read_apart():
    rows = [_row("a", 150.0, preset="f", x=1e-4, facet="1"), _row("b", 100.0, preset="f", x=1e-4, facet="1"),
            _row("a", 80.0, preset="f", x=1e-4, facet="3"), _row("b", 100.0, preset="f", x=1e-4, facet="3")]
    v = claims.evaluate(_claim(preset="f"), pd.DataFrame(rows))
    assert v.verdict == "partly (1/2)" and len(v.comparisons) == 2
    assert v.comparisons[0].startswith("q1/synthetic/8w at x=0.0001 (1)")


def test_scales_fits_every_worker_count():
    ends = [_row("a", 100.0, workers=2), _row("a", 400.0, workers=16)]
    assert claims.evaluate(_claim("scales", others=(), value=3.0), pd.DataFrame(ends)).verdict == "holds"
    # a collapse in between pulls the fitted growth down: the two ends alone would not see it
    middle = ends + [_row("a", 20.0, workers=4), _row("a", 30.0, workers=8)]
    v = claims.evaluate(_claim("scales", others=(), value=3.0), pd.DataFrame(middle))
    assert v.verdict != "holds" and "fitted over 4 worker counts" in v.comparisons[0]


def test_a_flip_between_the_bases_is_reported():
    table = pd.DataFrame([_row("a", 200.0, network=50.0), _row("b", 100.0, network=80.0)])
    result = claims.evaluate_both(_claim(), table)
    assert result.on("compute").verdict == "holds" and result.on("network").verdict == "does not hold"
    assert result.flips
    assert "(model output)" in result.on("network").comparisons[0]  # a zero-width network interval
    same = claims.evaluate_both(_claim(), pd.DataFrame([_row("a", 200.0), _row("b", 100.0)]))
    assert not same.flips
    counts = claims.tally([result, same], "network")
    assert counts["holds"] == 1 and counts["does not hold"] == 1
    count_claim = claims.evaluate_both(_claim(metric="obj_replication", others=("b",)), table)
    assert set(count_claim.verdicts) == {"any"}  # a count does not depend on the basis


def test_mean_latency_is_compared_at_one_common_input_rate():
    """a saturates early (its latency climbs steeply), b is fast: at each one's own 0.7x a looks
    better, at 0.7x the slowest's throughput (a's) b is better."""
    def curve(eps, slope):
        pts = [[f * eps, 1.0 + slope * f] for f in (0.05, 0.1, 0.2, 0.35, 0.5, 0.7)]
        return json.dumps({"compute": pts, "network": pts})

    rows = [_row("a", 1000.0, latency_mean_ms=2.0, latency_curve=curve(1000.0, 2.0)),
            _row("b", 10000.0, latency_mean_ms=5.0, latency_curve=curve(10000.0, 8.0))]
    lat = _claim(metric="latency_mean_ms")
    v = claims.evaluate(lat, pd.DataFrame(rows), "compute")
    assert v.verdict == "does not hold"  # at 700 events/s: a 2.4 ms, b 1.56 ms
    assert "at 700 events/s" in v.comparisons[0]
    no_curve = [{k: val for k, val in r.items() if k != "latency_curve"} for r in rows]
    assert claims.evaluate(lat, pd.DataFrame(no_curve), "compute").verdict == "holds"  # each at its own rate


@pytest.mark.parametrize("change, message", [
    ({"preset": None}, r"preset=None is invalid"),
    ({"scope": "ours"}, r"scope='ours' is invalid; allowed: paper, extension"),
])
def test_a_claim_without_its_preset_or_scope_is_refused(change, message):
    bad = {"id": "c", "paper": "ps2stream", "claim": "x", "preset": "p",
           "check": {"kind": "better", "metric": "throughput_eps", "subject": "a", "others": ["b"]}, **change}
    with pytest.raises(ValueError, match=message):
        claims.load_claims_from([bad])
