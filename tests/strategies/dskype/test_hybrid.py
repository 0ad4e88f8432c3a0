"""DSkype's hybrids (Sec. 8.2, Figs. 25-26): each end of the l1 x l2 range is one of the two methods
it composes (spatial-first 1 x N routes subscriptions as prefix-based, N x 1 as location-based;
keyword-first 1 x N as location-based), under thresholds fed back as the loop feeds them, and the
settings that cannot split the workers are refused. Exactness against the oracle at every worker
count is tests/contract/test_topk_matrix.py's (the registry drives it)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from harness.core.events import INSERT, OBJECT
from harness.engine.setup import family_setup
from harness.families import registry as families
from harness.families.base import IndexContext
from harness.families.workload import WorkloadConfig
from strategies import registry
from strategies.base import FitContext
from strategies.dskype.hybrid import default_l1
from tests.helpers import random_objects

N = 8


@pytest.fixture(scope="module")
def stream():
    objects, df, extent = random_objects(1500, seed=4)
    cfg = WorkloadConfig(name="tiny", family="topk", queries=150, window=250, measured_messages=300, k_min=3,
                         k_max=8)
    wl = families.get("topk").build_workload(objects, df, extent, cfg, 11)
    setup = family_setup(["topk"], frozenset({"topk"}), IndexContext(tuple(extent), len(df)), {}, events=wl.events)
    context = FitContext(tuple(extent), df.astype(np.float64), 0, setup.contexts)
    return wl, context


def fitted(name, wl, context, n=N, **params):
    cls = registry.get(name)
    router = cls().fit(wl.events.take(np.arange(wl.warmup)), n, cls.make_params(params), context)
    ins = np.flatnonzero(wl.events.kind == INSERT)
    rng = np.random.default_rng(3)  # thresholds as the workers would report them
    router.observe_feedback("topk", pa.table({"qid": wl.events.id[ins], "value": rng.uniform(0.0, 0.9, len(ins))}))
    return router


def routes(router, ev, rows):
    r, w = router.route_topk(ev, rows) if len(rows) else (rows, rows)
    return sorted(zip(r.tolist(), w.tolist()))


def test_the_ends_of_the_range_are_the_methods_they_compose(stream):
    wl, context = stream
    ev = wl.events
    subs = np.flatnonzero(ev.kind == INSERT)
    prefix = routes(fitted("dskype_prefix", wl, context), ev, subs)
    location = routes(fitted("dskype_location", wl, context), ev, subs)
    assert prefix != location
    assert routes(fitted("dskype_spatial_first", wl, context, l1=1), ev, subs) == prefix
    assert routes(fitted("dskype_spatial_first", wl, context, l1=N), ev, subs) == location
    assert routes(fitted("dskype_keyword_first", wl, context, l1=1), ev, subs) == location


def test_a_message_reaches_every_part_at_level_one(stream):
    wl, context = stream
    ev = wl.events
    objs = np.flatnonzero(ev.kind == OBJECT)[:200]
    router = fitted("dskype_spatial_first", wl, context, l1=4)
    r, w = router.route_objects(ev, objs)
    parts = {(int(a), int(b) // 2) for a, b in zip(r, w)}
    assert parts == {(int(a), p) for a in objs for p in range(4) if ev.offsets[a + 1] > ev.offsets[a]}
    keyword = fitted("dskype_keyword_first", wl, context, l1=4)
    r, w = keyword.route_objects(ev, objs)
    groups = {}
    for a, b in zip(r.tolist(), w.tolist()):
        groups.setdefault((a, b // 2), set()).add(b % 2)
    assert groups and all(members == {0, 1} for members in groups.values())  # the whole group


@pytest.mark.parametrize("name", ["dskype_spatial_first", "dskype_keyword_first"])
def test_l1_must_divide_the_workers(stream, name):
    wl, context = stream
    with pytest.raises(ValueError, match=r"strategy.params.l1=3 is invalid for 8 workers; allowed: a divisor of the "
                                         r"worker count \(1, 2, 4, 8\)"):
        fitted(name, wl, context, l1=3)


def test_default_l1_is_the_largest_divisor_up_to_the_square_root():
    assert [default_l1(n) for n in (1, 2, 3, 8, 16, 32, 12)] == [1, 1, 1, 2, 4, 4, 3]
