"""Pairs of sole object copies counted on the workers: exact for every strategy, everything for a
space partitioner, nothing when object ids repeat."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.events import OBJECT, Events
from harness.engine.local_pairs import sole_copies, split_pairs
from harness.engine.simulate import simulate
from strategies import registry
from tests.streams import random_stream


def test_a_copy_is_sole_when_its_event_was_routed_once():
    rows = np.array([0, 1, 1, 2, 3, 3, 3])
    assert sole_copies(rows, 5).tolist() == [True, False, False, True, False, False, False]


def test_split_keeps_the_pairs_of_sole_objects_distinct_and_passes_the_rest():
    keys = (np.array([1, 2, 1, 3, 2]) << 32) | np.array([7, 7, 7, 8, 9])
    here, rest = split_pairs(keys, np.array([7, 9]))
    assert sorted(here.tolist()) == sorted({(1 << 32) | 7, (2 << 32) | 7, (2 << 32) | 9})
    assert rest.tolist() == [(3 << 32) | 8]
    here, rest = split_pairs(keys, None)
    assert len(here) == 0 and rest.tolist() == keys.tolist()


@pytest.mark.parametrize("strategy", registry.supporting("range"))
def test_counting_on_workers_changes_no_result(strategy):
    ev = random_stream(11, n_objects=160, n_queries=40)
    on = simulate(ev, 40, strategy, 4, epoch_events=60)
    off = simulate(ev, 40, strategy, 4, epoch_events=60, local_pairs=False)
    assert on.exact and off.exact, (on.digest, off.digest, on.oracle_digest)
    assert off.local_pairs == 0
    result_count = int(on.digest.split(":")[0])
    assert 0 <= on.local_pairs <= result_count


def test_a_space_partitioner_counts_every_pair_where_it_is_found_and_text_routing_shuffles_some():
    ev = random_stream(12, n_objects=200, n_queries=50)
    grid = simulate(ev, 50, "grid", 4)
    assert grid.exact and grid.local_pairs == int(grid.digest.split(":")[0]) > 0
    text = simulate(ev, 50, "text_hash", 4)
    assert text.exact and text.local_pairs < int(text.digest.split(":")[0])


def test_repeated_object_ids_turn_it_off_and_stay_exact():
    ev = random_stream(13, n_objects=120, n_queries=30)
    objs = np.flatnonzero(ev.kind == OBJECT)
    ev.cols["id"][objs[1::2]] = ev.id[objs[0::2]][:len(objs[1::2])]  # every id twice
    res = simulate(Events(ev.cols, ev.offsets, ev.values), 30, "grid", 4)
    assert res.anomalies["duplicate_object_ids"] > 0
    assert res.exact and res.local_pairs == 0


@pytest.mark.parametrize("strategy", ["grid", "kdt", "text_hash", "qttree"])
@pytest.mark.parametrize("chunk", [1, 7, 50])
def test_an_epoch_in_slices_gives_the_same_results(strategy, chunk):
    """Workers process a large epoch in slices (bounded memory at scale); any slice size is exact,
    down to one event at a time."""
    from harness.engine.setup import family_setup
    from harness.engine.simulate import default_context
    from harness.families.base import IndexContext

    ev = random_stream(14, n_objects=150, n_queries=40)
    ctx = default_context(ev)
    cls = registry.get(strategy)
    setup = family_setup(["range"], cls.families, IndexContext(ctx.extent, ctx.vocab_size),
                         {"range": {"cells_per_side": 16}})
    setup.chunk_events = chunk
    res = simulate(ev, 40, strategy, 4, epoch_events=60, setup=setup)
    assert res.exact, (strategy, chunk, res.digest, res.oracle_digest)


def test_slices_are_only_taken_when_every_index_allows_them():
    from harness.engine.worker import WorkerSet
    from harness.families.knn.index import KnnIndex
    from harness.families.range.gi2 import GI2Index

    assert GI2Index.chunkable and not KnnIndex.chunkable
    ev = random_stream(15, n_objects=30, n_queries=10)

    class Whole:  # an index that has not said slices are safe
        chunkable = False

        def stored_bytes(self):  # it keeps no objects (WorkerIndex.stored_bytes)
            return None

        def process(self, e):
            from harness.families.base import WorkerOutput
            return WorkerOutput(results=np.zeros(0, np.int64), work=np.ones(len(e), np.int64), counters={"n": len(e)},
                                busy_s=0.0)

    ws = WorkerSet({1: Whole()})
    parts = [rows for rows, _ in ws.process_chunks(ev, 4)]
    assert len(parts) == 1 and len(parts[0]) == len(ev)
    work, counters, _ = ws.totals()
    assert counters == {"n": len(ev)} and len(work) == len(ev)
