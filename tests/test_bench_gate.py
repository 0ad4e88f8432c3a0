"""The benchmark gate itself (`make bench-check`, benchmarks/conftest.py GATES): it fails when a
paired ratio misses its target, naming the figure, the target and the command to reproduce it,
and it stays quiet when the target is met or the gate is off. Each case runs pytest in a
subprocess, as `make bench-check` does: a real gated benchmark with its target set impossibly
high (STPS_BENCH_GATE_FACTOR), and small probe files that record a gated figure directly."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


def run_pytest(args, cwd, **env):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("STPS_BENCH")}
    full_env.update(env)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *args],
                          cwd=cwd, env=full_env, capture_output=True, text=True, timeout=600)


def test_a_real_benchmark_fails_the_gate_with_figure_target_and_command():
    # the DSkype prefix router against its numpy version (the quickest gated benchmark), with every
    # gate target multiplied by a million: no run can reach it
    res = run_pytest(["benchmarks/test_topk_routing.py", "--bench-gate", "--benchmark-disable"], ROOT,
                     STPS_BENCH_SCALE="small", STPS_BENCH_GATE_FACTOR="1e6")
    out = res.stdout + res.stderr
    assert res.returncode == 1, out[-3000:]
    assert "bench gate missed: topk_route/dskype_prefix x" in out  # the figure and its paired ratio
    assert "vs topk_route/numpy (paired in the same rounds)" in out
    assert "target >= x5e+06" in out  # the GATES target (5) times the factor
    assert ("reproduce: STPS_BENCH_SCALE=small .venv/bin/python -m pytest "
            "'benchmarks/test_topk_routing.py::test_prefix_routing_rate' --bench-gate") in out
    assert "1 failed" in out


PROBE = '''
import pytest
from conftest import GATES

NAME = "topk_route/dskype_prefix"
BASE, TARGET = GATES[NAME]


@pytest.mark.parametrize("ratio", [RATIO])
def test_probe(record, ratio):
    record(NAME, 1.0, "x", baseline=BASE, paired=PAIRED)
'''


def probe(tmp_path, ratio_expr: str, paired_expr: str) -> Path:
    for name in ("conftest.py", "bench_data.py"):
        shutil.copy(BENCH / name, tmp_path / name)
    (tmp_path / "test_probe.py").write_text(PROBE.replace("RATIO", ratio_expr).replace("PAIRED", paired_expr))
    return tmp_path


def test_a_probe_meeting_the_target_passes_and_one_missing_it_fails(tmp_path):
    d = probe(tmp_path, "TARGET * 1.01", "{BASE: ratio}")
    res = run_pytest(["--bench-gate", "--rootdir", str(d), str(d / "test_probe.py")], d)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    missing = run_pytest(["--bench-gate", "--rootdir", str(d), str(d / "test_probe.py")], d,
                         STPS_BENCH_GATE_FACTOR="1.02")
    assert missing.returncode == 1 and "bench gate missed: topk_route/dskype_prefix" in missing.stdout
    # without the gate, the same miss is reported in the table, not failed
    quiet = run_pytest(["--rootdir", str(d), str(d / "test_probe.py")], d, STPS_BENCH_GATE_FACTOR="1.02")
    assert quiet.returncode == 0, (quiet.stdout + quiet.stderr)[-3000:]


def test_a_gated_figure_without_a_paired_ratio_fails(tmp_path):
    # a ratio of two figures timed apart is not what the gate asserts
    d = probe(tmp_path, "1.0", "None")
    res = run_pytest(["--rootdir", str(d), str(d / "test_probe.py")], d, STPS_BENCH_GATE="1")
    assert res.returncode == 1 and "no ratio to topk_route/numpy paired in the same rounds" in res.stdout
