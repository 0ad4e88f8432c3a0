"""Each measured epoch's work timed `repeat` times from the same state (measure.repeat), inside the
epoch's tasks (harness/engine/worker_epoch.py): every repetition gives the same results, the first
one's go on, and a worker or merger whose repetition differs stops the run."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from harness.core.events import INSERT
from harness.engine import executors
from harness.engine.merge import merge_bucket
from harness.engine.setup import family_setup
from harness.engine.simulate import default_context, simulate
from harness.families.base import IndexContext
from harness.families.range.merge import RangeMerger
from strategies import registry
from tests.engine.test_migration import RandomMoves
from tests.streams import random_knn_stream, random_stream, random_topk_stream


@pytest.mark.parametrize("make, strategy", [(random_stream, "kdtree"), (random_knn_stream, "dkmsks"),
                                            (random_topk_stream, "dskype_prefix")])
def test_repeated_epochs_stay_exact(make, strategy):
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


def test_each_repetition_has_its_own_times_and_the_same_counts(monkeypatch):
    """The executor returns one result per repetition: counters equal, busy times each its own."""
    seen = []
    real = executors.InProcessExecutor.epoch

    def keep(self, *args, **kwargs):
        reps = real(self, *args, **kwargs)
        seen.append(reps)
        return reps

    monkeypatch.setattr(executors.InProcessExecutor, "epoch", keep)
    simulate(random_stream(2), 20, "grid", 3, epoch_events=40, repeat=4)
    measured = [reps for reps in seen if reps[0].epoch > 0]
    assert measured and all(len(reps) == 4 for reps in measured)
    assert all(len(reps) == 1 for reps in seen if reps[0].epoch == 0)  # the warm-up runs once
    for reps in measured:
        first = reps[0]
        for r in reps[1:]:
            assert (r.result_count, r.result_hash) == (first.result_count, first.result_hash)
            assert r.worker_stats is not first.worker_stats
            for w, st in r.worker_stats.items():
                assert {k: v for k, v in st.items() if not k.endswith("_s")} == \
                    {k: v for k, v in first.worker_stats[w].items() if not k.endswith("_s")}
    busy = [[st["busy_s"] for st in r.worker_stats.values()] for reps in measured for r in reps]
    assert len({tuple(b) for b in busy}) > 1  # timed again, not copied


class Drifting:
    """A real range index that, every second time it is built, reports one more pair: an index that
    is not deterministic."""
    built = 0

    def __init__(self, make):
        self.inner = make()
        Drifting.built += 1
        self.drift = Drifting.built % 2 == 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def process(self, ev):
        out = self.inner.process(ev)
        if self.drift and len(out.results):
            return replace(out, results=np.concatenate([out.results, out.results[:1] + 1]))
        return out


def test_a_worker_whose_repetition_differs_stops_the_run():
    ev = random_stream(1)
    ctx = default_context(ev)
    setup = family_setup(["range"], registry.get("grid").families, IndexContext(ctx.extent, ctx.vocab_size),
                         {"range": {"cells_per_side": 16}})
    code, make = next(iter(setup.factories.items()))
    setup.factories[code] = lambda: Drifting(make)
    Drifting.built = 0
    with pytest.raises(RuntimeError, match="not deterministic"):
        simulate(ev, 20, "grid", 2, setup=setup, repeat=2)


def test_a_merge_whose_repetition_differs_stops_the_run():
    calls = {"n": 0}

    class Flaky(RangeMerger):
        def merge(self, blobs, queries):
            out = super().merge(blobs, queries)
            calls["n"] += 1
            return replace(out, keys=out.keys[:-1]) if calls["n"] == 2 else out

    blobs = [blob for _, blob in RangeMerger.blocks(np.arange(5, dtype=np.int64), 1)]
    res = merge_bucket(RangeMerger, None, blobs, None, repeat=3)
    assert len(res.keys) == 5 and len(res.busy_s) == 3
    with pytest.raises(RuntimeError, match="not deterministic"):
        merge_bucket(Flaky, None, blobs, None, repeat=2)


def test_the_repetition_digest_sees_every_array_of_every_family():
    from harness.engine.worker_epoch import Digest
    from harness.families.base import WorkerOutput
    from harness.families.knn.index import Candidates

    def crc(outs):
        d = Digest()
        d.add(outs)
        return d.crc

    ids, d2 = np.arange(6, dtype=np.int64).reshape(3, 2), np.array([0.5, 1.0, 2.0])
    outs = {0: WorkerOutput(np.arange(5, dtype=np.int64), np.ones(5, np.int64)),
            1: WorkerOutput(Candidates(ids, d2), np.ones(3, np.int64)),
            2: WorkerOutput({"qid": np.arange(2), "score": np.array([0.1, 0.2])}, np.ones(2, np.int64))}
    base = crc(outs)
    assert crc({k: replace(v) for k, v in outs.items()}) == base
    changed = [replace(outs[0], results=np.array([0, 1, 2, 3, 5])), replace(outs[0], work=np.array([1, 1, 1, 1, 2])),
               replace(outs[1], results=Candidates(ids, np.array([0.5, 1.0, 2.5])))]
    for code, out in zip([0, 0, 1], changed):
        assert crc({**outs, code: out}) != base
    assert crc({**outs, 2: replace(outs[2], results={"qid": np.arange(2), "score": np.array([0.1, 0.3])})}) != base
    import pyarrow as pa

    table = {3: WorkerOutput(pa.table({"qid": [1, 2], "tag": ["a", "b"]}), np.ones(2, np.int64))}
    assert crc(table) == crc({3: WorkerOutput(pa.table({"qid": [1, 2], "tag": ["a", "b"]}), np.ones(2, np.int64))})
    assert crc(table) != crc({3: WorkerOutput(pa.table({"qid": [1, 2], "tag": ["a", "c"]}), np.ones(2, np.int64))})
    assert crc({4: WorkerOutput(frozenset({1, 2}), np.ones(2))}) != crc({4: WorkerOutput(frozenset({1, 3}), np.ones(2))})


@pytest.mark.parametrize("strategy", ["kop", "kdt", "agrid", "grid"])
def test_the_routers_upkeep_is_timed_per_repetition_and_applied_once(strategy):
    """Repeated upkeep leaves the router as one upkeep does (the repetitions before the last run on
    copies), and gives a time per repetition."""
    from harness.engine.loop import timed_upkeep
    from harness.engine.worker import routing_view

    ev = random_stream(8, n_objects=300, n_queries=150)
    ctx = default_context(ev)
    cls = registry.get(strategy)
    setup = family_setup(["range"], cls.families, IndexContext(ctx.extent, ctx.vocab_size),
                         {"range": {"cells_per_side": 16}})
    warm = 150
    sample = setup.fit_sample(ev, warm, IndexContext(ctx.extent, ctx.vocab_size))
    view = routing_view(ev, setup.codes)
    rows = warm + np.flatnonzero(view.kind[warm:] == INSERT)
    once, thrice = (cls().fit(sample, 4, cls.make_params({}), ctx) for _ in range(2))
    timed_upkeep(once, view, rows, 1)
    times = timed_upkeep(thrice, view, rows, 3)
    assert len(times) == 3 and all(t >= 0 for t in times)
    for a, b in zip(once.route(view), thrice.route(view)):
        np.testing.assert_array_equal(a, b)
    assert once.describe() == thrice.describe()
    if strategy in ("kop", "kdt"):  # upkeep changes what these route here: the router itself got it
        fresh = cls().fit(sample, 4, cls.make_params({}), ctx)
        assert any(not np.array_equal(a, b) for a, b in zip(fresh.route(view), thrice.route(view)))


def test_fewer_than_one_repetition_is_refused():
    with pytest.raises(ValueError, match="repeat=0 is invalid"):
        simulate(random_stream(1), 20, "grid", 2, repeat=0)
