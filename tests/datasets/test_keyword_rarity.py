"""Tornado Fig. 8(c)'s keyword frequency (`workload.keyword_rarity`, datasets/workloads/sts.py
`band_keywords`): query keywords come from one band of the vocabulary ranked by frequency, at
the top for 0 and at the tail for 1; every query keeps its keyword count, its keywords are
distinct, and nothing else in the stream changes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from datasets.workloads.range import build_workload
from harness.core.events import INSERT, OBJECT, csr_take
from harness.families.workload import WorkloadConfig
from tests.helpers import random_objects

BASE = WorkloadConfig(profile="q1", queries=400, updates=800, keywords_min=3, keywords_max=3)


@pytest.fixture(scope="module")
def data():
    return random_objects(3000, seed=5, extent=(0.0, 0.0, 500.0, 500.0))


def rows_terms(ev, rows):
    off, val = csr_take(ev.offsets, ev.values, rows)
    return [val[a:b].tolist() for a, b in zip(off[:-1], off[1:])]


def queries_terms(wl):
    rows = np.flatnonzero(wl.events.kind == INSERT)
    return rows, rows_terms(wl.events, rows)


def objects_matching_any(wl, terms):
    ev = wl.events
    rows = np.flatnonzero(ev.kind == OBJECT)
    wanted = set(t for q in terms for t in q)
    return np.mean([bool(wanted & set(t)) for t in rows_terms(ev, rows)])


def test_the_band_follows_the_rarity_and_leaves_the_rest_of_the_stream_alone(data):
    objs, df, ext = data
    plain = build_workload(objs, df, ext, BASE, 3)
    rank = np.empty(len(df), np.int64)
    rank[np.lexsort((np.arange(len(df)), -df.astype(np.float64)))] = np.arange(len(df))
    seen = {}
    for rarity in (0.0, 0.5, 1.0):
        wl = build_workload(objs, df, ext, replace(BASE, keyword_rarity=rarity), 3)
        rows, terms = queries_terms(wl)
        _, plain_terms = queries_terms(plain)
        assert [len(t) for t in terms] == [len(t) for t in plain_terms]  # the keyword counts stay
        assert all(len(set(t)) == len(t) for t in terms)  # distinct
        ranks = np.array([rank[t] for q in terms for t in q])
        width = max(50, int(np.ceil(0.01 * len(df))))
        lo = round(rarity * (len(df) - width))
        assert ranks.min() >= lo and ranks.max() < lo + width, (rarity, ranks.min(), ranks.max())
        for name in ("x", "y", "xmin", "ymin", "xmax", "ymax", "kind", "id", "seq"):
            np.testing.assert_array_equal(wl.events.cols[name], plain.events.cols[name], err_msg=name)
        seen[rarity] = objects_matching_any(wl, terms)
    # the paper's premise: frequent keywords match many objects, rare ones hardly any
    assert seen[0.0] > seen[0.5] >= seen[1.0], seen


def test_a_rarity_outside_zero_to_one_is_refused_naming_the_field(data):
    objs, df, ext = data
    with pytest.raises(ValueError, match=r"workload\.keyword_rarity=1\.5 is invalid; allowed: a number in \[0, 1\]"):
        build_workload(objs, df, ext, replace(BASE, keyword_rarity=1.5), 3)
