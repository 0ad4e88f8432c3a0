"""The latency queue model against a plain simulation: round-robin dispatchers and FIFO workers,
an event done when its last copy leaves, also when one worker serves an event twice."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.measure.latency import event_latencies
from harness.measure.network import Copies


def plain_latencies(n, dispatch_s, n_disp, rate, workers):
    arrival = [i / rate for i in range(n)]
    leave, free = [0.0] * n, [float("-inf")] * n_disp
    for i in range(n):
        d = i % n_disp
        free[d] = max(arrival[i], free[d]) + dispatch_s
        leave[i] = free[d]
    done = list(leave)
    for seqs, service in workers.values():
        t = float("-inf")
        for s, x in zip(seqs, service):
            t = max(leave[s], t) + x
            done[s] = max(done[s], t)
    return [d - a for d, a in zip(done, arrival)]


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 40), st.integers(1, 3), st.integers(1, 4), st.data())
def test_latencies_equal_a_plain_queue_simulation(n, n_disp, n_workers, data):
    workers = {}
    for w in range(n_workers):
        seqs = sorted(data.draw(st.lists(st.integers(0, n - 1), max_size=n)))  # repeats: served twice
        service = data.draw(st.lists(st.floats(0.0, 0.01), min_size=len(seqs), max_size=len(seqs)))
        workers[w] = (np.array(seqs, np.int64), np.array(service))
    got = event_latencies(Copies.of(np.arange(n), np.zeros(n, np.int64), workers, n_disp), n, 0.001, n_disp, 500.0)
    assert np.allclose(got, plain_latencies(n, 0.001, n_disp, 500.0, workers), rtol=0, atol=1e-12)


def test_event_time_arrivals_keep_the_mean_rate_and_bring_a_batch_together():
    from harness.measure.latency import arrival_times

    ts = np.array([0.0, 0.0, 0.0, 1.0, 2.0, 2.0, 3.0])
    even = arrival_times(7, 2.0)
    by_time = arrival_times(7, 2.0, ts)
    assert np.allclose(even, np.arange(7) / 2.0)
    assert by_time[0] == by_time[2] == 0.0 and by_time[-1] == even[-1] and by_time[4] == by_time[5]
    assert np.allclose(arrival_times(3, 1.0, np.zeros(3)), [0.0, 1.0, 2.0])  # no time passes: even


def test_snapshot_latency_by_sstd_type():
    import pandas as pd
    import pytest

    from harness.core.events import INSERT, KNN, OBJECT, RANGE, SNAPSHOT, TERMS
    from harness.measure.network import Copies
    from harness.measure.summary import snapshot_metrics

    kinds = np.array([OBJECT, SNAPSHOT, SNAPSHOT, SNAPSHOT, INSERT, SNAPSHOT], np.int8)
    family = np.array([-1, RANGE, KNN, RANGE, RANGE, TERMS], np.int8)
    lat = np.array([9.0, 0.001, 0.004, 0.003, 9.0, 0.006])
    copies = Copies.of(np.arange(6), np.full(6, 10), {0: (np.arange(6), np.zeros(6))}, 1)
    workers = pd.DataFrame({"stored_objects": [3, 4], "stored_bytes": [300, 500]})
    got = snapshot_metrics(lat, kinds, copies, workers, family)
    assert got["srq_latency_mean_ms"] == pytest.approx(2.0) and got["skq_latency_mean_ms"] == pytest.approx(4.0)
    assert got["stq_latency_mean_ms"] == pytest.approx(6.0) and got["snapshot_queries"] == 4
    assert got["snapshot_latency_mean_ms"] == pytest.approx(3.5) and got["stored_objects_sum"] == 7
    assert got["stored_bytes_max"] == 500 and got["stored_bytes_sum"] == 800
