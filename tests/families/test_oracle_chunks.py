"""The brute-force oracles answer in one chunk per core and bound each snapshot query's scan: the
answer is the same however the queries are split, and a stream whose timestamps are out of seq
order loses no visible object to the bound."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.events import AND, KNN, OBJECT, RANGE, SNAPSHOT, Events
from harness.families import chunks
from harness.families.knn.oracle import knn_oracle, snapshot_knn_keys
from harness.families.range.oracle import oracle_keys, snapshot_range_keys
from tests.streams import random_knn_stream, random_snapshot_stream, random_stream


@pytest.mark.parametrize("seed", range(4))
def test_an_oracle_split_in_chunks_gives_the_whole_answer(seed, monkeypatch):
    streams = {"knn": random_knn_stream(seed, n_objects=150, n_queries=40),
               "range": random_stream(seed, 150, 40, 8, 20.0),
               "snapshot range": random_snapshot_stream(seed, RANGE, n_objects=200, n_queries=60, with_subscriptions=True),
               "snapshot knn": random_snapshot_stream(seed, KNN, n_objects=200, n_queries=60, with_subscriptions=True)}
    oracles = {"knn": knn_oracle, "range": oracle_keys, "snapshot range": lambda s: snapshot_range_keys(s, RANGE),
               "snapshot knn": lambda s: snapshot_knn_keys(s, KNN)}
    whole = {name: oracles[name](s) for name, s in streams.items()}
    calls = []
    real = chunks.in_chunks

    def counted(call, n_items, work=None):
        out = real(call, n_items, work)
        calls.append(len(out))
        return out

    # chunks for any work, on an assumed four cores: every oracle takes its threaded path
    monkeypatch.setattr(chunks, "MIN_WORK_PER_CHUNK", 1)
    monkeypatch.setattr(chunks.os, "cpu_count", lambda: 4)
    for module in ("harness.families.knn.oracle", "harness.families.range.oracle", "harness.families.snapshot_oracle"):
        monkeypatch.setattr(f"{module}.in_chunks", counted)
    for name, s in streams.items():
        assert len(whole[name]) > 0, name
        np.testing.assert_array_equal(oracles[name](s), whole[name], err_msg=name)
    assert max(calls) == 4  # the split really happened


def _visible_by_definition(ev: Events, family: int) -> set[int]:
    """Snapshot range answers straight from the definition: every object before q, within its
    look-back, in its rectangle, passing its keywords."""
    out = set()
    terms = [set(ev.values[ev.offsets[i]:ev.offsets[i + 1]].tolist()) for i in range(len(ev))]
    for q in np.flatnonzero((ev.kind == SNAPSHOT) & (ev.family == family)):
        for o in np.flatnonzero(ev.kind == OBJECT):
            if not (ev.seq[o] < ev.seq[q] and ev.ts[o] > ev.ts[q] - ev.tau[q]):
                continue
            if not (ev.xmin[q] <= ev.x[o] <= ev.xmax[q] and ev.ymin[q] <= ev.y[o] <= ev.ymax[q]):
                continue
            common = terms[q] & terms[o]
            if terms[q] and not (common == terms[q] if ev.op[q] == AND else common):
                continue
            out.add((int(ev.id[q]) << 32) | int(ev.id[o]))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_the_scan_bound_keeps_objects_whose_timestamps_run_backwards(seed):
    ev = random_snapshot_stream(seed, RANGE)
    cols = dict(ev.cols)
    rng = np.random.default_rng(seed)
    objects = np.flatnonzero(ev.kind == OBJECT)
    ts = cols["ts"].copy()
    ts[objects] = rng.permutation(ts[objects])  # arrival order no longer follows time
    cols["ts"] = ts
    shuffled = Events(cols, ev.offsets, ev.values)
    expected = _visible_by_definition(shuffled, RANGE)
    assert expected
    assert set(snapshot_range_keys(shuffled, RANGE).tolist()) == expected
