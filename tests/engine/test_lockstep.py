"""Runs in lockstep (harness/engine/lockstep.py): one job per epoch for every live run, one run
doing driver work at a time, a failing shared job retried run by run, a run that ends early not
holding the others. The job itself is replaced by a recorder here (the real pipeline with lanes
runs in tests/run/test_pipeline.py and every Spark test); the Spark session is real."""

from __future__ import annotations

import threading
import time

import pytest

from harness.engine import lockstep as lockstep_mod
from harness.engine.lockstep import Lockstep
from harness.engine.pipeline import EpochResult, LaneEpoch


class JobFailed(RuntimeError):
    pass


class ClusterGone(RuntimeError):
    pass


@pytest.fixture
def jobs(monkeypatch):
    """Every job as (epoch, routers of its lanes); a lane whose router is "bad" fails its job, a
    "gone" one fails it with a fatal error."""
    calls = []

    def run_epoch(spark, events_df, events_uri, epoch, lo, hi, requests, n_workers):
        routers = [r.router for r in requests]
        calls.append((epoch, routers))
        if "gone" in routers:
            raise ClusterGone("no executor")
        if "bad" in routers:
            raise JobFailed("a router raised")
        return [[EpochResult(epoch, hi - lo, 0, 0, 0, 0, result_count=len(str(r.router)),
                             timings={"job_s": 0.0, "job_share": 0.0})] for r in requests]

    monkeypatch.setattr(lockstep_mod, "run_epoch", run_epoch)
    return calls


def run_lanes(spark, routers: list[str], epochs: int, stop_after: dict | None = None):
    """A thread per router asking `epochs` epochs (a lane in `stop_after` ends after that many);
    each lane's answers or error, and the most threads seen doing driver work at once."""
    ls = Lockstep(spark, None, 2, "test-lockstep", fatal=(ClusterGone,))
    out: dict[int, list] = {i: [] for i in range(len(routers))}
    inside, most = [0], [0]

    def lane_main(i: int) -> None:
        with ls.cond:
            try:
                for e in range(epochs):
                    if stop_after and stop_after.get(i) == e:
                        return
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                    time.sleep(0.002)  # driver work: another thread would get in here if it could
                    inside[0] -= 1
                    out[i].append(ls.epoch(i, e, 10 * e, 10 * e + 10, LaneEpoch(routers[i], None))[0].result_count)
            except Exception as exc:  # noqa: BLE001
                out[i].append(exc)
            finally:
                ls.leave(i)

    for i in range(len(routers)):
        ls.enter(i)
    threads = [threading.Thread(target=lane_main, args=(i,)) for i in range(len(routers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a lane never got its epoch"
    return out, most[0], ls


def test_one_job_per_epoch_for_every_run_and_one_run_at_a_time(spark, jobs):
    out, most, ls = run_lanes(spark, ["a", "bb", "ccc"], epochs=3)
    assert [e for e, _ in jobs] == [0, 1, 2] and all(sorted(r) == ["a", "bb", "ccc"] for _, r in jobs)
    assert out == {0: [1, 1, 1], 1: [2, 2, 2], 2: [3, 3, 3]}  # each its own result
    assert most == 1 and ls.jobs == 3


def test_a_run_that_ends_early_does_not_hold_the_others(spark, jobs):
    out, _, _ = run_lanes(spark, ["a", "bb"], epochs=3, stop_after={0: 1})
    assert [(e, sorted(r)) for e, r in jobs] == [(0, ["a", "bb"]), (1, ["bb"]), (2, ["bb"])]
    assert out == {0: [1], 1: [2, 2, 2]}


def test_a_failing_shared_job_is_retried_run_by_run(spark, jobs):
    out, _, _ = run_lanes(spark, ["a", "bad", "ccc"], epochs=2)
    assert jobs[0] == (0, ["a", "bad", "ccc"]) and sorted(r[0] for _, r in jobs[1:4]) == ["a", "bad", "ccc"]
    assert out[0] == [1, 1] and out[2] == [3, 3]  # the others go on, alone after the failure too
    assert len(out[1]) == 1 and isinstance(out[1][0], JobFailed)
    assert jobs[4] == (1, ["a", "ccc"])  # the failed run has left; the next epoch is shared again


def test_a_fatal_failure_reaches_every_run_without_retries(spark, jobs):
    out, _, _ = run_lanes(spark, ["a", "gone"], epochs=2)
    assert jobs == [(0, ["a", "gone"])]
    assert all(len(v) == 1 and isinstance(v[0], ClusterGone) for v in out.values())


def test_a_run_waiting_for_its_fit_lets_the_others_work(spark, jobs):
    """Lane 0's fit (a future finished by another thread) is awaited with the baton released:
    lane 1 does its driver work and asks for its epoch meanwhile, and still only one lane at a time
    does driver work."""
    from concurrent.futures import Future

    ls = Lockstep(spark, None, 2, "test-lockstep-fit")
    fit, order, inside, most = Future(), [], [0], [0]

    def work(name):
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        order.append(name)
        time.sleep(0.002)
        inside[0] -= 1

    def lane_main(i: int) -> None:
        with ls.cond:
            try:
                if i == 0:
                    ls.wait_released(fit)
                    work("fitted")
                else:
                    work("other")
                    fit.set_result("router")  # the pool finishes lane 0's fit while lane 1 holds the baton
                ls.epoch(i, 0, 0, 10, LaneEpoch(f"r{i}", None))
            finally:
                ls.leave(i)

    for i in range(2):
        ls.enter(i)
    threads = [threading.Thread(target=lane_main, args=(i,), daemon=True) for i in range(2)]
    threads[0].start()
    time.sleep(0.05)  # lane 0 is waiting for its fit
    threads[1].start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "a lane never got its epoch"
    assert order == ["other", "fitted"] and most[0] == 1
    assert [(e, sorted(r)) for e, r in jobs] == [(0, ["r0", "r1"])]
