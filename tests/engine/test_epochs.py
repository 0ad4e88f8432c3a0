"""Cutting the measured stream into epochs: by count and by event time, contiguous, covering."""

from __future__ import annotations

import numpy as np
import pytest

from harness.engine.epochs import epoch_bounds
from tests.streams import random_stream


def _check_cover(bounds, warmup, n):
    assert bounds[0] == (0, 0, warmup)
    assert [b[0] for b in bounds] == list(range(len(bounds)))
    for (_, _, hi), (_, lo, _) in zip(bounds[:-1], bounds[1:]):
        assert hi == lo
    assert bounds[-1][2] == n and all(hi > lo for _, lo, hi in bounds[1:])


@pytest.mark.parametrize("size", [0, 7, 50, 10_000])
def test_count_epochs_cover_the_measured_stream(size):
    ev = random_stream(2, n_objects=200, n_queries=60)
    warmup = 40
    bounds = epoch_bounds(ev, warmup, "count", size)
    _check_cover(bounds, warmup, len(ev))
    measured = [hi - lo for _, lo, hi in bounds[1:]]
    if size == 0 or size >= len(ev) - warmup:
        assert len(measured) == 1
    else:
        assert all(m == size for m in measured[:-1])
        assert size / 2 <= measured[-1] < 1.5 * size  # a short remainder joined the last epoch


def test_time_epochs_follow_event_time():
    ev = random_stream(4, n_objects=300, n_queries=80)
    ev.cols["ts"] = np.sort(np.random.default_rng(1).uniform(0, 100, len(ev)))
    warmup = 30
    bounds = epoch_bounds(ev, warmup, "time", 10.0)
    _check_cover(bounds, warmup, len(ev))
    t0 = ev.ts[warmup]
    for k, (_, lo, hi) in enumerate(bounds[1:]):
        window = ev.ts[lo:hi] - t0
        assert window.min() >= 10.0 * k - 1e-9 or k == 0
        assert window.max() < 10.0 * (k + 1) or k == len(bounds) - 2


def test_unknown_cut_is_rejected():
    with pytest.raises(ValueError, match="count, time"):
        epoch_bounds(random_stream(1), 5, "rows", 10)
