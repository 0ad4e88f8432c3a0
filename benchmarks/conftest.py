"""Shared benchmark fixtures: scale, synthetic data, the gate, and the figures table printed at the end.

Every figure is stored with `record(name, value, unit, baseline=..., target=...)`; the summary
prints each figure with its ratio to the baseline figure(s) measured in the same session.
The issue targets are reported (met / MISSED) in the table.

The gate (`--bench-gate` or STPS_BENCH_GATE=1; `make bench-check`): each figure named in GATES
must reach its minimum ratio to a baseline *paired in the same run* (both sides timed back to back
in each round on the same input, the median of the per-round ratios); a miss fails the test that
recorded it, with the figure, the target and the command that reproduces it. Never an absolute
time or rate: this shared VM's speed drifts by up to 1.5x, and a paired ratio cancels most of it.
STPS_BENCH_GATE_FACTOR (default 1) multiplies every gate target: the gate's own test sets it
impossibly high to show the gate failing.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from bench_data import sts_q1_queries, synthetic_objects  # noqa: E402

SCALES = {
    # objects: data set size / routed objects; route_queries: STS-Q1 queries routed;
    # gi2_queries: active queries for the matching figure; gi2_objects: objects matched;
    # stream_*: worker sub-stream figure;
    # naive_prefix: events run through the pure-Python index; fit_sizes: warm-up queries.
    "full": dict(objects=1_000_000, route_queries=20_000, loop_objects=50_000,
                 gi2_queries=(100_000, 1_000_000), gi2_objects={100_000: 200_000, 1_000_000: 50_000},
                 stream_live=1_000_000, stream_updates=20_000, naive_prefix=2_000,
                 fit_sizes=(10_000, 40_000)),
    "small": dict(objects=200_000, route_queries=20_000, loop_objects=20_000,
                  gi2_queries=(100_000,), gi2_objects={100_000: 50_000},
                  stream_live=100_000, stream_updates=5_000, naive_prefix=1_000,
                  fit_sizes=(5_000, 20_000)),
}


# The gate: figure -> (baseline, minimum paired ratio) at the small scale (`make bench-check`).
# How each minimum was set: the lowest paired ratio of the small-scale runs on this 2-core VM while
# other work ran (four; three for the two routers, after their timing stopped including the
# conversion of their output for the comparison), divided by 1.5 and rounded down; where the issue's own ratio target sits
# below that, the issue's target (gi2, stream, knn, srq, skq). The runs' figures are in
# ADR-0069 (issue 41). A miss then means the fast path lost at least a third of its lead over the
# fair baseline, beyond the noise seen, not a noisy round.
GATES = {
    "route_objects/grid_vs_numpy": ("route_objects/numpy_grid", 0.9),
    "gi2@100k/match": ("gi2@100k/strtree_numpy", 20.0),
    "stream@100k/gi2": ("stream@100k/strtree_numpy", 20.0),
    "knn@100k/index_vs_scan": ("knn@100k/inverted_scan", 20.0),
    "srq@201k/store": ("srq@201k/scan", 50.0),
    "skq@201k/store": ("skq@201k/scan", 20.0),
    "stq@201k/store": ("stq@201k/scan", 6.0),
    "topk@20k/index_vs_brute": ("topk@20k/brute_force", 1.1),
    "topk_route/dskype_prefix": ("topk_route/numpy", 5.0),
}


def pytest_addoption(parser):
    parser.addoption("--bench-scale", default=None, choices=sorted(SCALES),
                     help="benchmark size: full (default; 1M objects/queries) or small (quick check); "
                          "also STPS_BENCH_SCALE")
    parser.addoption("--bench-gate", action="store_true", default=False,
                     help="assert the GATES targets (paired ratios measured in the same run); also STPS_BENCH_GATE=1")


def _scale_name(config) -> str:
    name = config.getoption("--bench-scale") or os.environ.get("STPS_BENCH_SCALE") or "full"
    if name not in SCALES:
        raise pytest.UsageError(f"STPS_BENCH_SCALE={name!r}; valid: {', '.join(sorted(SCALES))}")
    return name


@pytest.fixture(scope="session")
def scale(pytestconfig) -> dict:
    return {"name": _scale_name(pytestconfig), **SCALES[_scale_name(pytestconfig)]}


# --- figures ----------------------------------------------------------------------------------

@dataclass
class Figure:
    name: str
    value: float
    unit: str
    baselines: tuple = ()
    target: float | None = None  # minimum value (same unit) the issue asks for
    target_on: str = "value"  # "value", or the name of a baseline whose ratio must reach target
    target_max: float | None = None  # maximum value the figure may have (e.g. a growth factor)
    note: str = ""
    order: int = 0
    paired: dict = field(default_factory=dict)  # baseline name -> the ratio to it measured round by round


_FIGURES: dict[str, Figure] = {}


@pytest.fixture(scope="session")
def figures() -> dict:
    return _FIGURES


def gating(config) -> bool:
    return bool(config.getoption("--bench-gate")) or os.environ.get("STPS_BENCH_GATE", "") not in ("", "0")


def gate_factor() -> float:
    return float(os.environ.get("STPS_BENCH_GATE_FACTOR", "1"))


def reproduce_command(config) -> str:
    """The command that reruns the current benchmark test under the gate."""
    current = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0] or "benchmarks"
    return (f"STPS_BENCH_SCALE={_scale_name(config)} .venv/bin/python -m pytest '{current}' --bench-gate "
            f"-p no:cacheprovider")


def check_gate(config, fig: "Figure") -> None:
    """Under the gate, fail unless fig's ratio to its GATES baseline, paired in the same run, reaches
    the GATES minimum (times STPS_BENCH_GATE_FACTOR)."""
    if not gating(config) or fig.name not in GATES:
        return
    base, minimum = GATES[fig.name]
    target = minimum * gate_factor()
    assert base in fig.paired, f"gate {fig.name}: no ratio to {base} paired in the same rounds was recorded"
    got = fig.paired[base]
    assert got >= target, (f"bench gate missed: {fig.name} x{got:.2f} vs {base} (paired in the same rounds), "
                           f"target >= x{target:g}; reproduce: {reproduce_command(config)}")


@pytest.fixture(scope="session")
def record(figures, pytestconfig):
    def _record(name, value, unit, baseline=None, target=None, target_on="value", note="", target_max=None,
                paired=None):
        """`paired`: the ratio to a baseline measured in the same rounds as this figure (the median
        of the per-round ratios, each round timing both back to back), used instead of the ratio
        of the two figures, so that both sides share the machine's state of the moment (this VM's
        speed drifts by up to 1.5x over tens of seconds, and a best round of either side can fall
        in a fast moment the other missed). Under the gate, a figure named in GATES is checked here."""
        if isinstance(baseline, str):
            baseline = (baseline,)
        figures[name] = Figure(name, float(value), unit, tuple(baseline or ()), target, target_on,
                               target_max, note, len(figures), dict(paired or {}))
        check_gate(pytestconfig, figures[name])
        return figures[name]
    return _record


def paired_rounds(fast, base, rounds: int, same=None):
    """Time `fast` and `base` back to back in each of `rounds` rounds on the same input. Each is a
    callable returning (seconds, output): the seconds it reports (process CPU time; an index may
    report its own busy time, leaving its state restore out as the baseline's build is left out).
    `same(fast_output, base_output)` asserts the two agree, every round. Returns (fast seconds per
    round, base seconds per round, median of the per-round ratios base / fast = the fast side's
    speed-up), plus the last outputs."""
    fs, bs, fo, bo = [], [], None, None
    for _ in range(rounds):
        f_s, f_out = fast()
        b_s, b_out = base()
        if same is not None:
            same(f_out, b_out)
        if fo is not None and same is not None:
            same(f_out, bo)  # and every round agrees with the one before
        fs.append(f_s)
        bs.append(b_s)
        fo, bo = f_out, b_out
    fs, bs = np.array(fs), np.array(bs)
    return fs, bs, float(np.median(bs / np.maximum(fs, 1e-12))), fo, bo


def timed(fn, reps: int = 1):
    """fn as a paired_rounds side: (process CPU seconds per call, averaged over `reps` calls in a
    row, and the last call's output). reps > 1 for calls of a millisecond or so, too short for one
    reading of the process clock to time."""
    def run():
        t0 = time.process_time()
        for _ in range(reps):
            out = fn()
        return (time.process_time() - t0) / reps, out
    return run


def cpu_timer(fn, rounds: int = 3):
    """Run fn `rounds` times; (min CPU seconds of one call, last result). Process CPU time, so a
    rate computed from it is per core."""
    best, out = math.inf, None
    for _ in range(rounds):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


def _fmt(v: float) -> str:
    if v != v:
        return "nan"
    a = abs(v)
    if a >= 1e9:
        return f"{v / 1e9:.2f}G"
    if a >= 1e6:
        return f"{v / 1e6:.2f}M"
    if a >= 1e4:
        return f"{v / 1e3:.1f}k"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _FIGURES:
        return
    tr = terminalreporter
    rows = []
    for f in sorted(_FIGURES.values(), key=lambda f: f.order):
        ratios, ratio_of = [], {}
        for b in f.baselines:
            base = _FIGURES[b].value if b in _FIGURES else None
            if b not in f.paired and not base:
                ratios.append(f"vs {b}: n/a")
                continue
            r = f.paired[b] if b in f.paired else f.value / base
            ratio_of[b] = r
            label = f"{b} (same rounds)" if b in f.paired else b
            ratios.append(f"x{r:.2f} vs {label}" if r < 100 else f"x{r:.0f} vs {label}")
        status, target = "", ""
        if f.target is not None:
            if f.target_on == "value":
                got, target = f.value, f">= {_fmt(f.target)} {f.unit}"
            else:
                got, target = ratio_of.get(f.target_on, float("nan")), f">= x{f.target:g} vs {f.target_on}"
            status = "met" if got >= f.target else "MISSED"
        elif f.target_max is not None:
            target = f"<= {_fmt(f.target_max)} {f.unit}"
            status = "met" if f.value <= f.target_max else "MISSED"
        rows.append((f.name, _fmt(f.value), f.unit, "; ".join(ratios), target, status, f.note))
    head = ("figure", "value", "unit", "ratio to baseline (same run)", "target", "status", "note")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    tr.section(f"stps benchmark figures (scale={_scale_name(config)})")
    tr.write_line(line(head))
    tr.write_line("  ".join("-" * w for w in widths))
    for r in rows:
        tr.write_line(line(r))
    missed = [r[0] for r in rows if r[5] == "MISSED"]
    tr.write_line(f"targets missed: {', '.join(missed) if missed else 'none'}")


# --- data ---------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def dataset(scale):
    """(objects table, term_df, extent) with scale['objects'] clustered, Zipf-termed objects."""
    return synthetic_objects(scale["objects"], seed=1)


@pytest.fixture(scope="session")
def query_pool(dataset, scale):
    """STS-Q1 range subscriptions as INSERT events, enough for every figure of the scale."""
    table, df, extent = dataset
    n = max(max(scale["gi2_queries"]), scale["stream_live"] + scale["stream_updates"], scale["route_queries"])
    return sts_q1_queries(table, df, extent, n, seed=2)
