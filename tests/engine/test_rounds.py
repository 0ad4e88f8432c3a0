"""SSTD's two-phase SKQ (harness/engine/rounds.py): the first round at one worker, the second
within the radius it returned; exact under every strategy, with units moving, whichever worker
the first round picks; a radius too small loses answers; fewer workers than the fan-out; the
latency model queues a second round's copy after its first round's."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.events import SNAPSHOT
from harness.engine import executors, rounds
from harness.engine.simulate import simulate
from harness.families import registry as families
from harness.families.workload import WorkloadConfig
from harness.measure.latency import event_latencies
from harness.measure.network import Copies
from strategies import registry
from tests.helpers import random_objects

TWO_PHASE = {"knn": {"skq_protocol": "two_phase"}}


@pytest.fixture(scope="module")
def skq():
    objects, df, extent = random_objects(1500, seed=4)
    cfg = WorkloadConfig(name="tiny", family="knn", protocol="skq", queries=120, batch=20, preload_objects=800,
                         objects_per_s=100, op="and", keywords_max=1, tau_hours=200, k_min=1, k_max=6)
    return families.get("knn").build_workload(objects, df, extent, cfg, 7)


@pytest.fixture(scope="module")
def mixed():
    objects, df, extent = random_objects(1200, seed=5)
    cfg = WorkloadConfig(name="mix", family="range", protocol="mix", types=["srq", "skq", "stq", "ckq"],
                         queries=40, batch=20, preload_objects=500, sample_queries=10, objects_per_s=100, op="and",
                         keywords_max=1, area_fraction=0.02, k_min=2, k_max=5, tau_hours=300)
    return families.get("range").build_workload(objects, df, extent, cfg, 3)


@pytest.fixture
def second_rounds(monkeypatch):
    """The blocks each second round asked of the workers, recorded as the real executor runs them."""
    asked = []
    real = executors.InProcessExecutor.second_round

    def recording(self, epoch, requests):
        asked.append(requests)
        return real(self, epoch, requests)

    monkeypatch.setattr(executors.InProcessExecutor, "second_round", recording)
    return asked


@pytest.mark.parametrize("strategy", registry.names())
def test_two_phase_answers_equal_the_oracle_under_every_strategy(mixed, strategy):
    for n_workers in (3, 8) if strategy in ("quadtree", "qttree", "kdt", "agrid") else (3,):
        res = simulate(mixed.events, mixed.warmup, strategy, n_workers, epoch_events=len(mixed.events) // 3,
                       index_params=TWO_PHASE)
        assert res.exact, (strategy, n_workers, res.digest, res.oracle_digest)


@pytest.mark.parametrize("strategy", ["quadtree", "kdt", "qttree"])
def test_two_phase_stays_exact_when_units_move_and_objects_stay(mixed, strategy):
    from harness.engine.simulate import default_context
    from tests.engine.test_migration import RandomMoves

    adjuster = RandomMoves(RandomMoves.make_params({}), 4, default_context(mixed.events), strategy)
    res = simulate(mixed.events, mixed.warmup, strategy, 4, epoch_events=len(mixed.events) // 8, adjust=adjuster,
                   index_params=TWO_PHASE)
    assert len(res.plans) >= 3
    assert res.exact, (strategy, res.digest, res.oracle_digest)


def test_each_query_starts_at_one_worker_and_its_second_round_reaches_fewer_than_all(skq, second_rounds):
    res = simulate(skq.events, skq.warmup, "quadtree", 8, epoch_events=len(skq.events) // 4, index_params=TWO_PHASE)
    assert res.exact
    asked = [ev for r in second_rounds for by_worker in r.values() for ev in by_worker.values()]
    qids = np.concatenate([ev.id for ev in asked])
    measured = skq.events.kind[skq.warmup:] == SNAPSHOT
    assert len(np.unique(qids)) == int(measured.sum()) + int((skq.events.kind[:skq.warmup] == SNAPSHOT).sum())
    assert len(qids) / len(np.unique(qids)) < 0.9 * 8  # the fan-out reaches all 8
    bounded = set()
    for ev in asked:  # a second round's square: half side sqrt(r^2), r^2 carried in `win`
        fin = np.isfinite(ev.win)
        bounded |= set(ev.id[fin].tolist())
        assert ((ev.xmax - ev.xmin)[fin] <= 2 * np.sqrt(ev.win[fin]) * (1 + 1e-6) + 1e-9).all()
    assert len(bounded) > len(np.unique(qids)) // 2  # the others' first worker held fewer than k


def test_first_rounds_go_to_the_lowest_worker_the_point_reaches(skq):
    """with_first_round: other events keep their copies; a first-round query one copy, at the
    lowest worker its point alone reaches, or worker 0 when none does."""
    ev = skq.events.take(np.arange(skq.warmup, min(skq.warmup + 300, len(skq.events))))
    first = np.flatnonzero(ev.kind == SNAPSHOT)
    assert len(first) > 5

    def copies(v):  # each event to worker 1 and 3; nothing for points left of x = 100
        keep = np.flatnonzero(~((v.xmin == v.xmax) & (v.x < 100.0)))
        return np.repeat(keep, 2), np.tile(np.array([3, 1]), len(keep))

    rows, workers = rounds.with_first_round(copies, ev, first)
    assert sorted(rows[~np.isin(rows, first)].tolist()) == sorted(np.repeat(np.setdiff1d(np.arange(len(ev)), first),
                                                                          2).tolist())
    got = dict(zip(rows[np.isin(rows, first)].tolist(), workers[np.isin(rows, first)].tolist()))
    assert sorted(got) == first.tolist()
    assert all(got[i] == (0 if ev.x[i] < 100.0 else 1) for i in first)


def test_whichever_worker_starts_the_answers_stay_exact(skq, monkeypatch):
    """Any worker's k-th distance bounds the global one: the highest worker instead of the lowest."""
    real = rounds.with_first_round

    def highest(copies, view, first):
        rows, workers = real(copies, view, first)
        workers = workers.copy()
        workers[np.isin(rows, first)] = 7
        return rows, workers

    monkeypatch.setattr("harness.engine.setup.with_first_round", highest)
    res = simulate(skq.events, skq.warmup, "quadtree", 8, epoch_events=len(skq.events) // 4, index_params=TWO_PHASE)
    assert res.exact


def test_a_second_round_within_half_the_radius_misses_answers(skq, monkeypatch):
    real = rounds.second_round_events

    def halved(events, followups):
        ev = real(events, followups)
        ev.cols["win"] = ev.win / 4.0
        return ev

    monkeypatch.setattr(rounds, "second_round_events", halved)
    res = simulate(skq.events, skq.warmup, "quadtree", 8, epoch_events=len(skq.events) // 4, index_params=TWO_PHASE)
    assert not res.exact


def test_the_protocol_is_checked():
    with pytest.raises(ValueError, match=r"index.knn.skq_protocol='both' is invalid; allowed: fanout, two_phase"):
        families.get("knn").check_params(families.get("knn").make_params({"skq_protocol": "both"}))
    assert families.get("knn").snapshot_rounds({"skq_protocol": "two_phase"}) == 2
    assert families.get("knn").snapshot_rounds({}) == 1 and families.get("range").snapshot_rounds({}) == 1


def test_a_second_rounds_copy_waits_for_its_first_round():
    """Event 0's first round at worker 0 (1 s), its second at worker 1 (1 s): done at 2 s, not 1 s
    as two copies in parallel; event 1, at worker 1 before that second round arrives, does not
    wait for it (a worker takes copies as they arrive), and a later one there waits behind it."""
    seqs, sizes = np.arange(2), np.zeros(2, np.int64)
    first = {0: (np.array([0]), np.array([1.0])), 1: (np.array([1]), np.array([0.5]))}
    second = {1: (np.array([0]), np.array([1.0]))}
    parallel = event_latencies(Copies.of(seqs, sizes, {0: first[0], 1: (np.array([0, 1]), np.array([1.0, 0.5]))}, 1),
                               2, 0.0, 1, 1e9)
    chained = event_latencies(Copies.of(seqs, sizes, first, 1, second=second), 2, 0.0, 1, 1e9)
    assert np.allclose(parallel, [1.0, 1.5])
    assert np.allclose(chained, [2.0, 0.5])
    # event 1 arriving at 1.2 s, while event 0's second round holds worker 1 (1 s to 2 s)
    later = event_latencies(Copies.of(seqs, sizes, first, 1, second=second), 2, 0.0, 1, 1 / 1.2)
    assert np.allclose(later, [2.0, 2.5 - 1.2])
