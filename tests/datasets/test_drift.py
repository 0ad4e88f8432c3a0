"""Drift workloads (issue 4): each drift changes the measured stream as promised, the warm-up and
the undrifted workloads stay byte-identical, deletes keep their insert's payload, bad knobs fail."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from itertools import pairwise

import numpy as np
import pytest

from datasets.workloads.range import build_workload
from harness.core.events import DELETE, INSERT, OBJECT, csr_take
from harness.families.workload import WorkloadConfig
from tests.helpers import random_objects

DRIFTS = ("q3_switch", "hotspot_objects", "hotspot_queries", "scale")
EXTENT = (0.0, 0.0, 400.0, 300.0)
# Q1 and Q2 sides that do not overlap, so a query's side tells its type
BASE = WorkloadConfig(profile="q3", queries=300, updates=3000, objects_per_update=2.0,
                      q1_side_km_min=1.0, q1_side_km_max=10.0, q2_side_km_min=60.0, q2_side_km_max=100.0,
                      drift_every=150, hotspot_region_km=40.0, hotspot_fraction=0.6)


@pytest.fixture(scope="module")
def data():
    return random_objects(1500, seed=11, extent=EXTENT)


def build(data, seed=7, **kw):
    objs, df, ext = data
    return build_workload(objs, df, ext, replace(BASE, **kw), seed)


def terms_of(ev, rows):
    return csr_take(ev.offsets, ev.values, np.asarray(rows, np.int64))


def same_rows(a, b, rows):
    """Every column and the terms of `rows` are equal in streams a and b."""
    for name, col in a.cols.items():
        np.testing.assert_array_equal(col[rows], b.cols[name][rows], err_msg=name)
    for x, y in zip(terms_of(a, rows), terms_of(b, rows)):
        np.testing.assert_array_equal(x, y)


def digest(wl):
    h = hashlib.sha256()
    for n in sorted(wl.events.cols):
        h.update(n.encode())
        h.update(np.ascontiguousarray(wl.events.cols[n]).tobytes())
    h.update(wl.events.offsets.tobytes())
    h.update(wl.events.values.tobytes())
    h.update(str(wl.warmup).encode())
    return h.hexdigest()[:16]


def test_drift_knobs_change_nothing_without_drift():
    # the workload cache leaves the drift knobs out of its key when drift=none; this is why it may
    objs, df, ext = random_objects(1500, seed=11)
    knobs = dict(drift_start=0.5, drift_every=7, drift_fraction=0.4, hotspot_fraction=0.9, hotspot_region_km=10.0,
                 hotspot_seed=3, scale_factor=0.3, scale_fraction=0.5)
    for prof in ("q1", "q2", "q3"):
        plain = build_workload(objs, df, ext, WorkloadConfig(profile=prof, queries=200, updates=600), 7)
        knobbed = build_workload(objs, df, ext, WorkloadConfig(profile=prof, queries=200, updates=600, **knobs), 7)
        assert digest(plain) == digest(knobbed), prof
        assert plain.drift is None and knobbed.drift is None


@pytest.mark.parametrize("drift", DRIFTS)
def test_drift_keeps_warmup_timeline_and_prefix_and_changes_the_rest(data, drift):
    none, wl = build(data, drift="none").events, build(data, drift=drift)
    ev = wl.events
    assert wl.warmup == build(data, drift="none").warmup and len(ev) == len(none)
    for name in ("seq", "ts", "kind", "family", "id"):  # the timeline is the undrifted one
        np.testing.assert_array_equal(ev.cols[name], none.cols[name])
    start = wl.drift["start_event"]
    assert wl.warmup < start < len(ev)
    same_rows(ev, none, np.arange(start))  # warm-up and the measured part before the drift start
    after = np.arange(start, len(ev))
    changed = (ev.x[after] != none.x[after]) | (ev.y[after] != none.y[after])
    assert changed.sum() > 20 if drift != "q3_switch" else True
    if drift == "q3_switch":  # centres stay; sides change
        q = after[ev.kind[after] == INSERT]
        assert (ev.xmax[q] - ev.xmin[q] != none.xmax[q] - none.xmin[q]).sum() > 20


@pytest.mark.parametrize("drift", ("none",) + DRIFTS)
def test_every_delete_carries_its_inserts_payload(data, drift):
    ev = build(data, drift=drift).events
    ins = np.flatnonzero(ev.kind == INSERT)
    dels = np.flatnonzero(ev.kind == DELETE)
    assert len(dels) > 100
    row_of = np.full(ev.id.max() + 1, -1)
    row_of[ev.id[ins]] = ins
    src = row_of[ev.id[dels]]
    assert (src >= 0).all() and (src < dels).all()
    for name in ("x", "y", "xmin", "ymin", "xmax", "ymax", "op", "family"):
        np.testing.assert_array_equal(ev.cols[name][dels], ev.cols[name][src], err_msg=name)
    d_off, d_val = terms_of(ev, dels)
    s_off, s_val = terms_of(ev, src)
    np.testing.assert_array_equal(d_off, s_off)
    np.testing.assert_array_equal(d_val, s_val)


@pytest.mark.parametrize("drift", DRIFTS)
def test_deterministic_for_a_seed(data, drift):
    a, b, c = build(data, drift=drift), build(data, drift=drift), build(data, seed=8, drift=drift)
    assert digest(a) == digest(b) and a.drift == b.drift
    assert digest(a) != digest(c)


def region_of(x, y, side=10):
    rx = np.clip((x / EXTENT[2] * side).astype(int), 0, side - 1)
    ry = np.clip((y / EXTENT[3] * side).astype(int), 0, side - 1)
    return ry * side + rx


def test_q3_switch_flips_another_tenth_of_the_regions_at_each_drift_point(data):
    wl = build(data, drift="q3_switch")
    ev, info = wl.events, wl.drift
    ins = np.flatnonzero(ev.kind == INSERT)
    is_q2 = (ev.xmax[ins] - ev.xmin[ins]) > BASE.q1_side_km_max
    region = region_of(ev.x[ins], ev.y[ins])
    # drift points: the first insertion at or after the drift start, then every drift_every insertions
    later = ins[ins >= info["start_event"]]
    assert info["points"] == later[:: BASE.drift_every].tolist() and len(info["points"]) >= 4
    # each point switches 10 regions, different ones each time (10 points cover all 100)
    sets = [set(r) for r in info["regions"]]
    assert all(len(s) == 10 for s in sets)
    assert len(set().union(*sets)) == 10 * len(sets)
    # base types as seen in the warm-up agree with the workload's region map
    warm = ins < wl.warmup
    base = np.zeros(100, bool)
    base[info["base_q2"]] = True
    np.testing.assert_array_equal(is_q2[warm], base[region[warm]])
    # every measured query has the type of its region after the switches so far
    n_points = np.searchsorted(np.asarray(info["points"]), ins, side="right")
    flips = np.zeros((len(sets) + 1, 100), np.int64)
    for k, s in enumerate(sets):
        flips[k + 1] = flips[k]
        flips[k + 1, list(s)] += 1
    expect = base[region] ^ (flips[n_points, region] % 2 == 1)
    np.testing.assert_array_equal(is_q2, expect)
    # so in each point's regions the Q2 share turns over at that point (0 <-> 1 per region), while
    # the regions not switched there keep theirs
    bounds = [wl.warmup] + info["points"] + [len(ev)]
    seen = 0
    for k, s in enumerate(sets):
        before = (ins >= bounds[k]) & (ins < bounds[k + 1])
        after = (ins >= bounds[k + 1]) & (ins < bounds[k + 2])
        for r in range(100):
            b, a = is_q2[before & (region == r)], is_q2[after & (region == r)]
            if len(b) and len(a):
                assert b.min() == b.max() and a.min() == a.max()
                assert (b[0] != a[0]) == (r in s), (k, r)
                seen += r in s
    assert seen >= len(sets)  # switched regions observed on both sides of their point
    # switched-to-Q2 queries got a rare keyword (outside the top 1% of terms)
    rare_cut = int(np.ceil(BASE.rare_top_fraction * len(data[1])))
    off, val = terms_of(ev, ins[is_q2])
    has_rare = np.logical_or.reduceat(val >= rare_cut, off[:-1]) if len(val) else np.zeros(0, bool)
    assert has_rare.all()


def hot_share(ev, rows, rect):
    x, y = ev.x[rows], ev.y[rows]
    return ((x >= rect[0]) & (x <= rect[2]) & (y >= rect[1]) & (y <= rect[3])).mean()


def quarters(rows, start, end):
    edges = np.linspace(start, end, 5)
    return [rows[(rows >= lo) & (rows < hi)] for lo, hi in pairwise(edges)]


def real_object_check(ev, rows, objs, subset=False):
    """The events' locations are dataset objects' and their terms that object's (or a subset)."""
    ox, oy = objs.column("x").to_numpy(), objs.column("y").to_numpy()
    terms = objs.column("terms").to_pylist()
    where = {}
    for i, key in enumerate(zip(ox.tolist(), oy.tolist())):
        where.setdefault(key, []).append(i)
    off, val = terms_of(ev, rows)
    for j, r in enumerate(rows):
        cands = where.get((float(ev.x[r]), float(ev.y[r])))
        assert cands, f"event {r} is not at an object's location"
        mine = set(val[off[j]:off[j + 1]].tolist())
        assert any(mine <= set(terms[c]) if subset else mine == set(terms[c]) for c in cands)


def test_hotspot_objects_concentrate_into_one_region_over_time(data):
    wl, none = build(data, drift="hotspot_objects"), build(data, drift="none").events
    ev, info = wl.events, wl.drift
    rect = info["rect"]
    assert rect[2] - rect[0] == pytest.approx(40.0) and rect[3] - rect[1] == pytest.approx(40.0)
    assert EXTENT[0] <= rect[0] and rect[2] <= EXTENT[2] and EXTENT[1] <= rect[1] and rect[3] <= EXTENT[3]
    objs = np.flatnonzero(ev.kind == OBJECT)
    shares = [hot_share(ev, q, rect) for q in quarters(objs, info["start_event"], len(ev))]
    base = hot_share(none, objs[objs >= info["start_event"]], rect)
    assert all(b > a for a, b in pairwise(shares)), shares
    # the ramp ends at hotspot_fraction: the last quarter has about 0.6 * 7/8 relocated
    assert shares[-1] > base + 0.35 and shares[0] < base + 0.25, (base, shares)
    real_object_check(ev, objs[objs >= info["start_event"]], data[0])
    q = np.flatnonzero(ev.kind != OBJECT)
    same_rows(ev, none, q)  # queries untouched


def test_hotspot_queries_concentrate_into_one_region_over_time(data):
    wl = build(data, drift="hotspot_queries", profile="q1")
    none = build(data, drift="none", profile="q1").events
    ev, info = wl.events, wl.drift
    ins = np.flatnonzero(ev.kind == INSERT)
    shares = [hot_share(ev, q, info["rect"]) for q in quarters(ins, info["start_event"], len(ev))]
    base = hot_share(none, ins[ins >= info["start_event"]], info["rect"])
    assert shares[-1] > shares[0] + 0.2 and shares[-1] > base + 0.3, (base, shares)
    # still centred on real objects, keywords from that object's terms
    real_object_check(ev, ins[ins >= info["start_event"]], data[0], subset=True)
    same_rows(ev, none, np.flatnonzero(ev.kind == OBJECT))  # objects untouched


def test_q3_switches_stop_at_drift_end(data):
    """The regions switch every drift_every insertions from the drift start, and none from
    drift_end on: the stream ends on a stretch without a switch."""
    every = build(data, drift="q3_switch")
    early = build(data, drift="q3_switch", drift_end=0.5)
    n_meas = len(early.events) - early.warmup
    assert len(early.drift["points"]) < len(every.drift["points"])
    assert all(p < early.warmup + 0.5 * n_meas for p in early.drift["points"])
    assert early.drift["points"] == every.drift["points"][: len(early.drift["points"])]


def test_a_ramp_that_ends_early_holds_and_a_burst_stops(data):
    """SSTD's staging (sstd.txt l.378-384): objects ramp into the hot square until drift_end and
    keep that share after it; a burst registers every query there until drift_end and none after,
    while the queries it registered stay live."""
    held = build(data, drift="hotspot_objects", drift_start=0.1, drift_end=0.5, hotspot_fraction=0.9)
    ev, info = held.events, held.drift
    objs = np.flatnonzero(ev.kind == OBJECT)
    n_meas = len(ev) - held.warmup
    late = objs[objs >= held.warmup + int(0.6 * n_meas)]  # after drift_end: the share holds at 0.9
    first, second = late[: len(late) // 2], late[len(late) // 2:]
    assert hot_share(ev, first, info["rect"]) > 0.85 and hot_share(ev, second, info["rect"]) > 0.85
    burst = build(data, drift="hotspot_queries", profile="q1", drift_start=0.1, drift_end=0.5,
                  hotspot_shape="burst", hotspot_fraction=1.0)
    none = build(data, drift="none", profile="q1").events
    ev, info = burst.events, burst.drift
    ins = np.flatnonzero(ev.kind == INSERT)
    at = (ins - burst.warmup) / (len(ev) - burst.warmup)
    inside = ins[(at >= 0.12) & (at < 0.48)]
    after = ins[at >= 0.52]
    assert hot_share(ev, inside, info["rect"]) == 1.0  # every query of the burst is centred there ...
    assert len(inside) and hot_share(ev, after, info["rect"]) == pytest.approx(hot_share(none, after, info["rect"]))
    same_rows(ev, none, after)  # ... and none after it: the stream goes on as undrifted
    assert info["moved_queries"] == int(((at >= 0.1) & (at < 0.5)).sum())


@pytest.mark.parametrize("fraction", (1.0, 0.5))
def test_scale_moves_points_and_rectangles_by_the_factor(data, fraction):
    wl = build(data, drift="scale", scale_factor=0.4, scale_fraction=fraction)
    none = build(data, drift="none").events
    ev, start = wl.events, wl.drift["start_event"]
    after = np.arange(start, len(ev))
    for kind, names in ((OBJECT, ("x", "y")), (INSERT, ("x", "y", "xmin", "ymin", "xmax", "ymax"))):
        rows = after[ev.kind[after] == kind]
        moved = np.ones(len(rows), bool)
        for name in names:
            lo = EXTENT[0] if name.startswith("x") else EXTENT[1]
            scaled = np.isclose(ev.cols[name][rows], lo + 0.4 * (none.cols[name][rows] - lo))
            kept = ev.cols[name][rows] == none.cols[name][rows]
            assert (scaled | kept).all(), name
            moved &= scaled
        assert moved.mean() == pytest.approx(fraction, abs=0.08), kind
        # moved points lie in the scaled extent
        assert (ev.x[rows[moved]] <= 0.4 * EXTENT[2] + 1e-9).all() and (ev.y[rows[moved]] <= 0.4 * EXTENT[3] + 1e-9).all()
        same_terms = terms_of(ev, rows)[1], terms_of(none, rows)[1]
        np.testing.assert_array_equal(*same_terms)  # text unchanged


def test_hotspot_seed_fixes_the_region_across_seeds(data):
    a = build(data, seed=1, drift="hotspot_objects", hotspot_seed=5).drift["rect"]
    b = build(data, seed=2, drift="hotspot_objects", hotspot_seed=5).drift["rect"]
    c = build(data, seed=2, drift="hotspot_objects").drift["rect"]
    assert a == b and a != c


@pytest.mark.parametrize("field,value", [
    ("drift", "sideways"), ("drift_start", 1.0), ("drift_start", -0.1), ("drift_every", 0),
    ("drift_fraction", 0.0), ("drift_fraction", 1.5), ("hotspot_fraction", 1.2),
    ("hotspot_region_km", 0.0), ("scale_factor", 0.0), ("scale_factor", 1.5), ("scale_fraction", -0.1),
    ("drift_end", 0.1), ("drift_end", 1.5), ("hotspot_shape", "square")])
def test_bad_knobs_are_rejected_naming_the_field(data, field, value):
    with pytest.raises(ValueError) as err:
        build(data, drift="scale" if field != "drift" else value, **({field: value} if field != "drift" else {}))
    msg = str(err.value)
    assert f"workload.{field}={value!r}" in msg and "allowed" in msg


def test_q3_switch_needs_the_q3_profile(data):
    with pytest.raises(ValueError, match=r"workload\.drift='q3_switch'.*profile q3"):
        build(data, drift="q3_switch", profile="q1")


@pytest.mark.parametrize("name,drift", [("sts_q3_drift", "q3_switch"), ("hotspot_objects", "hotspot_objects"),
                                        ("hotspot_queries", "hotspot_queries"), ("scale_drift", "scale"),
                                        ("sstd_hot_objects", "hotspot_objects"),
                                        ("sstd_hot_queries", "hotspot_queries")])
def test_workload_yaml_composes_and_builds(data, name, drift):
    from hydra import compose, initialize_config_dir

    from harness.run.config import register_configs, validate
    from harness.report.results import PROJECT_ROOT

    register_configs()
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        cfg = compose(config_name="config", overrides=[f"workload={name}", "strategy=grid"])
    validate(cfg)
    w = cfg.workload
    assert (w.name, w.drift) == (name, drift)
    assert w.updates >= 2 * w.queries > 0  # the measured part turns the live set over at least once
    w.queries, w.updates = 200, 2000
    objs, df, ext = data
    wl = build_workload(objs, df, ext, w, 3)
    assert wl.drift["kind"] == drift and wl.drift["start_event"] > wl.warmup


def test_a_snapshot_workload_takes_the_object_hot_spot_and_nothing_else(data):
    """SSTD Fig. 14(c): objects pile into the hot square after the drift start while the snapshot
    queries stay as drawn; the warm-up and the queries equal the undrifted stream's; other drifts are
    refused, naming the protocol."""
    from datasets.workloads.snapshot import build_snapshot_workload
    from harness.core.events import SNAPSHOT

    objs, df, ext = data
    cfg = WorkloadConfig(name="mix", family="range", protocol="mix", types=["crq", "srq"], queries=400, batch=50,
                         preload_objects=600, sample_queries=20, objects_per_s=200, area_fraction=0.01,
                         hotspot_region_km=40.0, hotspot_fraction=0.8, drift_start=0.25)
    flat = build_snapshot_workload(objs, df, ext, cfg, 3)
    hot = build_snapshot_workload(objs, df, ext, replace(cfg, drift="hotspot_objects"), 3)
    a, b = flat.events, hot.events
    assert hot.warmup == flat.warmup and np.array_equal(a.kind, b.kind) and np.array_equal(a.id, b.id)
    queries = np.flatnonzero(a.kind != OBJECT)
    same_rows(a, b, queries)
    same_rows(a, b, np.arange(hot.warmup))
    x0, y0, x1, y1 = hot.drift["rect"]
    inside = lambda ev, rows: ((ev.x[rows] >= x0) & (ev.x[rows] <= x1) & (ev.y[rows] >= y0)  # noqa: E731
                               & (ev.y[rows] <= y1)).mean()
    late = np.flatnonzero(b.kind == OBJECT)
    late = late[late >= hot.warmup + 3 * (len(b) - hot.warmup) // 4]
    assert inside(b, late) > 0.5 > 2 * inside(a, late)
    assert (b.kind[hot.warmup:] == SNAPSHOT).sum() == 400
    with pytest.raises(ValueError, match=r"workload.drift='scale' is invalid; allowed: none, hotspot_objects "
                                         r"\(protocol mix\)"):
        build_snapshot_workload(objs, df, ext, replace(cfg, drift="scale"), 3)
