"""Strategy fits in a pool of processes (harness/run/fits.py): the same router as a fit in the
driver, a fit that cannot travel done in the driver, the fit's own error kept, the setting read,
and the slowest fit started first (a bad setting: tests/run/test_config.py). The pool is real
(spawned processes)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.engine.simulate import default_context
from harness.run import fits, processes
from strategies import registry
from tests.streams import random_stream


@pytest.fixture(scope="module")
def sample():
    return random_stream(3, n_objects=300, n_queries=120)


def routes(router, ev):
    rows, workers = router.route(ev)
    keys = rows.astype(np.int64) * 1000 + workers
    return np.sort(keys)


@pytest.mark.parametrize("name", ["kdt", "hash", "text_hypergraph", "rtree"])
def test_a_fit_in_the_pool_routes_as_the_driver_s_fit(sample, name):
    cls = registry.get(name)
    params, ctx = cls.make_params({}), default_context(sample, seed=4)
    here, here_s = fits.fit(cls, sample, 4, params, ctx, processes=0)
    there, there_s = fits.fit(cls, sample, 4, params, ctx, processes=2)
    assert np.array_equal(routes(here, sample), routes(there, sample))
    assert there_s >= 0.0 and here_s >= 0.0
    assert processes.started() is not None  # the pool is kept for the next fits


def test_a_fit_that_cannot_travel_is_done_here(sample):
    base = registry.get("hash")

    class Unpicklable(base):  # defined in a function: pickle cannot name it
        pass

    ctx = default_context(sample)
    router, seconds = fits.fit(Unpicklable, sample, 3, base.make_params({}), ctx, processes=2)
    assert router.n_workers == 3 and seconds >= 0.0


def test_the_fit_s_own_error_is_the_one_raised(sample):
    cls = registry.get("kdt")
    with pytest.raises(Exception) as here:
        fits.fit(cls, sample, 0, cls.make_params({}), default_context(sample), processes=0)
    with pytest.raises(type(here.value)):
        fits.fit(cls, sample, 0, cls.make_params({}), default_context(sample), processes=2)


def test_the_setting_decides_the_processes():
    assert fits.fit_processes(0, 20) == 0 and fits.fit_processes(3, 1) == 3
    assert fits.fit_processes(None, 1) == 0  # one run: nothing to fit beside it
    assert fits.fit_processes(None, 2) == fits.fit_processes(None, 20) == processes.driver_cores() >= 1


def test_the_slowest_fit_last_time_starts_first():
    fits.remember("slow", 5.0)
    fits.remember("fast", 0.1)
    assert fits.longest_first(["fast", "new", "slow"]) == [1, 2, 0]  # unseen first, then slowest
