"""The frequent_terms family (SSTD's STQ and CTQ) against its brute force: each object counted once however
many workers hold it (text partitioners and broadcast strategies replicate objects), ties broken by
term id, a CTQ's reports where its rule puts them, and the named errors of bad input."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from datasets.workloads.snapshot import with_ctq_reports
from harness.core.events import INSERT, OBJECT, SNAPSHOT, TERMS, term_keys
from harness.engine.simulate import simulate
from harness.families import registry as families
from harness.families.terms.index import copy_masks
from harness.families.terms.merge import top_terms
from harness.families.terms.oracle import ctq_report_times, terms_oracle
from harness.families.workload import WorkloadConfig
from strategies import registry
from tests.helpers import random_objects
from tests.streams import random_terms_stream

# routers that keep several copies of an object (by term, everywhere) and ones that keep one
REPLICATING = ["text_frequency", "text_hash", "dskype_keyword", "hash", "kop", "qttree"]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), ctq=st.booleans(), workers=st.sampled_from([2, 3, 5]),
       strategy=st.sampled_from(REPLICATING + ["grid", "agrid", "kdt"]), slice_size=st.sampled_from([0, 3, 16]))
def test_counting_once_under_replication(seed, ctq, workers, strategy, slice_size):
    """However a router copies objects, every (object, term) counts once, with count tables over
    small slices of a fine grid (cells wholly inside regions) or without: the run equals the oracle."""
    ev = random_terms_stream(seed, ctq=ctq)
    warm = int(np.flatnonzero(ev.kind != OBJECT)[0])
    res = simulate(ev, warm, strategy, workers, epoch_events=max(len(ev) // 4, 1),
                   index_params={"frequent_terms": {"cells_per_side": 6, "slice_size": slice_size}})
    assert res.exact, (seed, ctq, workers, strategy, slice_size)


def test_count_tables_are_used_and_agree_with_scanning():
    """A region over whole interior cells and whole slices reads the tables: fewer checks, same counts."""
    from harness.families.base import IndexContext
    from harness.families.terms.index import TermsIndex
    from tests.streams import _with_terms

    rng = np.random.default_rng(0)
    n = 4000
    cols = {"seq": np.arange(n + 1), "ts": np.zeros(n + 1), "kind": np.r_[np.zeros(n, np.int8), np.int8(SNAPSHOT)],
            "family": np.r_[np.full(n, -1, np.int8), np.int8(TERMS)], "id": np.arange(n + 1),
            "x": np.r_[rng.uniform(0, 60, n), 30.0], "y": np.r_[rng.uniform(0, 60, n), 30.0],
            "xmin": np.r_[np.full(n, np.nan), 1.0], "ymin": np.r_[np.full(n, np.nan), 1.0],
            "xmax": np.r_[np.full(n, np.nan), 59.0], "ymax": np.r_[np.full(n, np.nan), 59.0],
            "k": np.r_[np.zeros(n, np.int32), np.int32(5)], "tau": np.r_[np.full(n, np.nan), 1e9]}
    ev = _with_terms(cols, [sorted(set(rng.integers(0, 10, 4).tolist())) for _ in range(n)] + [[]])
    outs = []
    for slice_size in (0, 1000):
        index = TermsIndex(IndexContext((0.0, 0.0, 60.0, 60.0), 30), cells_per_side=6, slice_size=slice_size)
        index.observe_routing(lambda e: (np.arange(len(e)), np.zeros(len(e), np.int64)), 0, 1)
        index.restore(type(index.export_state())())
        outs.append(index.process(ev))
    (scan, tables) = outs
    order = lambda r: np.lexsort((r.term, r.qid))  # noqa: E731
    assert np.array_equal(scan.results.term[order(scan.results)], tables.results.term[order(tables.results)])
    assert np.array_equal(scan.results.count[order(scan.results)], tables.results.count[order(tables.results)])
    assert tables.work[-1] < 0.8 * scan.work[-1]  # the edge cells (20 of 36) are still scanned


def test_text_partitioners_do_replicate_objects_here():
    """So that the test above tests counting once: objects reach several workers."""
    from harness.engine.simulate import default_context

    ev = random_terms_stream(3)
    cls = registry.get("text_frequency")
    router = cls().fit(ev.take(np.arange(30)), 4, cls.make_params({}), default_context(ev))
    router.observe_inserts(ev, np.flatnonzero(ev.kind == INSERT))
    rows, _ = router.storing_copies(ev)  # as a run with frequent-terms queries routes (workers keep objects)
    objs = np.flatnonzero(ev.kind == OBJECT)
    assert np.bincount(rows, minlength=len(ev))[objs].max() > 1


def test_copy_masks_mark_each_worker_once():
    mask = copy_masks((np.array([0, 0, 1, 2, 2]), np.array([3, 70, 0, 5, 5])), 3, 72)
    assert mask.shape == (3, 2)
    assert mask[0, 0] == 1 << 3 and mask[0, 1] == 1 << 6 and mask[1, 0] == 1 and mask[2, 0] == 1 << 5


def test_top_terms_ties_go_to_the_smaller_term_id():
    qid = np.array([1, 1, 1, 1, 2, 2])
    rep = np.zeros(6, np.int64)
    term = np.array([9, 4, 7, 2, 3, 8])
    count = np.array([5, 5, 6, 1, 2, 2])
    q, r, t, c = top_terms(qid, rep, term, count, lambda qs, rs: np.where(qs == 1, 3, 1))
    assert list(zip(q.tolist(), t.tolist(), c.tolist())) == [(1, 7, 6), (1, 4, 5), (1, 9, 5), (2, 3, 2)]


def test_ctq_reports_follow_the_registration():
    """Reports every step from the registration, within the lifetime and the stream, before a
    deletion; each after every event of its time; the oracle derives the same times itself."""
    ev = random_terms_stream(5, n_queries=6, ctq=True)
    reports = np.flatnonzero(ev.kind == SNAPSHOT)
    assert len(reports) > 0
    for i in reports:  # after every event of its time or earlier, only reports of the same time follow it
        later = ev.ts[i + 1:]
        assert (ev.ts[:i] <= ev.ts[i]).all() and (later >= ev.ts[i]).all()
        assert (ev.kind[i + 1:][later == ev.ts[i]] == SNAPSHOT).all()
    last = float(ev.ts.max())
    for r in np.flatnonzero(ev.kind == INSERT):
        mine = reports[ev.id[reports] == ev.id[r]]
        dels = np.flatnonzero((ev.kind == 2) & (ev.id == ev.id[r]))
        stop = float(ev.ts[dels[0]]) if len(dels) else np.inf
        want = ctq_report_times(float(ev.ts[r]), float(ev.step[r]), float(ev.tau[r]), last, stop)
        assert ev.ts[mine].tolist() == want and ev.step[mine].tolist() == list(range(1, len(want) + 1))


def test_stq_by_hand():
    """Three objects in the region, one outside; terms 1 and 2 twice, 3 once: top 2 = (1, 2)."""
    from tests.streams import _with_terms

    n = 5
    cols = {"seq": np.arange(n), "ts": np.arange(n, dtype=float), "kind": np.array([0, 0, 0, 0, 3], np.int8),
            "family": np.array([-1, -1, -1, -1, TERMS], np.int8), "id": np.arange(n),
            "x": np.array([1.0, 2.0, 3.0, 50.0, 0.0]), "y": np.array([1.0, 2.0, 3.0, 50.0, 0.0]),
            "xmin": np.array([np.nan] * 4 + [0.0]), "ymin": np.array([np.nan] * 4 + [0.0]),
            "xmax": np.array([np.nan] * 4 + [10.0]), "ymax": np.array([np.nan] * 4 + [10.0]),
            "k": np.array([0, 0, 0, 0, 2], np.int32), "tau": np.array([np.nan] * 4 + [100.0])}
    ev = _with_terms(cols, [[1, 2], [1, 3], [2, 5], [1, 2, 5], []])
    want = term_keys(np.array([4, 4]), np.zeros(2, np.int64), np.array([1, 2]), np.array([2, 2]))
    assert sorted(terms_oracle(ev).tolist()) == sorted(want.tolist())
    assert simulate(ev, 1, "text_frequency", 3).exact


def _ctq_cfg(**kw):
    return WorkloadConfig(**{**dict(name="t", family="frequent_terms", protocol="ctq", queries=10, preload_objects=200,
                                    objects_per_s=50, ctq_span_s=4.0), **kw})


def test_the_ctq_generator_registers_then_reports():
    objects, df, extent = random_objects(300, seed=2)
    wl = families.get("frequent_terms").build_workload(objects, df, extent, _ctq_cfg(ctq_step_hours=24, ctq_window_hours=48), 1)
    ev = wl.events
    assert wl.warmup == 210 and (ev.kind[200:210] == INSERT).all()
    assert (ev.kind[wl.warmup:] != INSERT).all() and wl.info["ctq_reports"] == int((ev.kind == SNAPSHOT).sum()) > 0


@pytest.mark.parametrize("field,value,message", [
    ("step", 9.0, "step=9.0; allowed: at most the window"), ("win", 0.0, "win=0.0; allowed: a window"),
    ("k", 0, "k=0; allowed: an integer >= 1"), ("xmin", 1e6, "region=")])
def test_bad_ctqs_are_named(field, value, message):
    ev = random_terms_stream(1, ctq=True)
    r = np.flatnonzero(ev.kind == INSERT)[0]
    ev.cols[field][r] = value
    context = None
    if field == "xmin":  # the space is the dataset's, not the stream's bounding box
        from harness.engine.simulate import default_context

        context = replace(default_context(ev), extent=(0.0, 0.0, 20.0, 20.0))
        ev.cols["xmax"][r] = 2e6
    with pytest.raises(ValueError, match=message):
        simulate(ev, 5, "grid", 2, context=context)


def test_a_step_longer_than_the_window_is_a_config_error():
    with pytest.raises(ValueError, match=r"workload.ctq_step_hours=48 is invalid; allowed: at most ctq_window_hours"):
        families.get("frequent_terms").validate_workload(_ctq_cfg(ctq_step_hours=48, ctq_window_hours=24))


def test_reports_added_twice_are_the_same_stream():
    ev = random_terms_stream(2, ctq=True)
    again = with_ctq_reports(ev.take(np.flatnonzero(ev.kind != SNAPSHOT)))
    assert np.array_equal(again.ts, ev.ts) and np.array_equal(again.kind, ev.kind)
