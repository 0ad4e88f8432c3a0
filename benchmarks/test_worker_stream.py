"""Figure 3: one worker's whole sub-stream at 1M live subscriptions, per core.

GI2 restores L live STS-Q1 queries (1M at full scale), then processes a PS2Stream mix in seq
order: insertions of new queries and deletions of live ones alternate, with 5 objects per update
interleaved at random. Baseline (the headline ratio), paired in the same rounds: a shapely STRtree
over every query live at some point of the stream, bulk-queried with all the stream's objects and
filtered by each query's lifetime (baselines.py; its tree untimed, as GI2's restore is; it knows the
whole stream ahead, which favours it); the pairs must be equal in every round. Second reference:
the naive pure-Python GI2 (benchmarks/naive_gi2.py) over the same restored queries (its build
untimed), on a prefix of the stream; the two must return the same pairs on that prefix.
"""

from __future__ import annotations

import numpy as np
import pytest

from bench_data import object_events
from baselines import query_tree, strtree_stream
from conftest import cpu_timer, paired_rounds, timed
from harness.core.events import DELETE, INSERT, OBJECT, RANGE, Events, sorted_unique, unpack_keys
from harness.families.base import IndexContext, StateBundle
from harness.families.range.gi2 import GI2Index
from naive_gi2 import NaiveGI2

OBJECTS_PER_UPDATE = 5
ROUNDS = 2  # paired rounds (each restores GI2 untimed first)


def make_stream(query_pool: Events, table, live: int, updates: int, seed: int = 4) -> Events:
    rng = np.random.default_rng(seed)
    n_ins = updates // 2
    n_del = updates - n_ins
    ins = query_pool.take(np.arange(live, live + n_ins))
    dele = query_pool.take(rng.choice(live, size=n_del, replace=False))
    dele.cols["kind"] = np.full(n_del, DELETE, np.int8)
    upd = np.empty(updates, np.int64)  # alternate insert / delete
    upd[0::2] = np.arange(len(upd[0::2]))
    upd[1::2] = n_ins + np.arange(len(upd[1::2]))
    updates_ev = Events.concat([ins, dele]).take(upd)
    n_obj = updates * OBJECTS_PER_UPDATE
    objs = object_events(table, rows=np.sort(rng.choice(table.num_rows, size=n_obj, replace=False)))
    is_upd = np.zeros(updates + n_obj, bool)
    is_upd[rng.choice(len(is_upd), size=updates, replace=False)] = True
    order = np.empty(len(is_upd), np.int64)  # position -> row of concat([updates, objects])
    order[is_upd] = np.arange(updates)
    order[~is_upd] = updates + np.arange(n_obj)
    stream = Events.concat([updates_ev, objs]).take(order)
    stream.cols["seq"] = live + np.arange(len(stream), dtype=np.int64)
    assert (stream.family[stream.kind != 0] == RANGE).all()
    return stream


@pytest.mark.gate
def test_worker_stream(benchmark, dataset, query_pool, scale, record):
    table, df, extent = dataset
    live, updates = scale["stream_live"], scale["stream_updates"]
    state = query_pool.take(np.arange(live))  # seqs 0..live-1
    stream = make_stream(query_pool, table, live, updates)
    ctx = IndexContext(tuple(extent), len(df))

    index = GI2Index(ctx)
    warm = GI2Index(ctx)
    warm.restore(StateBundle(queries=state.take(np.arange(1000))))
    warm.process(stream.take(np.arange(200)))  # numba warm-up
    restores = []

    # the fair baseline: one STRtree over every query live at some point of the stream (the restored
    # ones and the stream's inserts; built untimed, as GI2's restore is), bulk-queried with all the
    # stream's objects, pairs kept when the object falls in the query's lifetime
    ins = np.flatnonzero(stream.kind == INSERT)
    dels = np.flatnonzero(stream.kind == DELETE)
    everyone = Events.concat([state, stream.take(ins)])
    born = np.r_[state.seq, stream.seq[ins]]
    dies = np.full(len(everyone), np.iinfo(np.int64).max)
    at = np.searchsorted(everyone.id[:len(state)], stream.id[dels])  # deletions name restored queries
    assert (np.diff(state.id) > 0).all() and np.array_equal(everyone.id[at], stream.id[dels])
    dies[at] = stream.seq[dels]
    tree = query_tree(everyone)
    objs = stream.take(np.flatnonzero(stream.kind == OBJECT))
    vocab = len(df)

    def gi2_side():
        restores.append(index.restore(StateBundle(queries=state)))  # untimed: busy_s is process's
        out = index.process(stream)
        assert len(out.results) == len(sorted_unique(out.results)), "GI2 reported a pair twice"
        assert out.counters["orphan_deletes"] == 0
        gi2_side.out = out
        return out.busy_s, sorted_unique(out.results)

    def same(a, b):
        assert len(a) > 0 and np.array_equal(a, b), "GI2 and the STRtree baseline disagree on the stream"

    fs, bs, ratio, gi2_keys, _ = paired_rounds(
        gi2_side, timed(lambda: strtree_stream(tree, everyone, born, dies, objs, vocab)), ROUNDS, same)
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)  # the figures are the paired rounds'
    busy = fs.min()
    out = gi2_side.out

    # second reference: the naive pure-Python GI2 on a prefix, against the same restored queries
    naive = NaiveGI2(extent)
    naive.restore(state)
    prefix = stream.take(np.arange(min(scale["naive_prefix"], len(stream))))
    naive_s, naive_keys = cpu_timer(lambda: naive.run(prefix), rounds=1)
    prefix_oids = prefix.id[prefix.kind == 0]
    _, oids = unpack_keys(gi2_keys)
    assert np.array_equal(gi2_keys[np.isin(oids, prefix_oids)], sorted_unique(naive_keys)), \
        "GI2 and the naive index disagree"

    c = out.counters
    tag = f"{live // 1_000_000}M" if live % 1_000_000 == 0 else f"{live // 1000}k"
    base = f"stream@{tag}/strtree_numpy"
    loop = f"stream@{tag}/naive_python"
    record(base, len(stream) / bs.min(), "events/s/core",
           note=f"every object of the stream in one bulk query, {len(everyone)} query rectangles (tree untimed)")
    record(loop, len(prefix) / naive_s, "events/s/core", note=f"first {len(prefix)} events (second reference)")
    record(f"stream@{tag}/gi2", len(stream) / busy, "events/s/core", baseline=(base, loop), target=25_000,
           paired={base: ratio},
           note=f"{len(stream)} events ({c['objects']} obj, {c['inserts']} ins, {c['deletes']} del), "
                f"{c['candidates'] / max(c['objects'], 1):.0f} cand/obj, {c['results'] / max(c['objects'], 1):.1f} "
                f"res/obj; pairs equal to the STRtree's in each of {ROUNDS} paired rounds")
    record(f"stream@{tag}/gi2_restore", live / min(restores), "queries/s/core",
           note=f"{min(restores):.2f}s, untimed set-up")
