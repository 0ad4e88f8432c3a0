"""The repetitions of the runs a task holds run interleaved (issue 48, part 3): repetition r of
every (lane, worker) before repetition r + 1 of any, the direction alternating (ABBA for a pair),
in the worker stage and in the dispatch stage's timed routing."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest

from harness.core.interleave import rep_order
from harness.engine import pipeline
from harness.engine.blocks import BLOCK_SCHEMA


def test_rep_order_is_round_robin_with_alternating_direction():
    assert rep_order(2, 4) == [(0, 0), (0, 1), (1, 1), (1, 0), (2, 0), (2, 1), (3, 1), (3, 0)]  # A B B A A B B A
    order = rep_order(3, 5)
    assert len(order) == 15 and sorted(order) == sorted((r, c) for r in range(5) for c in range(3))
    reps = [r for r, _ in order]
    assert reps == sorted(reps)  # no repetition starts before every cell finished the one before
    for r in range(5):
        cells = [c for rr, c in order if rr == r]
        assert cells == ([0, 1, 2] if r % 2 == 0 else [2, 1, 0])
    assert rep_order(0, 3) == [] and rep_order(3, 0) == []
    with pytest.raises(ValueError, match="n_cells"):
        rep_order(-1, 2)


def test_the_worker_stage_runs_each_repetition_of_every_lane_and_worker_before_the_next(monkeypatch):
    ran = []

    class FakeRun:
        def __init__(self, lane, w, repeat):
            self.lane, self.w, self.repeat = lane, w, repeat

        def repetition(self, r, local):
            ran.append((r, self.lane, self.w))
            return iter(())

    monkeypatch.setattr(pipeline, "_worker_epoch",
                        lambda spec, router, feedback, w, blobs, n, events: (FakeRun(spec.id, w, spec.repeat), {}))
    monkeypatch.setattr(pipeline, "_worker_outputs", lambda *a: iter(()))
    lanes = [SimpleNamespace(id=i, repeat=3, setup=SimpleNamespace(local_codes=())) for i in range(2)]
    batch = pa.record_batch({"worker": pa.array([0, 1, 0, 1], pa.int32()), "payload": pa.array([b"", b"", b"", b""]),
                             "info": pa.array([None] * 4, pa.string()), "bucket": pa.array([None] * 4, pa.int32()),
                             "family": pa.array([None] * 4, pa.int8()), "lane": pa.array([0, 0, 1, 1], pa.int32())},
                            schema=BLOCK_SCHEMA)
    list(pipeline.worker_batches([batch], lanes, SimpleNamespace(value=[(None, None)] * 2), 1, None))
    jobs = [(0, 0), (0, 1), (1, 0), (1, 1)]  # (lane, worker) in the task
    expected = [(r, *jobs[j]) for r in range(3) for j in (range(4) if r % 2 == 0 else range(3, -1, -1))]
    assert ran == expected
    # before this change a lane ran all its repetitions first: lane 1 began after lane 0's last
    first_of_lane1 = ran.index(next(x for x in ran if x[1] == 1))
    assert first_of_lane1 < max(i for i, x in enumerate(ran) if x[1] == 0)


def test_the_dispatch_stage_times_each_repetition_of_every_lane_before_the_next(monkeypatch):
    routed = []

    def setup(lane):
        def route(router, view, ev):
            routed.append(lane)
            return np.arange(3), np.array([0, 1, 0])
        return SimpleNamespace(codes=(), route=route)

    monkeypatch.setattr(pipeline, "routing_view", lambda ev, codes: ev)
    lanes = [SimpleNamespace(repeat=2, setup=setup(i)) for i in range(3)]
    out = pipeline._route_interleaved(object(), [None] * 3, lanes)
    assert routed == [0, 1, 2, 2, 1, 0]
    assert all(len(ns) == 2 and list(rows) == [0, 1, 2] for _, rows, _, ns in out)


def test_a_router_that_routes_otherwise_on_a_repetition_is_an_error(monkeypatch):
    calls = iter([(np.arange(2), np.array([0, 1])), (np.arange(2), np.array([1, 1]))])
    monkeypatch.setattr(pipeline, "routing_view", lambda ev, codes: ev)
    lanes = [SimpleNamespace(repeat=2, setup=SimpleNamespace(codes=(), route=lambda r, v, e: next(calls)))]
    with pytest.raises(RuntimeError, match="not deterministic"):
        pipeline._route_interleaved(object(), [None], lanes)
