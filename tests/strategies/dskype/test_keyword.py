"""DSkype's keyword-based (Alg. 4, Eqs. 16-17) and hashing-based (Eq. 14) distributions: the runs
cover the vocabulary in Skype order, one per worker, and balance Eq. 16's cost better than equal
widths (costs recomputed here by brute force over the sets); Eq. 14's routing; exact results end
to end on top-k and range streams."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.events import INSERT, OBJECT, OR, TOPK, Events
from harness.engine.simulate import simulate
from strategies import registry
from strategies.base import FitContext, route_stream
from strategies.dskype.hash_mod import ModHashRouter
from strategies.dskype.keyword import DSkypeKeywordStrategy
from strategies.routers.termmap import PartitionedTermRouter
from tests.streams import random_stream, random_topk_stream


def skewed_sample(vocab: int = 40, n_objects: int = 400, n_subs: int = 150, seed: int = 3):
    """Objects and top-k subscriptions with Zipf-like terms (term 0 the most frequent, as in the
    harness): equal-width runs put most of the cost on the most frequent terms' run."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocab + 1) ** 1.2
    p /= p.sum()
    sets = [sorted(set(rng.choice(vocab, int(rng.integers(1, 5)), p=p).tolist())) for _ in range(n_objects + n_subs)]
    n = len(sets)
    kind = np.array([OBJECT] * n_objects + [INSERT] * n_subs, np.int8)
    cols = {"seq": np.arange(n, dtype=np.int64), "ts": np.arange(n, dtype=np.float64), "kind": kind,
            "family": np.where(kind == OBJECT, -1, TOPK).astype(np.int8),
            "id": np.r_[np.arange(n_objects), np.arange(n_subs)].astype(np.int64),
            "x": rng.uniform(0, 100, n), "y": rng.uniform(0, 100, n),
            "op": np.where(kind == OBJECT, 0, OR).astype(np.int8), "k": np.full(n, 3, np.int32),
            "alpha": np.full(n, 0.5, np.float32)}
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum([len(s) for s in sets], out=offsets[1:])
    ev = Events(cols, offsets, np.array([t for s in sets for t in s], np.int32))
    return ev, [set(s) for s in sets[:n_objects]], [set(s) for s in sets[n_objects:]]


def brute_costs(runs: list[set], objs: list[set], subs: list[set]) -> np.ndarray:
    """Eq. 16 by definition: subscriptions meeting W times the fraction of objects meeting W."""
    return np.array([sum(bool(s & w) for s in subs) * sum(bool(o & w) for o in objs) / len(objs) for w in runs])


def brute_var(costs: np.ndarray) -> float:
    return float(((costs - costs.mean()) ** 2).mean())


def fit_keyword(sample: Events, n_workers: int, vocab: int) -> PartitionedTermRouter:
    return DSkypeKeywordStrategy().fit(sample, n_workers, DSkypeKeywordStrategy.make_params({}),
                                       FitContext((0.0, 0.0, 100.0, 100.0), np.ones(vocab)))


def worker_runs(term_worker: np.ndarray, n_workers: int) -> list[set]:
    return [set(np.flatnonzero(term_worker == w).tolist()) for w in range(n_workers)]


@pytest.mark.parametrize("n_workers", [2, 4, 5])
def test_runs_are_consecutive_in_skype_order_and_balance_better_than_equal_widths(n_workers):
    vocab = 48  # terms 40..47 never occur in the sample; they still need a run
    sample, objs, subs = skewed_sample()
    router = fit_keyword(sample, n_workers, vocab)
    tw = router.term_worker
    assert len(tw) == vocab
    # descending term id = Skype order: worker 0 holds the rarest run, each run consecutive
    in_skype_order = tw[::-1]
    assert (np.diff(in_skype_order) >= 0).all() and set(tw.tolist()) == set(range(n_workers))
    runs = worker_runs(tw, n_workers)
    info = router.describe()
    assert info["runs"] == [[max(w), min(w)] for w in runs]
    costs = brute_costs(runs, objs, subs)
    np.testing.assert_allclose(info["run_cost"], costs)
    assert info["cost_var"] == pytest.approx(brute_var(costs))
    equal = [set(a.tolist()) for a in np.array_split(np.arange(vocab)[::-1], n_workers)]
    assert brute_var(costs) < 0.5 * brute_var(brute_costs(equal, objs, subs))


def test_the_first_cut_is_the_best_of_all_cuts():
    """Two workers: one bisection, which must minimise |C(W1) - C(W2)| over every cut."""
    vocab = 40
    sample, objs, subs = skewed_sample(vocab)
    runs = worker_runs(fit_keyword(sample, 2, vocab).term_worker, 2)
    order = list(range(vocab))[::-1]
    gaps = [abs(np.subtract(*brute_costs([set(order[:c]), set(order[c:])], objs, subs))) for c in range(1, vocab)]
    got = abs(np.subtract(*brute_costs(runs, objs, subs)))
    assert got == pytest.approx(min(gaps))


def test_more_workers_than_keywords_leaves_the_last_workers_empty():
    sample, _, _ = skewed_sample(vocab=3, n_objects=30, n_subs=10)
    router = fit_keyword(sample, 5, 3)
    assert router.term_worker.tolist() == [2, 1, 0]
    assert router.describe()["runs"] == [[2, 2], [1, 1], [0, 0], [], []]


def test_bad_worker_count_is_named():
    sample, _, _ = skewed_sample()
    with pytest.raises(ValueError, match=r"n_workers=0 is invalid; allowed: an integer >= 1"):
        fit_keyword(sample, 0, 40)
    with pytest.raises(ValueError, match=r"n_workers=0 is invalid"):
        registry.get("dskype_hash")().fit(sample, 0, None, FitContext((0.0, 0.0, 1.0, 1.0), np.ones(3)))


@pytest.mark.parametrize("n_workers", [1, 3, 7])
def test_dskype_hash_sends_query_i_to_worker_i_mod_n_and_objects_to_all(n_workers):
    cls = registry.get("dskype_hash")
    for ev in (random_topk_stream(2), random_stream(2)):
        router = cls().fit(ev, n_workers, cls.make_params({}), FitContext((0.0, 0.0, 100.0, 100.0), np.ones(12)))
        assert isinstance(router, ModHashRouter) and router.families == {"range", "knn", "topk", "frequent_terms"}
        rows, workers = route_stream(router, ev)
        is_obj = ev.kind[rows] == OBJECT
        q_rows, q_workers = rows[~is_obj], workers[~is_obj]
        assert np.array_equal(np.sort(q_rows), np.flatnonzero(ev.kind != OBJECT))  # each query once
        np.testing.assert_array_equal(q_workers, ev.id[q_rows] % n_workers)
        per_object = np.bincount(rows[is_obj], minlength=len(ev))[ev.kind == OBJECT]
        assert (per_object == n_workers).all()
        assert set(workers[is_obj].tolist()) == set(range(n_workers))


@pytest.mark.parametrize("strategy", ["dskype_hash", "dskype_keyword"])
@pytest.mark.parametrize("n_workers", [2, 3, 8])
def test_top_k_and_range_results_equal_the_oracle(strategy, n_workers):
    topk = random_topk_stream(1)
    res = simulate(topk, 15, strategy, n_workers, epoch_events=len(topk) // 4)
    assert len(res.epochs) >= 2 and res.exact, (res.digest, res.oracle_digest)
    rng = random_stream(1)
    res = simulate(rng, 30, strategy, n_workers, epoch_events=len(rng) // 4)
    assert len(res.epochs) >= 2 and res.exact, (res.digest, res.oracle_digest)
