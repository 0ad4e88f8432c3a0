"""R-tree partitioning (strategies/ps2stream/rtree.py): STR tiles cover the plane without overlap, objects go
to the one tile holding them, queries to every tile they overlap, leaf loads are the sample's, and
workers are balanced within the list-scheduling bound. The routing R-tree over the tiles
(strategies/routers/rtree.py) is a well-formed STR-packed tree, routes exactly as the tiles do,
and its probes per routed object grow with the number of partitions (Tornado Fig. 9(a),
tornado.txt l.370)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.events import INSERT, OBJECT
from strategies.base import FitContext, route_stream
from strategies.load import unit_load
from strategies.ps2stream.rtree import RTreeStrategy, str_tiles
from strategies.routers.rtree import build_rtree, route_points_str, route_rects_str, tile_regions
from tests.streams import random_stream

EXTENT = (0.0, 0.0, 100.0, 100.0)


def fit(ev, cut, n_workers, **params):
    df = np.bincount(ev.values, minlength=12).astype(float)
    return RTreeStrategy().fit(ev.take(np.arange(cut)), n_workers, RTreeStrategy.make_params(params),
                               FitContext(EXTENT, df))


def in_tile(x, y, t):
    return (x >= t[..., 0]) & (x < t[..., 2]) & (y >= t[..., 1]) & (y < t[..., 3])


@pytest.mark.parametrize("n,leaves", [(1, 4), (7, 4), (500, 40), (2000, 128)])
def test_tiles_cover_the_extent_without_overlap(n, leaves):
    rng = np.random.default_rng(n)
    px = np.round(rng.uniform(0, 100, n), 1)  # rounding makes ties at the cuts
    py = np.round(rng.normal(50, 15, n), 1)
    tiles = str_tiles(px, py, leaves)
    reg = tile_regions(*tiles)
    assert len(reg) == tiles[3][-1] and len(reg) <= max(leaves, 1) + int(np.ceil(np.sqrt(leaves))) + 1
    clipped = np.column_stack([np.clip(reg[:, 0], 0, 100), np.clip(reg[:, 1], 0, 100),
                               np.clip(reg[:, 2], 0, 100), np.clip(reg[:, 3], 0, 100)])
    area = (clipped[:, 2] - clipped[:, 0]) * (clipped[:, 3] - clipped[:, 1])
    assert area.sum() == pytest.approx(100 * 100)  # the tiles cover the extent ...
    w = np.minimum(clipped[:, None, 2], clipped[None, :, 2]) - np.maximum(clipped[:, None, 0], clipped[None, :, 0])
    h = np.minimum(clipped[:, None, 3], clipped[None, :, 3]) - np.maximum(clipped[:, None, 1], clipped[None, :, 1])
    inter = np.clip(w, 0, None) * np.clip(h, 0, None)
    np.fill_diagonal(inter, 0)
    assert inter.max() == 0  # ... and never overlap
    # every point, inside the extent or not, lies in exactly the tile it is routed to
    qx = np.concatenate([px, rng.uniform(-50, 150, 500)])
    qy = np.concatenate([py, rng.uniform(-50, 150, 500)])
    ident = np.arange(len(reg), dtype=np.int64)
    leaf = route_points_str(np.arange(len(qx), dtype=np.int64), qx, qy, *tiles, ident)
    holders = in_tile(qx[:, None], qy[:, None], reg[None])
    assert (holders.sum(1) == 1).all()
    assert (holders[np.arange(len(qx)), leaf]).all()


def test_str_leaves_hold_at_most_capacity_points():
    rng = np.random.default_rng(3)
    px, py = rng.uniform(0, 100, 1000), rng.uniform(0, 100, 1000)
    tiles = str_tiles(px, py, 50)
    leaf = route_points_str(np.arange(1000, dtype=np.int64), px, py, *tiles, np.arange(tiles[3][-1], dtype=np.int64))
    assert np.bincount(leaf).max() <= int(np.ceil(1000 / 50))


@pytest.mark.parametrize("seed,n_workers", [(0, 2), (1, 3), (2, 8)])
def test_queries_reach_every_overlapped_tile_and_loads_follow_the_sample(seed, n_workers):
    ev = random_stream(seed, n_objects=300, n_queries=120, delete_fraction=0.0)
    router = fit(ev, len(ev), n_workers, leaves_per_worker=4)
    reg = router.regions()
    obj = np.flatnonzero(ev.kind == OBJECT)
    qs = np.flatnonzero(ev.kind == INSERT)
    ident = np.arange(len(reg), dtype=np.int64)
    r, leaf = route_rects_str(qs, ev.xmin, ev.ymin, ev.xmax, ev.ymax, *router._tiles(), ident, len(reg))
    for q in qs:  # closed rectangle vs half-open tile
        want = np.flatnonzero((ev.xmin[q] < reg[:, 2]) & (ev.xmax[q] >= reg[:, 0]) & (ev.ymin[q] < reg[:, 3])
                              & (ev.ymax[q] >= reg[:, 1]))
        np.testing.assert_array_equal(np.sort(leaf[r == q]), want)
    n_o = in_tile(ev.x[obj][:, None], ev.y[obj][:, None], reg[None]).sum(0)
    n_q = np.bincount(leaf, minlength=len(reg))
    np.testing.assert_allclose(router.leaf_load, unit_load(n_o, n_q))
    # LPT (list scheduling) bound: no worker exceeds the mean by more than the largest leaf
    loads = np.bincount(router.leaf_worker, weights=router.leaf_load, minlength=n_workers)
    assert loads.max() <= router.leaf_load.sum() / n_workers + router.leaf_load.max() + 1e-9
    assert len(np.unique(router.leaf_worker)) == min(n_workers, len(reg))


def test_routing_reaches_one_worker_per_object_and_is_deterministic():
    ev = random_stream(9, n_objects=200, n_queries=80)
    a, b = fit(ev, len(ev) // 3, 5), fit(ev, len(ev) // 3, 5)
    assert a.describe() == b.describe()
    ra, wa = route_stream(a, ev)
    rb, wb = route_stream(b, ev)
    np.testing.assert_array_equal(ra, rb)
    np.testing.assert_array_equal(wa, wb)
    obj = np.flatnonzero(ev.kind == OBJECT)
    assert (np.bincount(ra, minlength=len(ev))[obj] == 1).all()


def test_empty_sample_gives_one_tile_over_everything():
    ev = random_stream(1, n_objects=50, n_queries=20)
    router = fit(ev, 0, 4)
    assert len(router.leaf_worker) == 1
    rows, workers = route_stream(router, ev)
    assert np.array_equal(np.unique(rows), np.arange(len(ev))) and (workers == router.leaf_worker[0]).all()


def test_bin_tables_agree_with_the_binary_search_everywhere():
    ev = random_stream(4, n_objects=400, n_queries=100)
    router = fit(ev, len(ev), 6, leaves_per_worker=8, routing="tiles")
    rng = np.random.default_rng(0)
    xc, yc = router.xcuts, router.ycuts
    edges_x = router.bins[0] + np.arange(0, 4097, 7) / router.bins[1]
    xs = np.concatenate([xc, np.nextafter(xc, -np.inf), np.nextafter(xc, np.inf), edges_x, rng.uniform(-20, 120, 3000)])
    ys = np.concatenate([yc, np.nextafter(yc, -np.inf), np.nextafter(yc, np.inf), rng.uniform(-20, 120, 3000)])
    gx = np.repeat(xs, 1 + len(ys) // len(xs))[: len(ys)]
    rng.shuffle(gx)
    ident = np.arange(len(router.leaf_worker), dtype=np.int64)
    exact = route_points_str(np.arange(len(ys), dtype=np.int64), gx, ys, *router._tiles(), ident)
    np.testing.assert_array_equal(router.leaves_of_points(gx, ys), exact)
    assert (router.tx >= 0).mean() > 0.9  # most bins resolve without a search


@pytest.mark.parametrize("n_leaves,capacity", [(1, 16), (5, 4), (64, 16), (300, 16), (700, 8)])
def test_rtree_is_a_well_formed_str_tree(n_leaves, capacity):
    rng = np.random.default_rng(n_leaves)
    tiles = str_tiles(rng.uniform(0, 100, 20 * n_leaves), rng.normal(50, 15, 20 * n_leaves), n_leaves)
    reg = tile_regions(*tiles)
    t = build_rtree(reg, EXTENT, capacity)
    n_nodes, n_int = len(t["child_lo"]), int(t["n_internal"])
    fan = t["child_hi"] - t["child_lo"]
    assert (fan >= 1).all() and (fan <= capacity).all()
    # every leaf is one entry of one leaf node, every node but the root one child of one parent
    np.testing.assert_array_equal(np.sort(t["entry_leaf"]), np.arange(len(reg)))
    np.testing.assert_array_equal(t["entry_mbr"], reg[t["entry_leaf"]])
    kids = np.concatenate([np.arange(lo, hi) for lo, hi in zip(t["child_lo"][:n_int], t["child_hi"][:n_int])]
                          + [np.zeros(0, np.int64)])
    np.testing.assert_array_equal(np.sort(kids), np.arange(1, n_nodes))
    ents = np.concatenate([np.arange(lo, hi) for lo, hi in zip(t["child_lo"][n_int:], t["child_hi"][n_int:])])
    np.testing.assert_array_equal(np.sort(ents), np.arange(len(reg)))
    # a node's rectangle is the union of its children's
    for k in range(n_nodes):
        child = (t["node_mbr"] if k < n_int else t["entry_mbr"])[t["child_lo"][k]:t["child_hi"][k]]
        np.testing.assert_array_equal(t["node_mbr"][k], [child[:, 0].min(), child[:, 1].min(),
                                                         child[:, 2].max(), child[:, 3].max()])
    # height: the fewest levels of `capacity` entries that hold every leaf
    assert int(t["height"]) == max(1, int(np.ceil(np.log(len(reg)) / np.log(capacity) - 1e-9)))


@pytest.mark.parametrize("seed,n_workers,lpw", [(0, 3, 16), (1, 8, 16), (2, 25, 16), (5, 4, 64)])
def test_rtree_routing_equals_the_tiles(seed, n_workers, lpw):
    """The hierarchy changes how a leaf is found, never which: the same copies as the tiles'
    binary searches, every point in the one tile holding it, every rectangle to every tile it meets."""
    ev = random_stream(seed, n_objects=600, n_queries=200, delete_fraction=0.1)
    a = fit(ev, len(ev) // 2, n_workers, leaves_per_worker=lpw)
    b = fit(ev, len(ev) // 2, n_workers, leaves_per_worker=lpw, routing="tiles")
    assert a.routing == "rtree" and b.routing == "tiles" and int(a.tree["height"]) >= 2
    ra, wa = route_stream(a, ev)
    rb, wb = route_stream(b, ev)
    assert sorted(zip(ra.tolist(), wa.tolist())) == sorted(zip(rb.tolist(), wb.tolist()))
    reg = a.regions()
    rng = np.random.default_rng(seed)
    qx, qy = rng.uniform(-20, 120, 2000), rng.uniform(-20, 120, 2000)
    qx[:len(a.xcuts)] = a.xcuts  # on the cuts: the upper tile
    holders = in_tile(qx[:, None], qy[:, None], reg[None])
    np.testing.assert_array_equal(a.leaves_of_points(qx, qy), holders.argmax(1))


def test_fit_rejects_bad_routing_parameters():
    ev = random_stream(1, n_objects=50, n_queries=20)
    with pytest.raises(ValueError, match="routing='grid'.*allowed"):
        fit(ev, len(ev), 2, routing="grid")
    with pytest.raises(ValueError, match="node_capacity=1"):
        fit(ev, len(ev), 2, node_capacity=1)


def test_rtree_probes_per_object_grow_with_the_partitions():
    """Tornado Fig. 9(a) (tornado.txt l.370): "as the number of partitions increases, the routing
    time of the data points increases for the R-tree". Over the same stream, 4 -> 16 -> 64 -> 256
    -> 1024 partitions (STR leaves, one worker so every leaf is a partition), the R-tree's entry
    rectangles tested per routed object rise at every step, and its nodes visited rise once a
    partition count needs another level (fan-out 16)."""
    ev = random_stream(3, n_objects=3000, n_queries=300, delete_fraction=0.0)
    stats = []
    for parts in (4, 16, 64, 256, 1024):
        router = fit(ev, len(ev), 1, leaves_per_worker=parts)
        assert len(router.leaf_worker) >= parts * 0.8
        st = router.probe_stats(ev)
        assert st["objects"] == int((ev.kind == OBJECT).sum())
        assert router.describe()["rtree"]["sample_probes"] == st  # the fit's report (fit on the same stream)
        stats.append(st)
    tests = [s["object_tests_mean"] for s in stats]
    nodes = [s["object_nodes_mean"] for s in stats]
    assert all(b > a for a, b in zip(tests, tests[1:])), tests
    assert all(b >= a for a, b in zip(nodes, nodes[1:])), nodes
    assert nodes[0] == 1.0 and nodes[2] > 1.0 and nodes[4] > nodes[2], nodes
