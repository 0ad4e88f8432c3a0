"""A kNN subscription's ball over O_init (DkM-SKS Sec. 3.2, Eq. 7's R_n) against a brute force:
OR keywords (the nearest k of the union of channels), AND (all keywords), fewer than k objects."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.events import AND, INSERT, KNN, OR, Events
from strategies.dkmsks.balls import with_balls
from strategies.dkmsks.counts import ObjectStats
from tests.streams import random_knn_stream


def brute_kth(ev, i, objs):
    qt = set(ev.values[ev.offsets[i]:ev.offsets[i + 1]].tolist())
    d2 = []
    for o in objs:
        ot = set(ev.values[ev.offsets[o]:ev.offsets[o + 1]].tolist())
        if (qt <= ot) if ev.op[i] == AND else bool(qt & ot):
            d2.append((ev.x[o] - ev.x[i]) ** 2 + (ev.y[o] - ev.y[i]) ** 2)
    k = int(ev.k[i])
    return sorted(d2)[k - 1] if len(d2) >= k else np.inf


@pytest.mark.parametrize("seed,n_objects", [(s, 150) for s in range(6)] + [(s, 4000) for s in range(3)])
def test_balls_enclose_the_kth_nearest_qualifying_object(seed, n_objects):
    """150 objects on a lattice (ties): 3 strips, all searched; 4,000 off the lattice: 15 strips,
    the ring search stopping early."""
    ev = random_knn_stream(seed, n_objects=n_objects, n_queries=25, k_max=4)
    if n_objects > 150:
        rng = np.random.default_rng(seed)
        ev = Events({**ev.cols, "x": ev.x + rng.random(len(ev)), "y": ev.y + rng.random(len(ev))},
                    ev.offsets, ev.values)
    objs = np.flatnonzero(ev.family < 0)
    stats = ObjectStats.from_events(ev, objs)
    assert stats.ny == int(np.clip(np.sqrt(len(objs)) / 4, 1, 1024))
    qs = np.flatnonzero((ev.kind == INSERT) & (ev.family == KNN))
    assert set(ev.op[qs].tolist()) == {AND, OR}
    out = with_balls(ev, qs, stats)
    for i in qs.tolist():
        d2 = brute_kth(ev, i, objs)
        if np.isinf(d2):
            assert (out.xmin[i], out.xmax[i]) == (ev.xmin[i], ev.xmax[i])  # unbounded: the rectangle given
        else:
            r = np.sqrt(d2)
            assert out.xmin[i] == pytest.approx(max(ev.xmin[i], ev.x[i] - r))
            assert out.ymax[i] == pytest.approx(min(ev.ymax[i], ev.y[i] + r))
    others = np.setdiff1d(np.arange(len(ev)), qs)
    np.testing.assert_array_equal(out.xmin[others], ev.xmin[others], strict=False)
