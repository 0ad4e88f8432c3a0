"""The kNN workload generator (datasets/workloads/knn.py): DkM-SKS's time-stamped protocol (knn_q)
and SSTD's CKQ with lifetimes (ckq_q)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

from datasets.workloads.anomalies import PAYLOAD, normalise
from datasets.workloads.knn import build_knn_workload, lifetime_ts, n_timestamps, validate_knn_workload
from harness.core.events import AND, DELETE, INSERT, KNN, OBJECT, OBJECT_SCHEMA, OR
from harness.families.workload import WorkloadConfig
from harness.measure.timestamps import is_time_stamped
from tests.helpers import random_objects

TINY = WorkloadConfig(name="tiny", family="knn", queries=150, updates=300)
CKQ = WorkloadConfig(name="tiny_ckq", family="knn", protocol="ckq", op="and", queries=150, timestamps=30,
                     objects_per_ts=50, keywords_min=1, keywords_max=2, k_min=10, k_max=10, hour_s=0.1)
RANK = {DELETE: 0, INSERT: 1, OBJECT: 2}


@pytest.fixture(scope="module")
def data():
    return random_objects(1500, seed=4)


def _build(data, cfg, seed=7):
    objects, df, extent = data
    return build_knn_workload(objects, df, extent, cfg, seed)


def _terms(ev, i):
    return ev.values[ev.offsets[i]:ev.offsets[i + 1]]


def test_tiny_config_is_a_small_time_stamped_stream(data):
    wl = _build(data, TINY)
    ev = wl.events
    # defaults: init_objects = queries, T = ceil(300 / (10 + 10)) = 15, 100 : 10 : 10 per time-stamp
    assert n_timestamps(TINY) == 15
    assert len(ev) == 150 + 150 + 15 * (10 + 10 + 100) == 2100
    assert wl.warmup == 300
    assert np.array_equal(ev.seq, np.arange(len(ev)))
    assert is_time_stamped(ev.ts) and np.all(np.diff(ev.ts) >= 0)
    assert np.array_equal(np.unique(ev.ts), np.arange(16.0))
    assert ev.to_arrow().num_rows == len(ev)  # the Arrow schema takes it


def test_warm_up_is_the_initial_subscriptions_then_o_init(data):
    cfg = replace(TINY, init_objects=40)
    wl = _build(data, cfg)
    ev = wl.events
    mu = cfg.queries
    assert wl.warmup == mu + 40
    assert np.all(ev.kind[:mu] == INSERT) and np.array_equal(ev.id[:mu], np.arange(mu))
    assert np.all(ev.kind[mu:mu + 40] == OBJECT) and np.array_equal(ev.id[mu:mu + 40], np.arange(40))
    assert np.all(ev.ts[:wl.warmup] == 0) and np.all(ev.ts[wl.warmup:] >= 1)
    assert not np.any(ev.kind[:wl.warmup] == DELETE)


@pytest.mark.parametrize("cfg", [TINY, CKQ], ids=["dkm", "ckq"])
def test_each_time_stamp_is_deletions_then_insertions_then_objects(data, cfg):
    ev = _build(data, cfg).events
    rank = np.vectorize(RANK.get)(ev.kind)
    for t in np.unique(ev.ts):
        r = rank[ev.ts == t]
        assert np.all(np.diff(r) >= 0), t
    # and across time-stamps the stream never goes back
    assert np.all(np.diff(ev.ts) >= 0)


def test_per_time_stamp_counts_keep_the_ratio(data):
    cfg = replace(TINY, timestamps=12, objects_per_ts=60, inserts_per_ts=6, deletes_per_ts=6)
    wl = _build(data, cfg)
    ev = wl.events
    for t in range(1, 13):
        at = ev.ts == t
        counts = [int(np.sum(at & (ev.kind == k))) for k in (DELETE, INSERT, OBJECT)]
        assert counts == [6, 6, 60], t
    # the defaults keep the paper's 1,000 : 100 : 100
    d = WorkloadConfig()
    assert d.objects_per_ts * 100 // d.inserts_per_ts == 1000 and d.inserts_per_ts == d.deletes_per_ts


@pytest.mark.parametrize("cfg", [TINY, CKQ], ids=["dkm", "ckq"])
def test_deletes_are_of_live_subscriptions_and_carry_their_insertions_payload(data, cfg):
    ev = _build(data, cfg).events
    ins_row, live = {}, set()
    for i in range(len(ev)):
        kind, qid = ev.kind[i], int(ev.id[i])
        if kind == INSERT:
            assert qid not in ins_row  # an id names one subscription
            ins_row[qid] = i
            live.add(qid)
        elif kind == DELETE:
            assert qid in live, (i, qid)
            live.remove(qid)
            j = ins_row[qid]
            for c in PAYLOAD:
                a, b = ev.cols[c][i], ev.cols[c][j]
                assert a == b or (np.isnan(a) and np.isnan(b)), (c, a, b)
            assert np.array_equal(_terms(ev, i), _terms(ev, j))
    # the normaliser finds nothing to fix
    _, counts = normalise(ev)
    assert not any(counts.values()), counts


def test_dkm_deletions_never_exceed_the_live_set(data):
    cfg = replace(TINY, queries=3, inserts_per_ts=0, deletes_per_ts=5, timestamps=4)
    ev = _build(data, cfg).events
    assert int(np.sum(ev.kind == DELETE)) == 3
    assert np.all(ev.ts[ev.kind == DELETE] == 1)


def test_subscription_payload(data):
    objects, _, extent = data
    cfg = replace(TINY, keywords_max=2, k_min=3, k_max=7)
    ev = _build(data, cfg).events
    q = np.flatnonzero(ev.kind != OBJECT)
    o = np.flatnonzero(ev.kind == OBJECT)
    assert np.all(ev.family[q] == KNN) and np.all(ev.family[o] == -1)
    assert ev.k[q].min() >= 3 and ev.k[q].max() <= 7 and len(np.unique(ev.k[q])) == 5
    assert np.all(ev.op[q] == OR)
    assert np.all(np.isnan(ev.tau[q]))
    for c, v in zip(("xmin", "ymin", "xmax", "ymax"), extent):
        assert np.all(ev.cols[c][q] == v) and np.all(np.isnan(ev.cols[c][o]))
    # keywords: min(keywords_max, |o.terms|) distinct terms of the object whose location it takes
    by_xy = {}
    xs, ys = objects.column("x").to_numpy(), objects.column("y").to_numpy()
    for row, terms in enumerate(objects.column("terms").to_pylist()):
        by_xy.setdefault((xs[row], ys[row]), []).append(set(terms))
    for i in q[ev.kind[q] == INSERT]:
        t = _terms(ev, i)
        assert len(t) >= 1 and np.all(np.diff(t) > 0)  # sorted, distinct
        sources = by_xy[(ev.x[i], ev.y[i])]
        assert any(set(t.tolist()) <= s and len(t) == min(2, len(s)) for s in sources), (i, t, sources)


def test_keywords_are_uniform_over_the_objects_terms():
    # one object with terms 0..9: each term is picked with probability 3/10 whatever its frequency
    objects = _table([[0.0, 0.0]], [list(range(10))])
    cfg = replace(TINY, queries=20000, timestamps=1, inserts_per_ts=0, deletes_per_ts=0, keywords_max=3,
                  init_objects=0, objects_per_ts=1)
    ev = build_knn_workload(objects, np.ones(10), (0, 0, 1, 1), cfg, 1).events
    q = ev.kind == INSERT
    assert np.all(np.diff(ev.offsets)[q] == 3)
    share = np.bincount(ev.values[np.repeat(q, np.diff(ev.offsets))], minlength=10) / 20000
    assert np.allclose(share, 0.3, atol=0.02)


def test_objects_without_enough_terms_are_redrawn():
    objects = _table([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]], [[], [4], [1, 2, 3]])
    cfg = replace(TINY, queries=200, updates=20)
    ev = build_knn_workload(objects, np.ones(5), (0, 0, 4, 4), cfg, 3).events
    q = ev.kind != OBJECT
    assert not np.any(ev.x[q] == 1.0)  # the object with no terms is never a source
    assert np.all(np.diff(ev.offsets)[q] >= 1)
    ev2 = build_knn_workload(objects, np.ones(5), (0, 0, 4, 4), replace(cfg, keywords_min=2), 3).events
    assert np.all(ev2.x[ev2.kind != OBJECT] == 3.0)
    with pytest.raises(ValueError, match=r"workload\.keywords_min=4.*no dataset object has that many terms.*at most"):
        build_knn_workload(objects, np.ones(5), (0, 0, 4, 4), replace(cfg, keywords_min=4, keywords_max=4), 3)


def test_objects_are_the_datasets_in_order_cycled_and_counted(data):
    objects, _, _ = data
    cfg = replace(TINY, init_objects=500)  # 500 + 15 * 100 = 2000 objects > 1500
    wl = _build(data, cfg)
    ev = wl.events
    o = np.flatnonzero(ev.kind == OBJECT)
    assert np.array_equal(ev.id[o], np.arange(2000))
    rows = np.arange(2000) % 1500
    assert np.array_equal(ev.x[o], objects.column("x").to_numpy()[rows])
    terms = objects.column("terms").to_pylist()
    for i, r in zip(o[::97], rows[::97]):
        assert _terms(ev, i).tolist() == terms[r]
    info = wl.info
    assert info["workload_objects"] == 2000 and info["dataset_objects"] == 1500 and info["objects_reused"] == 500
    lens = np.array([len(t) for t in terms])
    assert info["dataset_keywords_per_object"] == pytest.approx(lens.mean())
    q = ev.kind == INSERT
    assert info["query_keywords_mean"] == pytest.approx(np.diff(ev.offsets)[q].mean())
    assert _build(data, replace(TINY, init_objects=0, timestamps=10)).info["objects_reused"] == 0


def test_ckq_deletion_is_at_insertion_plus_lifetime_and_the_live_set_stays(data):
    wl = _build(data, CKQ)
    ev = wl.events
    L = lifetime_ts(CKQ, 30)
    assert L == round(72 * 0.1) == 7
    q = ev.kind != OBJECT
    assert np.all(ev.op[q] == AND) and np.all(ev.k[q] == 10)
    assert np.all(np.diff(ev.offsets)[q] <= 2)
    ins = {int(ev.id[i]): i for i in np.flatnonzero(ev.kind == INSERT)}
    dels = np.flatnonzero(ev.kind == DELETE)
    assert len(dels) > CKQ.queries  # the live set turns over more than once
    for i in dels:
        j = ins[int(ev.id[i])]
        assert ev.ts[i] == ev.ts[j] + ev.tau[j]
    # replacements live L time-stamps; the warm-up ones what remains of it, spread over 1..L
    warm = np.flatnonzero((ev.kind == INSERT) & (ev.ts == 0))
    assert np.all(ev.tau[np.flatnonzero((ev.kind == INSERT) & (ev.ts > 0))] == L)
    assert set(ev.tau[warm].tolist()) == set(range(1, L + 1))
    # every subscription that was due within the stream was deleted, and `queries` stay live
    due = [qid for qid, j in ins.items() if ev.ts[j] + ev.tau[j] <= 30]
    assert sorted(due) == sorted(ev.id[dels].tolist())
    live = np.cumsum(np.where(ev.kind == INSERT, 1, np.where(ev.kind == DELETE, -1, 0)))
    ends = np.r_[np.flatnonzero(np.diff(ev.ts)), len(ev) - 1]  # the last event of each time-stamp
    assert np.all(live[ends] == CKQ.queries)
    # the churn is even: floor or ceil of queries / L per time-stamp while the warm-up expires
    per_ts = np.bincount(ev.ts[dels].astype(int), minlength=31)[1:]
    assert per_ts.min() >= CKQ.queries // L and per_ts.max() <= -(-CKQ.queries // L)


def test_ckq_default_hour_maps_the_span_to_744_hours():
    cfg = replace(CKQ, hour_s=None, timestamps=200)
    assert lifetime_ts(cfg, 200) == round(72 * 200 / 744) == 19
    assert lifetime_ts(replace(cfg, tau_hours=1.0), 200) == 1  # never below one time-stamp


def test_deterministic_given_seed(data):
    for cfg in (TINY, CKQ):
        a, b, c = _build(data, cfg, 11), _build(data, cfg, 11), _build(data, cfg, 12)
        for name in a.events.cols:
            assert np.array_equal(a.events.cols[name], b.events.cols[name], equal_nan=True), name
        assert np.array_equal(a.events.values, b.events.values) and a.warmup == b.warmup and a.info == b.info
        assert not (np.array_equal(a.events.x, c.events.x) and np.array_equal(a.events.values, c.events.values))


@pytest.mark.parametrize("knobs,field,value,allowed", [
    (dict(k_min=0), "k_min", "0", "an integer >= 1"),
    (dict(k_min=5, k_max=4), "k_max", "4", "an integer >= k_min (5)"),
    (dict(keywords_min=0), "keywords_min", "0", "an integer >= 1"),
    (dict(keywords_min=3, keywords_max=2), "keywords_max", "2", "an integer >= keywords_min (3)"),
    (dict(inserts_per_ts=-1), "inserts_per_ts", "-1", "an integer >= 0"),
    (dict(deletes_per_ts=-2), "deletes_per_ts", "-2", "an integer >= 0"),
    (dict(objects_per_ts=0), "objects_per_ts", "0", "an integer >= 1"),
    (dict(op="xor"), "op", "'xor'", "or, and"),
    (dict(protocol="fast"), "protocol", "'fast'", "dkm, ckq"),
    (dict(queries=0), "queries", "0", "an integer >= 1"),
    (dict(updates=-1), "updates", "-1", "an integer >= 0"),
    (dict(init_objects=-1), "init_objects", "-1", "an integer >= 0, or null for queries"),
    (dict(timestamps=0), "timestamps", "0", "an integer >= 1, or null"),
    (dict(inserts_per_ts=0, deletes_per_ts=0), "timestamps", "None", "an integer >= 1 (null derives it"),
    (dict(tau_hours=0.0), "tau_hours", "0.0", "a number > 0"),
    (dict(hour_s=-1.0), "hour_s", "-1.0", "a number > 0"),
    (dict(drift="scale"), "drift", "'scale'", "none (the kNN generator has no drift)"),
])
def test_validation_names_field_value_and_what_is_allowed(knobs, field, value, allowed):
    with pytest.raises(ValueError) as exc:
        validate_knn_workload(replace(TINY, **knobs))
    msg = str(exc.value)
    assert msg.startswith(f"workload.{field}={value} is invalid; allowed: "), msg
    assert allowed in msg, msg


def test_validation_accepts_the_configs(data):
    for cfg in (TINY, CKQ, replace(TINY, timestamps=3, inserts_per_ts=0, deletes_per_ts=0)):
        validate_knn_workload(cfg)


def _table(xy, terms):
    n = len(xy)
    xy = np.asarray(xy, float)
    return pa.Table.from_pydict({"oid": np.arange(n), "ts": np.arange(n, dtype=float), "lon": xy[:, 0],
                                 "lat": xy[:, 1], "x": xy[:, 0], "y": xy[:, 1], "terms": terms}, schema=OBJECT_SCHEMA)
