"""DSkype's location-based distribution: the fitted kd-tree balances Eq. 15 cost, subscriptions
have one owner and objects go everywhere, and the results equal the oracle for top-k and range."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.events import INSERT, OBJECT, RANGE, TOPK
from harness.engine.simulate import simulate
from strategies import registry
from strategies.base import FitContext, route_stream
from strategies.dskype.location import DSkypeLocationRouter, DSkypeLocationStrategy
from tests.streams import events_from_lists, random_stream, random_topk_stream

EXTENT = (0.0, 0.0, 100.0, 100.0)
SMOOTHING = 1.0


def _skewed_sample(seed=3, n_subs=400, n_objs=2000):
    """Subscriptions uniform over the square; objects crowd the left tenth, so halving the
    subscriptions (a median split) leaves nearly every message, hence nearly all cost, on one side."""
    rng = np.random.default_rng(seed)
    subs = rng.uniform(0, 100, (n_subs, 2))
    objs = np.column_stack([rng.uniform(0, 10, n_objs), rng.uniform(0, 100, n_objs)])
    objs[: n_objs // 10] = rng.uniform(0, 100, (n_objs // 10, 2))  # some spread everywhere
    xy = np.vstack([subs, objs])
    kinds = [INSERT] * n_subs + [OBJECT] * n_objs
    rects = [(x - 1, y - 1, x + 1, y + 1) for x, y in subs] + [(np.nan,) * 4] * n_objs
    ev = events_from_lists(kinds, range(len(kinds)), xy, rects, [[0]] * len(kinds), [0] * len(kinds))
    return ev, subs, objs


def _fit(ev, n_workers, params=None):
    cls = DSkypeLocationStrategy
    return cls().fit(ev, n_workers, cls.make_params(params), FitContext(EXTENT, np.ones(4)))


def _leaf_costs(boxes, subs, objs):
    """Eq. 15 per box, computed here from the points: N = subscriptions in the box (half-open,
    [lo, hi) except at the extent's far edge), p = smoothed share of the objects."""
    area = (EXTENT[2] - EXTENT[0]) * (EXTENT[3] - EXTENT[1])

    def inside(p, b):
        ok_x = (p[:, 0] >= b[0]) & ((p[:, 0] < b[2]) | (b[2] == EXTENT[2]))
        ok_y = (p[:, 1] >= b[1]) & ((p[:, 1] < b[3]) | (b[3] == EXTENT[3]))
        return ok_x & ok_y

    out = []
    for b in boxes:
        mass = (b[2] - b[0]) * (b[3] - b[1]) / area
        p = (inside(objs, b).sum() + SMOOTHING * mass) / (len(objs) + SMOOTHING)
        out.append(inside(subs, b).sum() * p)
    return np.array(out)


def _median_boxes(subs, n_leaves):
    """The plain kd-tree of the same depth: split the subscriptions at their median, x then y."""
    boxes = [(list(EXTENT), subs)]
    depth = 0
    while len(boxes) < n_leaves:
        nxt = []
        for box, pts in boxes:
            val = float(np.median(pts[:, depth % 2]))
            lo, hi = list(box), list(box)
            lo[depth % 2 + 2] = val
            hi[depth % 2] = val
            nxt += [(lo, pts[pts[:, depth % 2] < val]), (hi, pts[pts[:, depth % 2] >= val])]
        boxes, depth = nxt, depth + 1
    return [b for b, _ in boxes]


@pytest.mark.parametrize("n_workers", [2, 4])
def test_the_fitted_tree_balances_eq15_cost_better_than_a_median_split(n_workers):
    ev, subs, objs = _skewed_sample()
    desc = _fit(ev, n_workers).describe()
    boxes = [leaf["region"] for leaf in desc["leaves"]]
    fitted = _leaf_costs(boxes, subs, objs)
    np.testing.assert_allclose(fitted, [leaf["cost"] for leaf in desc["leaves"]], rtol=1e-9)
    assert sorted(leaf["worker"] for leaf in desc["leaves"]) == list(range(n_workers))
    median = _leaf_costs(_median_boxes(subs, n_workers), subs, objs)
    assert fitted.sum() > 0 and median.sum() > 0
    # the heaviest worker carries clearly less than under the median split
    assert fitted.max() / fitted.mean() < 0.8 * (median.max() / median.mean())


def test_three_workers_split_the_budget_two_to_one_at_the_per_leaf_balance():
    ev, subs, objs = _skewed_sample(seed=5)
    spread = {}
    for e in (1, 2):
        router = _fit(ev, 3, {"budget_exponent": e})
        left, right = router.left[0], router.right[0]
        assert router.split_dim[left] >= 0 and router.split_dim[right] < 0  # 2 leaves | 1 leaf
        # the root balances C1/2^e against C2/1^e (costs recomputed here from the children's boxes)
        c1, c2 = _leaf_costs([router.regions[left], router.regions[right]], subs, objs)
        assert abs(c1 / 2**e - c2) < 0.05 * (c1 / 2**e + c2)
        costs = _leaf_costs([leaf["region"] for leaf in router.describe()["leaves"]], subs, objs)
        spread[e] = costs.max() / costs.mean()
    # Eq. 15 is a product, so a child of n leaves costs about n^2 per leaf: e = 2 balances the leaves
    assert spread[2] < 1.15 < spread[1]


def test_without_sample_objects_smoothing_makes_p_the_area_share_and_the_tree_still_balances():
    ev, subs, _ = _skewed_sample()
    no_objects = ev.take(np.flatnonzero(ev.kind == INSERT))
    leaves = _fit(no_objects, 4).describe()["leaves"]
    costs = _leaf_costs([leaf["region"] for leaf in leaves], subs, np.zeros((0, 2)))
    np.testing.assert_allclose(costs, [leaf["cost"] for leaf in leaves], rtol=1e-9)
    assert costs.min() > 0 and costs.max() / costs.mean() < 1.2  # unsmoothed, every split would cost 0


def test_a_sample_without_subscriptions_or_objects_still_gives_one_leaf_per_worker():
    ev = random_stream(1, n_objects=0, n_queries=0)
    router = _fit(ev, 5)
    assert sorted(leaf["worker"] for leaf in router.describe()["leaves"]) == list(range(5))


@pytest.mark.parametrize("n_workers", [1, 3, 8])
def test_each_subscription_goes_to_the_one_leaf_holding_its_point_and_objects_everywhere(n_workers):
    ev = random_stream(4, n_objects=80, n_queries=40)  # deletes, and objects a little outside the square
    router = _fit(ev.take(np.arange(60)), n_workers)
    rows, workers = route_stream(router, ev)
    is_obj = ev.kind == OBJECT
    assert np.array_equal(np.bincount(rows, minlength=len(ev)), np.where(is_obj, n_workers, 1))
    obj_pairs = is_obj[rows]
    assert len(set(zip(rows[obj_pairs].tolist(), workers[obj_pairs].tolist()))) == is_obj.sum() * n_workers
    # the owner is the leaf whose box holds the (clamped) point
    q_rows, q_workers = rows[~obj_pairs], workers[~obj_pairs]
    px = np.clip(ev.x[q_rows], EXTENT[0], EXTENT[2])
    py = np.clip(ev.y[q_rows], EXTENT[1], EXTENT[3])
    for leaf in router.describe()["leaves"]:
        b = leaf["region"]
        mine = ((px >= b[0]) & ((px < b[2]) | (b[2] == EXTENT[2])) & (py >= b[1]) & ((py < b[3]) | (b[3] == EXTENT[3])))
        assert (q_workers[mine] == leaf["worker"]).all()
    # a delete goes where its insert went
    owner = dict(zip(ev.id[q_rows][ev.kind[q_rows] == INSERT].tolist(), q_workers[ev.kind[q_rows] == INSERT].tolist()))
    dels = ev.kind[q_rows] != INSERT
    assert all(owner[q] == w for q, w in zip(ev.id[q_rows][dels].tolist(), q_workers[dels].tolist()))


def test_a_point_outside_the_extent_goes_to_the_nearest_leaf():
    ev, _, _ = _skewed_sample()
    router = _fit(ev, 4)
    far = router.leaf_of(np.array([-50.0, 500.0, 50.0]), np.array([-50.0, 500.0, 1e9]))
    near = router.leaf_of(np.array([0.0, 100.0, 50.0]), np.array([0.0, 100.0, 100.0]))
    assert np.array_equal(far, near)
    # subscriptions on the extent's left edge force a split there: a point left of the edge joins
    # them (clamped) rather than the empty strip left of the split
    xy = np.array([[0.0, 10.0 * i] for i in range(10)] + [[50.0, 50.0]] * 5)
    kinds = [INSERT] * 10 + [OBJECT] * 5
    edge = events_from_lists(kinds, range(15), xy, [(0, 0, 1, 1)] * 10 + [(np.nan,) * 4] * 5, [[0]] * 15, [0] * 15)
    router = _fit(edge, 2)
    assert router.split_dim[0] == 0 and router.split_val[0] == 0.0
    assert router.leaf_of(np.array([-5.0]), np.array([30.0]))[0] == router.leaf_of(np.array([0.0]), np.array([30.0]))[0]


def test_registered_with_its_families_and_bad_params_are_named():
    assert registry.get("dskype_location") is DSkypeLocationStrategy
    assert isinstance(_fit(random_stream(0), 2), DSkypeLocationRouter)
    assert _fit(random_stream(0), 2).families == {"range", "knn", "topk", "frequent_terms"}
    with pytest.raises(ValueError, match=r"smoothing=0 is invalid; allowed: a finite number > 0"):
        DSkypeLocationStrategy.make_params({"smoothing": 0})
    with pytest.raises(ValueError, match=r"budget_exponent=-1 is invalid; allowed: a finite number >= 0"):
        DSkypeLocationStrategy.make_params({"budget_exponent": -1})
    with pytest.raises(ValueError, match=r"n_workers=0 is invalid"):
        _fit(random_stream(0), 0)


@pytest.mark.parametrize("n_workers", [2, 3, 8])
@pytest.mark.parametrize("seed", [0, 1])
def test_top_k_results_equal_the_oracle(seed, n_workers):
    ev = random_topk_stream(seed)
    assert (ev.family[ev.kind != OBJECT] == TOPK).all()
    res = simulate(ev, 15, "dskype_location", n_workers, epoch_events=len(ev) // 4)
    assert len(res.epochs) >= 2
    assert res.exact, (res.digest, res.oracle_digest)


@pytest.mark.parametrize("n_workers", [2, 3, 8])
@pytest.mark.parametrize("seed", [0, 1])
def test_range_results_equal_the_oracle(seed, n_workers):
    ev = random_stream(seed)
    assert (ev.family[ev.kind != OBJECT] == RANGE).all()
    res = simulate(ev, 30, "dskype_location", n_workers, epoch_events=len(ev) // 4)
    assert len(res.epochs) >= 2
    assert res.exact, (res.digest, res.oracle_digest)
