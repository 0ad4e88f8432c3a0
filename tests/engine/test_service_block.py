"""Service times as they cross Spark: the driver gets each event's seconds exactly as the worker
apportions its busy time (busy x work / total work), from seq differences and work counts, for
each repetition's busy time (measure.repeat)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.engine.blocks import read_service, service_block


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**40), st.integers(0, 10**6)), max_size=200, unique_by=lambda t: t[0]),
       st.lists(st.floats(0.0, 100.0, allow_nan=False), min_size=1, max_size=8))
def test_service_times_arrive_as_the_worker_apportioned_them(rows, busy):
    rows = sorted(rows)
    seq = np.array([s for s, _ in rows], np.int64)
    work = np.array([w for _, w in rows], np.int64)
    got = read_service(service_block(seq, work, busy))
    assert len(got) == len(busy)
    for (got_seq, got_s), busy_s in zip(got, busy):
        assert got_seq.tolist() == seq.tolist()
        assert got_s.tolist() == (busy_s * work / max(int(work.sum()), 1)).tolist()  # bit for bit
