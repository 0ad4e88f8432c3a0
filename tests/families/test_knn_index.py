"""The kNN worker index and the replay merge, against the brute-force oracle: a subscription
replicated on every worker while each object reaches a random non-empty subset of them (the
routing contract at its loosest), over epochs with state, feedback and restores in between."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.events import OBJECT, Events
from harness.families.base import IndexContext, StateBundle
from harness.families.knn.index import Candidates, KnnIndex
from harness.families.knn.merge import KnnMerger
from harness.families.knn.oracle import knn_oracle
from tests.streams import random_knn_stream

CONTEXT = IndexContext((0.0, 0.0, 20.0, 20.0), 8)


def run_replicated(ev: Events, n_workers: int, n_epochs: int, seed: int, feedback: bool = True,
                   cells: int = 4, index_params: dict | None = None) -> tuple[np.ndarray, dict]:
    """Every query on every worker, each object on a random non-empty subset; epochs through
    export/restore; returns the merged keys and the workers' summed counters."""
    rng = np.random.default_rng(seed)
    dest = rng.random((len(ev), n_workers)) < 0.5
    dest[np.arange(len(ev)), rng.integers(0, n_workers, len(ev))] = True
    dest[ev.kind != OBJECT] = True
    states = [StateBundle() for _ in range(n_workers)]
    merge_state, fb, keys, counters = None, None, [], {}
    bounds = np.linspace(0, len(ev), n_epochs + 1).astype(int)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        blobs = []
        for w in range(n_workers):
            index = KnnIndex(CONTEXT, cells_per_side=cells, **(index_params or {}))
            if feedback and fb is not None:
                index.observe_feedback(fb)
            index.restore(states[w])
            out = index.process(ev.take(np.arange(lo, hi)[dest[lo:hi, w]]))
            for c, v in out.counters.items():
                counters[c] = counters.get(c, 0) + v
            blobs += [b for _, b in KnnMerger.blocks(out.results, 1)]
            states[w] = index.export_state()
        merger = KnnMerger()
        merger.restore(merge_state)
        res = merger.merge(blobs, ev.take(np.arange(lo, hi)[ev.kind[lo:hi] != OBJECT]))
        merge_state, fb = merger.export_state(), res.feedback
        keys.append(res.keys)
    return np.unique(np.concatenate(keys)), counters


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n_workers=st.integers(1, 5), n_epochs=st.integers(1, 5))
def test_replay_merge_of_any_partition_equals_the_oracle(seed, n_workers, n_epochs):
    ev = random_knn_stream(seed)
    keys, _ = run_replicated(ev, n_workers, n_epochs, seed)
    np.testing.assert_array_equal(keys, knn_oracle(ev))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n_workers=st.integers(1, 4), chunk=st.integers(1, 40))
def test_reposting_filled_balls_mid_epoch_changes_nothing(seed, n_workers, chunk):
    """The index rebuilds its postings between chunks of an epoch once enough balls filled; with
    tiny chunks and no minimum it does so all the time, and results stay the oracle's."""
    from harness.families.knn import index as knn_index

    saved = knn_index.CHUNK, knn_index.FIRST_CHUNK, knn_index.REPOST_MIN, knn_index.REPOST_FACTOR
    knn_index.CHUNK, knn_index.FIRST_CHUNK, knn_index.REPOST_MIN, knn_index.REPOST_FACTOR = chunk, 1, 0, 0.0
    try:
        ev = random_knn_stream(seed, n_objects=150)
        keys, counters = run_replicated(ev, n_workers, 2, seed)
    finally:
        knn_index.CHUNK, knn_index.FIRST_CHUNK, knn_index.REPOST_MIN, knn_index.REPOST_FACTOR = saved
    assert counters["reposts"] > 0
    np.testing.assert_array_equal(keys, knn_oracle(ev))


@pytest.mark.parametrize("cells", [1, 3, 16, "auto"])
def test_grid_resolution_changes_work_not_results(cells):
    ev = random_knn_stream(11, n_objects=300, n_queries=40)
    keys, _ = run_replicated(ev, 3, 4, 1, cells=cells)
    np.testing.assert_array_equal(keys, knn_oracle(ev))


def test_auto_resolution_follows_the_live_subscriptions(monkeypatch):
    """auto: a finer grid as subscriptions accumulate, rebuilt at a repost; results unchanged."""
    import harness.families.knn.index as knn_index

    monkeypatch.setattr(knn_index, "AUTO_BALLS_PER_CELL", 1)
    monkeypatch.setattr(knn_index, "AUTO_CELLS", (2, 8))
    index = KnnIndex(CONTEXT)
    assert [index.auto_cells(n) for n in (0, 9, 30, 10_000)] == [2, 3, 5, 8]
    assert KnnIndex(CONTEXT, cells_per_side=5).auto_cells(10_000) == 5
    ev = random_knn_stream(3, n_objects=400, n_queries=40)
    out = index.process(ev)
    assert index.grid.nx > 2 and out.counters["reposts"] >= 1
    single = np.unique(out.results.ids[:, 0] << 32 | out.results.ids[:, 1])
    np.testing.assert_array_equal(single, knn_oracle(ev))


def test_feedback_prunes_candidates_and_keeps_results():
    ev = random_knn_stream(5, n_objects=600, n_queries=30)
    with_fb, c_fb = run_replicated(ev, 4, 6, 2, feedback=True)
    without, c_no = run_replicated(ev, 4, 6, 2, feedback=False)
    np.testing.assert_array_equal(with_fb, without)
    assert c_fb["results"] < c_no["results"]  # fewer local entries survive the global bound


def test_a_single_worker_emits_exactly_the_global_entries():
    ev = random_knn_stream(3, n_objects=200)
    index = KnnIndex(CONTEXT)
    out = index.process(ev)
    ids = out.results.ids
    np.testing.assert_array_equal(np.unique((ids[:, 0] << 32) | ids[:, 1]), knn_oracle(ev))
    assert (ids[:, 2] == np.sort(ids[:, 2])).all()  # emitted in stream order


def test_state_holds_at_most_k_results_and_only_live_subscriptions():
    from harness.core.events import DELETE

    ev = random_knn_stream(4, n_objects=200)
    deletes = np.flatnonzero(ev.kind == DELETE)
    ev = ev.take(np.setdiff1d(np.arange(len(ev)), deletes[::2]))  # half the subscriptions stay live
    index = KnnIndex(CONTEXT)
    index.process(ev)
    state = index.export_state()
    res = state.results.to_pandas()
    k = dict(zip(state.queries.id.tolist(), state.queries.k.tolist()))
    deleted = set(ev.id[ev.kind == DELETE].tolist())
    assert len(k) and not deleted & set(k)
    members = res[res.seq >= 0].groupby("qid").size()
    assert len(members) and all(n <= k[q] for q, n in members.items())
    assert set(res.qid) <= set(k)  # deleted subscriptions' results are not kept


def test_merger_ignores_candidates_after_the_deletion_and_rejects_unknown_queries():
    from harness.core.events import DELETE, INSERT

    ev = random_knn_stream(8, n_objects=150)
    index = KnnIndex(CONTEXT)
    out = index.process(ev.take(np.flatnonzero(ev.kind != DELETE)))  # a replica that missed every deletion
    blobs = [b for _, b in KnnMerger.blocks(out.results, 1)]
    merger = KnnMerger()
    merger.restore(None)
    keys = merger.merge(blobs, ev.take(np.flatnonzero(ev.kind != OBJECT))).keys
    np.testing.assert_array_equal(keys, knn_oracle(ev))
    merger = KnnMerger()
    merger.restore(None)
    with pytest.raises(RuntimeError, match="never inserted"):
        merger.merge(blobs, ev.take(np.flatnonzero(ev.kind == INSERT)[:1]))


def test_narrowing_keeps_the_global_ball_inside_the_rectangle():
    from harness.core.events import DELETE

    ev = random_knn_stream(9, n_objects=300)
    ev = ev.take(np.flatnonzero(ev.kind != DELETE))
    index = KnnIndex(CONTEXT)
    out = index.process(ev)
    blobs = [b for _, b in KnnMerger.blocks(out.results, 1)]
    merger = KnnMerger()
    merger.restore(None)
    fb = merger.merge(blobs, ev.take(np.flatnonzero(ev.kind != OBJECT))).feedback
    assert fb.num_rows
    nxt = KnnIndex(CONTEXT)
    nxt.observe_feedback(fb)
    nxt.restore(index.export_state())
    before, after = nxt.narrowed()
    d2 = dict(zip(fb.column("qid").to_pylist(), fb.column("value").to_pylist()))
    for i in range(len(after)):
        r = np.sqrt(d2[int(after.id[i])])
        assert after.xmin[i] >= before.xmin[i] and after.xmax[i] <= before.xmax[i]
        # the ball's square, within the old rectangle, is inside the new one
        assert after.xmin[i] <= max(after.x[i] - r, before.xmin[i]) and after.xmax[i] >= min(after.x[i] + r, before.xmax[i])
        assert after.ymin[i] <= max(after.y[i] - r, before.ymin[i]) and after.ymax[i] >= min(after.y[i] + r, before.ymax[i])
    drop, keep = after.id[::2], after.id[1::2]
    nxt.apply_narrowing(drop, keep)
    state = nxt.export_state()
    assert not set(drop.tolist()) & set(state.queries.id.tolist())
    kept = state.queries.take(np.flatnonzero(np.isin(state.queries.id, keep)))
    assert (kept.xmax - kept.xmin < 20.0).all()


@pytest.mark.parametrize("n_workers", [1, 2, 3])
def test_fast_naive_vector_through_index_and_merge(n_workers):
    """The FAST extension's hand-checked vector (see test_knn_oracle) through replicated workers."""
    from tests.families.test_knn_oracle import fast_naive_vector, keys as pair_keys

    ev, expected = fast_naive_vector()
    got, _ = run_replicated(ev, n_workers, 2, seed=n_workers)
    want = pair_keys([(q, oid) for oid, qs in enumerate(expected, start=1) for q in qs])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("bad", [0, -3, "fine", True, 2.5])
def test_grid_resolution_must_be_auto_or_a_positive_integer(bad):
    from harness.families.knn.family import KnnFamily

    KnnFamily.check_params(KnnFamily.Params(cells_per_side="auto"))
    KnnFamily.check_params(KnnFamily.Params(cells_per_side=7))
    with pytest.raises(ValueError, match=r"index.knn.cells_per_side=.*allowed: auto or an integer >= 1"):
        KnnFamily.check_params(KnnFamily.Params(cells_per_side=bad))


@settings(max_examples=30, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 30)), max_size=60),
       runs=st.integers(1, 5), seed=st.integers(0, 1000))
def test_blocks_merge_as_sorted_runs_into_one_row_per_query_and_object(rows, runs, seed):
    """Workers' blocks leave in (qid, seq) order and the merger merges them, dropping the copies
    of an object a query got from several replicas; a block out of order (a hand-built one) is
    sorted on arrival. Reference: a set of (qid, seq) sorted."""
    from harness.families.base import qid_buckets
    from harness.families.knn.merge import _sorted, merge_runs, packed_keys, unpack

    rng = np.random.default_rng(seed)
    parts = []
    for r in range(runs):
        mine = sorted({x for x in rows if rng.random() < 0.6}, key=lambda t: t[1])  # seq order, as emitted
        ids = np.array([[q, 1000 + s, s] for q, s in mine], np.int64).reshape(-1, 3)
        d2 = ids[:, 2].astype(np.float64)
        if r == 0:  # through blocks(), over 3 merge buckets: each block one bucket's, in (qid, seq) order
            out = list(KnnMerger.blocks(Candidates(ids, d2), 3))
            assert sorted(b for b, _ in out) == sorted({int(b) for b in qid_buckets(ids[:, 0], 3)})
            blocks = []
            for b, blob in out:
                got = unpack(blob)
                assert (qid_buckets(got[0][:, 0], 3) == b).all()
                assert np.array_equal(np.lexsort((got[0][:, 2], got[0][:, 0])), np.arange(len(got[1])))
                blocks.append(got)
            if blocks:
                ids, d2 = np.concatenate([g[0] for g in blocks]), np.concatenate([g[1] for g in blocks])
                ids, d2, _ = _sorted(ids, d2)
        else:
            ids, d2, _ = _sorted(ids[::-1].copy(), d2[::-1].copy())
        parts.append((ids, d2))
    ids = np.concatenate([p[0] for p in parts])
    off = np.r_[0, np.cumsum([len(p[1]) for p in parts])].astype(np.int64)
    order = merge_runs(packed_keys(ids[:, 0], ids[:, 2]), off)
    got = [tuple(r) for r in ids[order][:, [0, 2]].tolist()]
    assert got == sorted({tuple(r) for r in ids[:, [0, 2]].tolist()})


@pytest.mark.parametrize("subsets", [1, 3, 20])
def test_sop_subsets_change_work_not_results(subsets):
    """SOP's paper index (subsets with their R, inverted files) under replicas, epochs and feedback."""
    ev = random_knn_stream(13, n_objects=400, n_queries=40)
    rng = np.random.default_rng(subsets)
    ev = Events({**ev.cols, "x": ev.x + rng.random(len(ev)), "y": ev.y + rng.random(len(ev))}, ev.offsets,
                ev.values)
    keys, _ = run_replicated(ev, 3, 5, subsets, index_params={"subsets": subsets})
    np.testing.assert_array_equal(keys, knn_oracle(ev))


def test_sop_subsets_group_by_space_and_enclose_their_balls():
    from harness.families.knn.subsets import ball_squares, sop_subsets

    rng = np.random.default_rng(0)
    x = np.r_[rng.random(50) * 2, 18 + rng.random(50) * 2]  # two clusters far apart
    y = np.r_[rng.random(50) * 2, 18 + rng.random(50) * 2]
    r = rng.random(100) * 0.5
    sq = ball_squares(x, y, r)
    subset, rects = sop_subsets(x, y, sq, (0, 0, 20, 20), 8)
    assert 2 <= len(rects) <= 8 and set(subset.tolist()) == set(range(len(rects)))
    assert not set(subset[:50].tolist()) & set(subset[50:].tolist())  # the clusters never share a subset
    for i in range(len(rects)):
        m = subset == i
        assert (sq[m, 0] >= rects[i, 0]).all() and (sq[m, 2] <= rects[i, 2]).all()
        assert (sq[m, 1] >= rects[i, 1]).all() and (sq[m, 3] <= rects[i, 3]).all()
    one, rect1 = sop_subsets(x, y, sq, (0, 0, 20, 20), 1)
    assert len(rect1) == 1 and (one == 0).all()


def test_packed_merge_keys_order_like_the_pair_and_refuse_what_does_not_fit():
    from harness.families.knn.merge import packed_keys

    q = np.array([0, 0, 1, 5, (1 << 31) - 1])
    s = np.array([7, 9, 0, (1 << 32) - 1, 3])
    k = packed_keys(q, s)
    assert (np.diff(k) > 0).all()
    with pytest.raises(ValueError, match=r"qid must be in \[0, 2\^31\)"):
        packed_keys(np.array([1 << 31]), np.array([0]))
    with pytest.raises(ValueError, match=r"seq in \[0, 2\^32\)"):
        packed_keys(np.array([1]), np.array([1 << 32]))


def test_a_term_outside_the_vocabulary_is_a_clear_error():
    """Postings are keyed cell * vocab + term: an id >= vocab would alias another cell's term."""
    ev = random_knn_stream(1, n_objects=20, n_queries=3, vocab=12)  # CONTEXT's vocabulary is 8
    with pytest.raises(ValueError, match=r"term ids must be in \[0, 8\)"):
        KnnIndex(CONTEXT).process(ev)
