"""The top-k oracle and the index on hand-made windows: Skype's Fig. 1, ties, refills, registration
against the window, deletion. Entries are checked as (query, object, trigger seq) triples."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.events import DELETE, INSERT, OBJECT, OR, TOPK, Events
from harness.engine.simulate import simulate
from harness.families import registry as families
from harness.families.topk.keys import entry_keys
from harness.families.topk.oracle import topk_oracle


def stream(rows, window):
    """rows: (kind, id, x, terms[, k, alpha]); objects get their expiry seq from `window`."""
    n = len(rows)
    kind = np.array([r[0] for r in rows], np.int8)
    obj = np.flatnonzero(kind == OBJECT)
    win = np.full(n, np.nan)
    win[obj[:max(len(obj) - window, 0)]] = obj[window:]
    win[kind != OBJECT] = window
    offsets = np.r_[0, np.cumsum([len(r[3]) for r in rows])].astype(np.int64)
    cols = {"seq": np.arange(n, dtype=np.int64), "ts": np.arange(n, dtype=np.float64), "kind": kind,
            "family": np.where(kind == OBJECT, -1, TOPK).astype(np.int8),
            "id": np.array([r[1] for r in rows], np.int64), "x": np.array([float(r[2]) for r in rows]),
            "y": np.zeros(n), "op": np.where(kind == OBJECT, 0, OR).astype(np.int8),
            "k": np.array([r[4] if len(r) > 4 else 0 for r in rows], np.int32),
            "alpha": np.array([r[5] if len(r) > 5 else 0.0 for r in rows], np.float32), "win": win}
    return Events(cols, offsets, np.array([t for r in rows for t in r[3]], np.int32))


def keys(*triples):
    q, o, t = (np.array(v, np.int64) for v in zip(*triples))
    return np.sort(entry_keys(q, o, t))


PIZZA, COFFEE, SHOES = 0, 1, 2
METHODS = families.get("topk").methods  # every index.topk.method: each one equals the oracle


def run(ev, warmup, workers, method):
    return simulate(ev, warmup, "hash", workers, epoch_events=1, index_params={"topk": {"method": method}})


def fig1():
    """Skype's Fig. 1 as a line: u1 wants coffee at 0, u2 shoes at 50, u3 pizza at 100 (k = 1); the
    window holds 4 coupons. e5 (pizza at 100) arrives as e1 (coffee at 0) expires."""
    return stream([
        (OBJECT, 1, 0, [COFFEE]), (OBJECT, 2, 50, [SHOES]), (OBJECT, 3, 30, [COFFEE]), (OBJECT, 4, 60, [PIZZA]),
        (INSERT, 1, 0, [COFFEE], 1, 0.5), (INSERT, 2, 50, [SHOES], 1, 0.5), (INSERT, 3, 100, [PIZZA], 1, 0.5),
        (OBJECT, 5, 100, [PIZZA]),
    ], window=4)


@pytest.mark.parametrize("method", METHODS)
def test_fig1_u1_refills_with_e3_u3_takes_e5_u2_keeps_e2(method):
    expected = keys((1, 1, 4), (2, 2, 5), (3, 4, 6),  # registrations against the window
                    (1, 3, 7), (3, 5, 7))  # at e5's arrival: u1's refill after e1 expires, u3's new best
    assert np.array_equal(np.sort(topk_oracle(fig1())), expected)
    for workers in (1, 2, 3):
        res = run(fig1(), 7, workers, method)
        assert res.exact and res.digest.startswith("5:"), (workers, res.digest)


@pytest.mark.parametrize("method", METHODS)
def test_a_tie_goes_to_the_newer_message_and_no_keyword_in_common_never_enters(method):
    ev = stream([(OBJECT, 1, 10, [COFFEE]), (INSERT, 7, 0, [COFFEE], 1, 0.5),
                 (OBJECT, 2, 10, [COFFEE]),  # the same score: the newer one wins (kScore <= Score)
                 (OBJECT, 3, 0, [SHOES]),  # at the subscription's own point, but no common keyword
                 (OBJECT, 4, 5, [COFFEE, SHOES])], window=10)
    assert np.array_equal(np.sort(topk_oracle(ev)), keys((7, 1, 1), (7, 2, 2), (7, 4, 4)))
    assert run(ev, 2, 2, method).exact


@pytest.mark.parametrize("method", METHODS)
def test_an_expiry_refills_from_the_window_and_a_deleted_query_gets_nothing(method):
    ev = stream([(OBJECT, 1, 0, [COFFEE]), (OBJECT, 2, 90, [COFFEE]), (INSERT, 1, 0, [COFFEE], 1, 0.9),
                 (INSERT, 2, 0, [COFFEE], 2, 0.9), (OBJECT, 3, 95, [PIZZA]),  # o1 expires: q1 refills o2
                 (DELETE, 2, 0, [COFFEE], 2, 0.9), (OBJECT, 4, 0, [COFFEE])], window=2)
    expected = keys((1, 1, 2), (2, 1, 3), (2, 2, 3), (1, 2, 4), (1, 4, 6))
    assert np.array_equal(np.sort(topk_oracle(ev)), expected)
    for workers in (1, 2):
        assert run(ev, 4, workers, method).exact


@pytest.mark.parametrize("in_order", [True, False])
def test_the_oracles_candidates_are_the_plain_filter(in_order):
    """The oracle gathers a subscription's candidates by bisecting each term's list when seqs and
    expiries ascend with the rows (oracle._candidates): the same set as the plain filter of the
    union (the messages sharing a term, in the window at some point of the life), ascending, each
    once; expiries out of order are checked one by one."""
    from harness.families.topk.oracle import _candidates

    rng = np.random.default_rng(7 + in_order)
    for _ in range(200):
        n, n_terms = int(rng.integers(1, 300)), int(rng.integers(1, 12))
        o_seq = np.cumsum(rng.integers(1, 4, n)).astype(np.int64)
        o_exp = o_seq + (rng.integers(1, 60) if in_order else rng.integers(1, 60, n))
        owner = np.repeat(np.arange(n), rng.integers(1, 4, n))
        term = rng.integers(0, n_terms, len(owner))
        keep = np.unique(owner * n_terms + term)  # a term once per message
        owner, term = keep // n_terms, keep % n_terms
        by_term = np.argsort(term, kind="stable")
        term_objs, term_off = owner[by_term].astype(np.int64), np.searchsorted(term[by_term], np.arange(n_terms + 1))
        terms = np.unique(rng.integers(0, n_terms, int(rng.integers(1, 6)))).astype(np.int64)
        start = int(rng.integers(0, o_seq[-1] + 5))
        end = int(start + rng.integers(1, 200))
        union = np.unique(np.concatenate([term_objs[term_off[t]:term_off[t + 1]] for t in terms]))
        want = union[(o_seq[union] < end) & (o_exp[union] > start)]
        got = _candidates(terms, term_objs, term_off.astype(np.int64), o_seq, o_exp, start, end,
                          in_order and bool((np.diff(o_exp) >= 0).all()))
        assert np.array_equal(got, want)
