"""The bytes a worker's object stores hold, through the in-process epoch loop into the run's figures:
a snapshot stream reports stored_bytes_max / _sum of at least its stored objects' columns, a stream
without snapshot queries keeps no store and reports neither."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from harness.core.events import NUMERIC_FIELDS, NUMPY_DTYPES, OBJECT, RANGE
from harness.engine.epochs import epoch_bounds
from harness.engine.executors import InProcessExecutor
from harness.engine.loop import run_epochs
from harness.engine.setup import family_setup, stream_families
from harness.engine.simulate import default_context
from harness.families.base import IndexContext
from harness.measure.summary import summarise_run
from harness.run.config import LatencyConfig
from strategies import registry
from tests.streams import random_snapshot_stream, random_stream

N_WORKERS = 3


def _run(events, warmup: int, strategy: str):
    """The epoch loop in process, as `simulate` runs it, and the run's summary of its measured epochs."""
    context = default_context(events)
    cls = registry.get(strategy)
    index_context = IndexContext(context.extent, context.vocab_size)
    setup = family_setup(stream_families(events), cls.families, index_context, {"range": {"cells_per_side": 16}},
                         cls.paper_index, events)
    sample = setup.fit_sample(events, warmup, index_context)
    context = replace(context, family_contexts={**setup.contexts, **context.family_contexts})
    router = cls().fit(sample, N_WORKERS, cls.make_params({}), context)
    bounds = epoch_bounds(events, warmup, "count", len(events) // 4)
    loop = run_epochs(InProcessExecutor(events, setup, N_WORKERS), router, events, setup, bounds, None, N_WORKERS, 1)
    summary = summarise_run(loop.measured, loop.series, events, warmup, N_WORKERS, 1, LatencyConfig())
    return loop, summary.metrics, summary.epochs


def test_a_snapshot_run_reports_the_bytes_its_stores_hold():
    ev = random_snapshot_stream(3, RANGE, n_objects=120, n_queries=30, with_subscriptions=True)
    warmup = int(np.flatnonzero(ev.kind != OBJECT)[0])
    loop, m, _ = _run(ev, warmup, "grid")
    per_object = sum(np.dtype(NUMPY_DTYPES[c]).itemsize for c in NUMERIC_FIELDS) + 8  # columns, offset
    assert m["stored_objects_max"] > 0
    assert m["stored_bytes_max"] >= m["stored_objects_max"] * per_object
    assert m["stored_bytes_sum"] >= m["stored_bytes_max"]
    # a level: each worker's largest over the epochs, not their sum
    stats = [e.worker_stats for e in loop.measured]
    for w in range(N_WORKERS):
        assert max(s[w]["stored_bytes"] for s in stats) <= m["stored_bytes_max"]
    assert m["stored_bytes_sum"] == sum(max(s[w]["stored_bytes"] for s in stats) for w in range(N_WORKERS))


def test_a_run_without_snapshot_queries_keeps_no_bytes():
    ev = random_stream(3, n_objects=120, n_queries=30)
    loop, m, epochs = _run(ev, 20, "grid")
    assert "stored_bytes_max" not in m and "stored_objects_max" not in m
    assert "snapshot_latency_mean_ms" not in epochs and "snapshot_queries" not in epochs
    assert not any("stored_bytes" in st for e in loop.measured for st in e.worker_stats.values())  # no store


def test_each_epoch_reports_its_snapshot_queries_and_their_latency():
    """The per-epoch snapshot latency (read after a move by Fig. 14(c)'s claims) covers every
    measured snapshot query once: the epochs' counts sum to the run's, and their query-weighted
    mean is the run's mean latency."""
    ev = random_snapshot_stream(5, RANGE, n_objects=160, n_queries=40, with_subscriptions=True)
    warmup = int(np.flatnonzero(ev.kind != OBJECT)[0])
    _, m, epochs = _run(ev, warmup, "grid")
    n = epochs["snapshot_queries"].to_numpy()
    assert len(epochs) >= 2 and n.sum() == m["snapshot_queries"] > 0
    ms = epochs["snapshot_latency_mean_ms"].to_numpy()
    assert np.isnan(ms[n == 0]).all() and (ms[n > 0] > 0).all()
    assert np.isclose((ms[n > 0] * n[n > 0]).sum() / n.sum(), m["snapshot_latency_mean_ms"], rtol=1e-9)
