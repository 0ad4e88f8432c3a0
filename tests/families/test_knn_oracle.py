"""The kNN oracle on hand-checkable vectors, and against a plain re-statement of the definition."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.events import AND, DELETE, INSERT, KNN, OBJECT, OR, Events
from harness.families.knn.oracle import knn_oracle
from tests.streams import random_knn_stream

JAPANESE, NOODLE, CAFE = 0, 1, 2
EXTENT = 20.0


def stream(rows) -> Events:
    """rows: ("q", qid, x, y, terms, k, op) | ("d", qid) | ("o", oid, x, y, terms), in seq order."""
    cols = {c: [] for c in ("kind", "family", "id", "x", "y", "k", "op")}
    terms, inserted = [], {}
    for r in rows:
        if r[0] == "q":
            inserted[r[1]] = r
        src = inserted[r[1]] if r[0] == "d" else r
        kind = {"q": INSERT, "d": DELETE, "o": OBJECT}[r[0]]
        cols["kind"].append(kind)
        cols["family"].append(-1 if kind == OBJECT else KNN)
        cols["id"].append(r[1])
        cols["x"].append(float(src[2]))
        cols["y"].append(float(src[3]))
        cols["k"].append(src[5] if kind != OBJECT else 0)
        cols["op"].append(src[6] if kind != OBJECT else 0)
        terms.append(sorted(src[4]))
    n = len(rows)
    arrays = {c: np.asarray(v) for c, v in cols.items()}
    arrays.update(seq=np.arange(n, dtype=np.int64), ts=np.arange(n, dtype=np.float64))
    is_query = arrays["kind"] != OBJECT  # a subscription's rectangle at insertion: the whole square
    for c, v in (("xmin", 0.0), ("ymin", 0.0), ("xmax", EXTENT), ("ymax", EXTENT)):
        arrays[c] = np.where(is_query, v, np.nan)
    offsets = np.r_[0, np.cumsum([len(t) for t in terms])].astype(np.int64)
    values = np.asarray([t for ts in terms for t in ts], np.int32)
    return Events(_typed(arrays), offsets, values)


def _typed(arrays):
    from harness.core.events import NUMPY_DTYPES

    return {k: np.asarray(v).astype(NUMPY_DTYPES[k]) for k, v in arrays.items()}


def keys(pairs):
    return np.array(sorted((q << 32) | o for q, o in pairs), np.int64)


def test_dkmsks_example_1():
    """DkM-SKS Example 1 (Fig. 1), rebuilt with coordinates realising its facts: k = 1; at time t
    NN(s1) = o2, NN(s2) = o3, NN(s3) = o2; at t + 1 o4 {Japanese} becomes NN(s3) and changes
    nothing else."""
    ev = stream([
        ("q", 1, 0, 0, [JAPANESE, NOODLE], 1, OR), ("q", 2, 10, 0, [NOODLE], 1, OR),
        ("q", 3, 5, 5, [JAPANESE], 1, OR),
        ("o", 1, 0, 1, [CAFE]),  # the nearest to s1, but no keyword in common
        ("o", 2, 1, 0, [JAPANESE]),
        ("o", 3, 10, 1, [NOODLE]),
        ("o", 4, 5, 4, [JAPANESE]),  # time-stamp t + 1
    ])
    np.testing.assert_array_equal(knn_oracle(ev), keys([(1, 2), (3, 2), (2, 3), (3, 4)]))


def test_dkmsks_example_2_k2_keeps_the_two_nearest_of_its_objects():
    """Example 2: O(s1) = {o1, o4, o6, o7}, s1.k = 2, A = {o1, o4}: the others, farther, never enter
    once A is full; o2, o3, o5 hold none of its keywords."""
    ev = stream([("q", 1, 0, 0, [JAPANESE, NOODLE], 2, OR),
                 ("o", 1, 1, 0, [JAPANESE]), ("o", 2, 0, 1, [CAFE]), ("o", 3, 0, 2, [CAFE]),
                 ("o", 4, 2, 0, [NOODLE]), ("o", 5, 0, 1, [CAFE]), ("o", 6, 5, 0, [NOODLE]),
                 ("o", 7, 6, 0, [JAPANESE, CAFE])])
    np.testing.assert_array_equal(knn_oracle(ev), keys([(1, 1), (1, 4)]))


def test_ties_keep_the_older_object_and_entries_follow_the_shrinking_ball():
    ev = stream([("q", 7, 0, 0, [CAFE], 1, OR),
                 ("o", 1, 3, 4, [CAFE]),  # d2 25: enters (A was empty)
                 ("o", 2, 4, 3, [CAFE]),  # d2 25, a tie: the older stays
                 ("o", 3, 0, 4, [CAFE]),  # d2 16: enters
                 ("o", 4, 0, 5, [CAFE])])  # d2 25: outside the ball now
    np.testing.assert_array_equal(knn_oracle(ev), keys([(7, 1), (7, 3)]))


def test_and_needs_every_keyword_or_any_one():
    rows = [("q", 1, 0, 0, [JAPANESE, NOODLE], 5, AND), ("q", 2, 0, 0, [JAPANESE, NOODLE], 5, OR),
            ("o", 1, 1, 1, [JAPANESE]), ("o", 2, 1, 1, [JAPANESE, NOODLE, CAFE]), ("o", 3, 1, 1, [NOODLE])]
    np.testing.assert_array_equal(knn_oracle(stream(rows)), keys([(1, 2), (2, 1), (2, 2), (2, 3)]))


def test_lifetime_objects_after_insertion_and_before_deletion_only():
    ev = stream([("o", 1, 0, 0, [CAFE]), ("q", 1, 0, 0, [CAFE], 3, OR), ("o", 2, 9, 9, [CAFE]),
                 ("d", 1), ("o", 3, 0, 0, [CAFE]), ("q", 2, 0, 0, [CAFE], 1, AND), ("o", 4, 5, 5, [CAFE])])
    np.testing.assert_array_equal(knn_oracle(ev), keys([(1, 2), (2, 4)]))


def _reference(ev: Events) -> np.ndarray:
    """The definition as written: A(s) = the first k of O(s) by (d2, seq) after each arrival;
    o entered iff it is in A(s) right after its own arrival."""
    out = []
    for i in np.flatnonzero((ev.kind == INSERT) & (ev.family == KNN)).tolist():
        qt = set(ev.values[ev.offsets[i]:ev.offsets[i + 1]].tolist())
        later_del = [j for j in np.flatnonzero((ev.kind == DELETE) & (ev.id == ev.id[i])).tolist() if j > i]
        end = later_del[0] if later_del else len(ev)
        seen = []
        for o in range(i + 1, end):
            if ev.kind[o] != OBJECT:
                continue
            ot = set(ev.values[ev.offsets[o]:ev.offsets[o + 1]].tolist())
            if not (qt <= ot if ev.op[i] == AND else qt & ot):
                continue
            d2 = (ev.x[o] - ev.x[i]) ** 2 + (ev.y[o] - ev.y[i]) ** 2
            seen.append((d2, o))
            if (d2, o) in sorted(seen)[: int(ev.k[i])]:
                out.append((int(ev.id[i]), int(ev.id[o])))
    return keys(out)


@pytest.mark.parametrize("seed", range(8))
def test_equals_the_definition_on_random_streams(seed):
    ev = random_knn_stream(seed, n_objects=120, n_queries=15)
    np.testing.assert_array_equal(knn_oracle(ev), _reference(ev))


K1, K2, K3 = 3, 4, 5


def fast_naive_vector() -> tuple[Events, list[list[int]]]:
    """The FAST kNN extension's naive test (fast_extension, NaiveFASTKNNTest; facts only): four
    AND queries registered at t = 1..4 with expiry times 8, 7, 11, 9 ("alive while et > t"), then
    six objects at t = 5..10. An expiry at an object's time-stamp comes before the object, as
    "et > t" makes it. Returns the stream and the expected query ids each object enters."""
    queries = [(1, 5, 5, [K1, K2], 3, 8), (2, 7, 7, [K1, K2], 2, 7), (3, 8, 5, [K1], 3, 11),
               (4, 1, 7, [K2, K3], 2, 9)]
    objects = [(1, 7, 8), (2, 5, 5), (3, 2, 6), (4, 1, 1), (5, 5, 6), (6, 7, 9)]
    rows = [("q", q, x, y, t, k, AND) for q, x, y, t, k, _ in queries]
    for t, (oid, x, y) in enumerate(objects, start=5):
        rows += [("d", q) for q, *_, et in queries if et == t]
        rows.append(("o", oid, x, y, [K1, K2]))
    return stream(rows), [[1, 2, 3], [1, 2, 3], [1, 3], [], [3], []]


def test_fast_naive_knn_vector():
    ev, expected = fast_naive_vector()
    np.testing.assert_array_equal(
        knn_oracle(ev), keys([(q, oid) for oid, qs in enumerate(expected, start=1) for q in qs]))


@pytest.mark.parametrize("family", ["knn", "topk"])
def test_the_oracle_cost_a_keyword_list_family_reports_counts_its_keywords_objects(family):
    """run/oracle.py skips a brute force over oracle.max_checks: the kNN and top-k ones read only
    the objects of a query's keywords, so their estimate is those lists' lengths, not objects x
    queries (the top-k one counted objects x queries and left DSkype's 1M step unchecked)."""
    from harness.families import registry as families
    from harness.families.base import Family

    objects = [("obj", {1}), ("obj", {1, 2}), ("obj", {3}), ("obj", {3}), ("obj", {3})]
    queries = [("ins", {1}), ("ins", {2, 3})]
    rows = objects + queries
    kind = np.array([OBJECT if k == "obj" else INSERT for k, _ in rows], np.int8)
    lens = [len(t) for _, t in rows]
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    values = np.concatenate([sorted(t) for _, t in rows]).astype(np.int32)
    stream = Events({"kind": kind, "seq": np.arange(len(rows), dtype=np.int64)}, offsets, values)
    fam = families.get(family)
    # query {1}: 2 objects; query {2, 3}: 1 + 3 objects
    assert fam.oracle_checks(stream) == 6.0
    assert Family.oracle_checks.__func__(fam, stream) == 5.0 * 2.0  # the default: objects x queries
