"""One configuration measured by two presets (issue 48's target: within 10% on a quiet machine):
`harness.report.same_config` finds the configurations two presets share, and only those, and
gives each basis's spread."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from harness.report import same_config


def _run(experiment, variant="kdt", compute=100.0, network=50.0, events=1000, **extra):
    return {"experiment": experiment, "variant": variant, "adjust": "none", "dataset": "synthetic",
            "workload": "sts_q1", "workers": 8, "dispatchers": 4, "x": None, "events": events, "status": "ok",
            "oracle_ok": True, "throughput_compute_eps": compute, "throughput_network_eps": network, **extra}


def test_only_configurations_of_two_presets_are_compared_and_their_spread_is_max_over_min():
    table = pd.DataFrame([
        _run("a", compute=100.0), _run("b", compute=125.0, network=50.0),
        _run("a", variant="grid"), _run("a", variant="grid", compute=300.0),  # one preset twice: not compared
        _run("c", events=2000), _run("d", events=3000),  # other stream lengths: other configurations
        _run("e", compute=900.0, status="failed"),  # a failed run is not read
        _run("f", compute=900.0, aa_role="a2"),  # nor an A/A repeat
    ])
    found = same_config.spreads(table)
    assert len(found) == 1 and found["presets"].iloc[0] == "a, b"
    assert found["compute"].iloc[0] == pytest.approx(0.25) and found["network"].iloc[0] == pytest.approx(0.0)


def test_the_command_counts_the_configurations_within_the_bound(tmp_path, capsys):
    pd.DataFrame([_run("a", compute=100.0), _run("b", compute=105.0),
                  _run("a", variant="grid", compute=100.0), _run("b", variant="grid", compute=150.0)]
                 ).to_parquet(tmp_path / "runs.parquet", index=False)
    assert same_config.main(["--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "compute: 1 of 2 configurations within 10%" in out and "+50.0%" in out
    assert not math.isnan(same_config.spreads(pd.read_parquet(tmp_path / "runs.parquet"))["compute"].max())
    with pytest.raises(SystemExit):
        same_config.main(["--results", str(tmp_path), "--within", "0"])


def test_with_the_streams_digest_the_input_and_the_code_are_the_key_not_x():
    """The same x may be another knob in another preset (|W| = 20,000 against |S| = 20,000): with
    the stream's digest, runs on different streams are never paired, runs on one stream are paired
    whatever their x, and runs of different code are not paired (a change is no disagreement)."""
    table = pd.DataFrame([
        _run("k", x=20, compute=100.0, workload_events_sha256="s1", code_version="c1"),
        _run("subs", x=20000, compute=110.0, workload_events_sha256="s1", code_version="c1"),
        _run("table5", x=20000, compute=400.0, workload_events_sha256="s2", code_version="c1"),
        _run("older", x=20, compute=900.0, workload_events_sha256="s1", code_version="c0"),
    ])
    found = same_config.spreads(table)
    assert len(found) == 1 and found["presets"].iloc[0] == "k, subs"
    assert found["compute"].iloc[0] == pytest.approx(0.10)


def test_with_the_measurement_key_the_whole_configuration_is_the_key():
    """Runs that carry `measurement_key` are paired on it (and the code), even on one stream: one
    stream under another k is another configuration."""
    table = pd.DataFrame([
        _run("k", x=20, compute=100.0, workload_events_sha256="s1", code_version="c1", measurement_key="m1"),
        _run("subs", x=20000, compute=130.0, workload_events_sha256="s1", code_version="c1", measurement_key="m1"),
        _run("k50", x=50, compute=40.0, workload_events_sha256="s1", code_version="c1", measurement_key="m2"),
    ])
    found = same_config.spreads(table)
    assert len(found) == 1 and found["presets"].iloc[0] == "k, subs"
    assert found["compute"].iloc[0] == pytest.approx(0.30)
