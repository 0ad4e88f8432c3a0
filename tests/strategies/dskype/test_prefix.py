"""DSkype's prefix method: the loose prefix of Eq. 18 / Definition 12 (Example 8), Lemma 7's
guarantee as a property (a message sharing no prefix keyword scores below the threshold), and the
route's life over epochs: thresholds shrink it once, later only grow it (re-sending the
subscription), results always the oracle's."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from harness.engine.simulate import simulate
from harness.families import registry as families
from harness.families.topk.scoring import normalised_weights, pair_score
from harness.families.workload import WorkloadConfig
from strategies.dskype.prefix import prefix_terms
from tests.helpers import random_objects


def prefix(terms, alpha, theta, idf):
    off = np.array([0, len(terms)], np.int64)
    p_off, p_val = prefix_terms(np.array([0]), off, np.array(terms, np.int32), np.array([alpha]), np.array([theta]),
                                np.asarray(idf, np.float64))
    return sorted(p_val.tolist())


def test_example_8_kscore_08_alpha_06_keeps_the_two_rarest_keywords():
    # Skype order is descending id: w1 = term 2, w2 = term 1, w3 = term 0; normalised weights about
    # 0.81, 0.51, 0.30, so wtsum(w2..) = 0.81 >= lambda_T = 0.8/0.4 - 0.6/0.4 = 0.5 > wtsum(w3) = 0.30
    idf = [0.3, 0.5, 0.8]
    assert prefix([0, 1, 2], 0.6, 0.8, idf) == [1, 2]
    assert prefix([0, 1, 2], 0.6, 0.6, idf) == [0, 1, 2]  # lambda_T = 0: every keyword
    assert prefix([0, 1, 2], 0.6, 0.95, idf) == [2]  # lambda_T = 0.875: the rarest keyword alone


@settings(max_examples=300, deadline=None)
@given(s_terms=st.sets(st.integers(0, 11), min_size=2, max_size=5), alpha=st.floats(0.01, 0.99),
       u=st.floats(0.0, 1.0), sx=st.floats(0, 100), mx=st.floats(0, 100), seed=st.integers(0, 1000),
       data=st.data())
def test_lemma_7_a_message_outside_the_prefix_scores_below_theta(s_terms, alpha, u, sx, mx, seed, data):
    # theta = alpha + (1 - alpha) u: at theta <= alpha (lambda_T <= 0), or with one keyword, the
    # prefix is the whole subscription and no message lies outside it, so those are not drawn
    theta = alpha + (1.0 - alpha) * u
    idf = np.random.default_rng(seed).uniform(0.1, 3.0, 12)
    s = sorted(s_terms)
    pref = prefix(s, alpha, theta, idf)
    assert pref and set(pref) <= set(s) and pref == s[len(s) - len(pref):]  # the rarest keywords
    # the lemma's case: a message sharing a keyword of s outside the prefix and none of the prefix
    # (one reaching a prefix holder, or sharing nothing, is no candidate); drawn so, after the
    # prefix, since messages drawn blind almost never are (a whole prefix leaves no such message)
    rest = sorted(set(s) - set(pref))
    assume(rest)
    other = sorted(set(range(12)) - set(s))
    m = sorted(data.draw(st.sets(st.sampled_from(rest), min_size=1))
               | (data.draw(st.sets(st.sampled_from(other), max_size=7)) if other else set()))
    assert not set(pref) & set(m) and set(s) & set(m)
    s_val, m_val = np.array(s, np.int32), np.array(m, np.int32)
    s_w = normalised_weights(np.array([0, len(s)]), s_val, idf)
    m_w = normalised_weights(np.array([0, len(m)]), m_val, idf)
    score = pair_score(sx, 0.0, alpha, s_val, s_w, 0, len(s), mx, 0.0, m_val, m_w, 0, len(m), 100.0)
    assert score < theta


def test_prefix_routes_shrink_then_grow_and_stay_exact():
    objects, df, extent = random_objects(3000, seed=4, vocab=400)
    cfg = WorkloadConfig(name="t", family="topk", queries=300, window=600, measured_messages=1200, k_min=5, k_max=5)
    wl = families.get("topk").build_workload(objects, df, extent, cfg, 3)
    prefix_run = simulate(wl.events, wl.warmup, "dskype_prefix", 8, epoch_events=150)
    keyword_run = simulate(wl.events, wl.warmup, "dskype_keyword", 8, epoch_events=150)
    assert prefix_run.exact and keyword_run.exact
    assert prefix_run.feedback_rows > 0 and keyword_run.feedback_rows == 0  # only prefix asks for thresholds
    dropped = [e["replicas_dropped"] for e in prefix_run.epochs]
    assert dropped[0] > 0 and sum(dropped[1:]) == 0  # the one shrink after registration, then never
    assert sum(e["resent"] for e in prefix_run.epochs) > 0  # thresholds fell: routes grew


@settings(max_examples=200, deadline=None)
@given(s_terms=st.sets(st.integers(0, 11), min_size=1, max_size=6), alpha=st.floats(0.01, 0.99),
       t1=st.floats(0.0, 1.0), t2=st.floats(0.0, 1.0), seed=st.integers(0, 1000))
def test_the_prefix_shrinks_only_as_theta_rises_above_alpha(s_terms, alpha, t1, t2, seed):
    # the audit of Table 5 (prefix replication equal to keyword's at |W| = 20k): Eq. 18 keeps every
    # keyword while theta <= alpha, and a higher theta never keeps more keywords; so prefix-based
    # replication can fall below keyword-based only through subscriptions whose k-th score exceeds alpha
    idf = np.random.default_rng(seed).uniform(0.1, 3.0, 12)
    s = sorted(s_terms)
    lo, hi = sorted((t1, t2))
    assert prefix(s, alpha, alpha * lo, idf) == s  # theta <= alpha: lambda_T <= 0
    p_lo = prefix(s, alpha, alpha + (1.0 - alpha) * lo, idf)
    p_hi = prefix(s, alpha, alpha + (1.0 - alpha) * hi, idf)
    assert set(p_hi) <= set(p_lo) and len(p_hi) >= 1


def test_warm_up_thresholds_in_batches_are_those_of_one_index():
    """warmup_thresholds runs batches of subscriptions through their own top-k indexes over all the
    warm-up's messages (issue 51: bounded memory): a k-th score is the messages', so every batch
    size gives the one-index thresholds, a deleted subscription's 0 included."""
    from harness.core.events import DELETE, INSERT, TOPK
    from harness.families.base import IndexContext
    from strategies.dskype.prefix import warmup_thresholds

    objects, df, extent = random_objects(3000, seed=5, vocab=300)
    cfg = WorkloadConfig(name="t", family="topk", queries=400, window=800, measured_messages=10, k_min=5, k_max=8)
    wl = families.get("topk").build_workload(objects, df, extent, cfg, 2)
    sample = wl.events.take(np.arange(wl.warmup))
    ins = np.flatnonzero((sample.kind == INSERT) & (sample.family == TOPK))
    gone = sample.take(ins[:3])  # three subscriptions deleted at the warm-up's end: threshold 0
    gone.cols["kind"] = np.full(3, DELETE, np.int8)
    gone.cols["seq"] = sample.seq[-1] + 1 + np.arange(3)
    from harness.core.events import Events

    sample = Events.concat([sample, gone])
    context = families.get("topk").stream_context(IndexContext(tuple(extent), len(df)), sample)
    whole = warmup_thresholds(sample, context, batch=10**9)
    assert (whole[:3] == 0).all() and (whole[3:] > 0).mean() > 0.5
    for batch in (1, 7, 150):
        np.testing.assert_array_equal(warmup_thresholds(sample, context, batch=batch), whole)
