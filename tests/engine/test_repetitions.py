"""Each measured epoch run `repeat` times from the same state (measure.repeat): the executors rewind,
every repetition gives the same result, and a repetition that does not is an error."""

from __future__ import annotations

import pytest

import numpy as np

from harness.core.events import INSERT
from harness.engine import executors
from harness.engine.simulate import default_context, simulate
from tests.engine.test_migration import RandomMoves
from tests.streams import random_knn_stream, random_stream, random_topk_stream


@pytest.mark.parametrize("make, strategy", [(random_stream, "kdtree"), (random_knn_stream, "dkmsks"),
                                            (random_topk_stream, "dskype_prefix")])
def test_repeated_epochs_rewind_and_stay_exact(make, strategy):
    events = make(3)
    once = simulate(events, 20, strategy, 3, epoch_events=20)
    thrice = simulate(events, 20, strategy, 3, epoch_events=20, repeat=3)
    assert thrice.exact and thrice.digest == once.digest
    assert thrice.repetitions == [3] * len(once.repetitions) and len(once.repetitions) > 1


def test_repeated_epochs_with_migrations_stay_exact():
    ev = random_stream(5, n_objects=200, n_queries=80)
    warmup = int(np.flatnonzero(ev.kind == INSERT)[20])
    context = default_context(ev, 5)
    res = simulate(ev, warmup, "grid", 3, epoch_events=60, adjust=RandomMoves(RandomMoves.make_params({}), 3, context,
                                                                             "grid"),
                   strategy_params={"cells_per_side": 8}, context=context, repeat=2)
    assert res.plans and res.exact and res.repetitions == [2] * len(res.repetitions)


def test_a_repetition_with_another_result_stops_the_run(monkeypatch):
    real = executors.InProcessExecutor.epoch
    calls = {"n": 0}

    def drifting(self, *args, **kwargs):  # the real epoch, its result hash moved on every second call
        res = real(self, *args, **kwargs)
        calls["n"] += 1
        if calls["n"] % 2 == 0:
            res.result_hash += 1
        return res

    monkeypatch.setattr(executors.InProcessExecutor, "epoch", drifting)
    with pytest.raises(RuntimeError, match="not deterministic"):
        simulate(random_stream(1), 20, "grid", 2, repeat=2)
