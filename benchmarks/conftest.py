"""Shared benchmark fixtures: scale, synthetic data, and the figures table printed at the end.

Every figure is stored with `record(name, value, unit, baseline=..., target=...)`; the summary
prints each figure with its ratio to the baseline figure(s) measured in the same session.
Targets are reported (met / MISSED), never asserted.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass, field

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from bench_data import sts_q1_queries, synthetic_objects  # noqa: E402

SCALES = {
    # objects: data set size / routed objects; route_queries: STS-Q1 queries routed;
    # gi2_queries: active queries for the matching figure; gi2_objects: objects matched;
    # strtree_objects: subset for the shapely baseline; stream_*: worker sub-stream figure;
    # naive_prefix: events run through the pure-Python index; fit_sizes: warm-up queries.
    "full": dict(objects=1_000_000, route_queries=20_000, loop_objects=50_000,
                 gi2_queries=(100_000, 1_000_000), gi2_objects={100_000: 200_000, 1_000_000: 50_000}, strtree_objects={100_000: 10_000, 1_000_000: 2_000},
                 stream_live=1_000_000, stream_updates=20_000, naive_prefix=2_000,
                 fit_sizes=(10_000, 40_000)),
    "small": dict(objects=200_000, route_queries=20_000, loop_objects=20_000,
                  gi2_queries=(100_000,), gi2_objects={100_000: 50_000}, strtree_objects={100_000: 5_000},
                  stream_live=100_000, stream_updates=5_000, naive_prefix=1_000,
                  fit_sizes=(5_000, 20_000)),
}


def pytest_addoption(parser):
    parser.addoption("--bench-scale", default=None, choices=sorted(SCALES),
                     help="benchmark size: full (default; 1M objects/queries) or small (quick check); "
                          "also STPS_BENCH_SCALE")


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


@pytest.fixture(scope="session")
def record(figures):
    def _record(name, value, unit, baseline=None, target=None, target_on="value", note="", target_max=None,
                paired=None):
        """`paired`: the ratio to a baseline measured in the same rounds as this figure (the median
        of the per-round ratios, each round timing both back to back), used instead of the ratio
        of the two figures, so that both sides share the machine's state of the moment (this VM's
        speed drifts by up to 1.5x over tens of seconds, and a best round of either side can fall
        in a fast moment the other missed)."""
        if isinstance(baseline, str):
            baseline = (baseline,)
        figures[name] = Figure(name, float(value), unit, tuple(baseline or ()), target, target_on,
                               target_max, note, len(figures), dict(paired or {}))
        return figures[name]
    return _record


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
