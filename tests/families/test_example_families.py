"""The example families of examples/families/, loaded as plugins (no shared module names them):
each passes the public `check_family` (harness/engine/contract.py). The latest_k family, with
snapshot answers from the object store, runs in process through every strategy that can answer
snapshot queries, equal to its own oracle, and its own figure reaches a run's summary through the
registry (the report asks the family; nothing in harness/report names it)."""

from __future__ import annotations

import importlib
import math
import sys
from contextlib import contextmanager

import numpy as np
import pytest

from harness.core.events import SNAPSHOT
from harness.engine.contract import check_family, tiny_workload
from harness.families import registry as families

LATEST_K = "examples.families.latest_k"


@contextmanager
def loaded(module: str):
    """The example's module imported (again, so its classes register) for the block alone: the
    registry is as it was afterwards, and other tests find no example family registered."""
    saved = dict(families._FAMILIES)
    if module in sys.modules:
        importlib.reload(sys.modules[module])
    else:
        families.load_plugins([module])
    try:
        yield
    finally:
        families._FAMILIES.clear()
        families._FAMILIES.update(saved)


@pytest.fixture(scope="module")
def latest_k():
    with loaded(LATEST_K):
        yield families.get("latest_k")


def test_latest_k_passes_check_family(latest_k):
    done = check_family(latest_k, workers=(3, 8))
    refused = [line for line in done if "refused" in line]
    ran = [line for line in done if line.endswith("epochs")]
    assert ran and len(ran) + len(refused) + 1 == len(done)  # the parts, then one line per run


def test_latest_k_answers_are_capped_by_k_and_are_not_ranges(latest_k):
    wl = tiny_workload(latest_k)
    snap = (wl.events.kind == SNAPSHOT) & (wl.events.family == latest_k.code)
    assert snap.sum() >= 40
    keys = latest_k.oracle(wl.events)
    per_query = np.unique(keys >> 32, return_counts=True)[1]
    assert len(per_query) > 30 and per_query.max() <= 4  # k = 1 + id % 4
    assert (per_query == 4).any()  # some queries fill their k: the cap is real
    srq = families.get("range").oracle(_as_range(wl.events, latest_k.code))
    assert set(keys.tolist()) < set(srq.tolist())  # the latest k are among the SRQ's answers, not all of them


def test_latest_k_figure_reaches_the_run_summary(latest_k):
    from datasets.workloads.anomalies import normalise_prefix
    from harness.engine.assembly import assemble_run
    from harness.engine.epochs import epoch_bounds
    from harness.engine.executors import InProcessExecutor
    from harness.engine.loop import run_epochs
    from harness.engine.simulate import default_context
    from harness.report import metrics
    from harness.measure.summary import summarise_run
    from harness.run.config import LatencyConfig
    from strategies import registry

    wl = tiny_workload(latest_k)
    events, warmup, anomalies = normalise_prefix(wl.events, wl.warmup)
    cls = registry.get("quadtree")
    run = assemble_run(cls, events, warmup, default_context(events), 3, {}, anomalies=anomalies)
    router = cls().fit(run.sample, 3, cls.make_params({}), run.context)
    loop = run_epochs(InProcessExecutor(events, run.setup, 3), router, events, run.setup,
                      epoch_bounds(events, warmup, "count", len(events) // 3), run.adjuster, 3, 1)
    figures = summarise_run(loop.measured, loop.series, events, warmup, 3, 1, LatencyConfig()).metrics
    assert figures["latest_k_checks_mean"] > 0 and math.isfinite(figures["slq_latency_mean_ms"])
    assert metrics.known("latest_k_checks_mean") and metrics.label("latest_k_checks_mean").endswith("(checks)")
    assert math.isnan(figures["amp_us"])  # top-k's figures are there too, empty: every family is asked


def test_first_k_passes_check_family():
    with loaded("examples.families.first_k"):
        done = check_family(families.get("first_k"), strategies=["grid", "kdtree", "text_frequency"], workers=(3,))
    assert len(done) == 4 and "first_k" not in families.names()


def _as_range(events, code):
    ev = events.take(np.arange(len(events)))
    ev.cols["family"][ev.family == code] = families.get("range").code
    return ev
