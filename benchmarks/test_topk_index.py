"""The top-k worker index (issue 14's targets), one core, synthetic data, k = 20, 1-5 OR keywords
and alpha uniform in (0, 1) per subscription: Skype's subscriber side (`topk_q`).

The warm-up fills the window with |W| messages and registers the subscriptions, each initialised
against the full window (untimed set-up, as the harness's warm-up epoch); the state is exported
and restored into a fresh index, as between epochs, and a batch of new messages is timed by the
index's own `busy_s` (each one arrives at a full window and pushes the oldest out). Sizes: full
156,000 subscriptions (DSkype's load per worker; its Java bolts did about 833 messages/s there, the
target is 8,000) with the issue's |W| = 1M and 20,000 measured messages (the warm-up's 156,000
registrations take about 4 minutes: about 1.5 ms each against the message index). Small: 20,000
subscriptions, |W| = 20,000, 2,000 messages. The epoch's set-up (building the message index and
the postings, restoring the buffers: about 2 s at 1M) is inside the busy time; each round also
times it on a one-message epoch, and the rate less it is the one a long-running worker sees.
Figures, all from the same rounds (each round: the brute-force scan, the index without expiries,
the one-message epoch, the index):
- messages/s of the index (target 8,000);
- the same less the set-up (target 8,000);
- a brute-force scorer over the same postings (target: the index less its set-up 10x it; the
  scorer's own set-up is untimed too), vectorised numpy sharing
  no code with the index: per message, every subscription sharing a keyword is scored and compared
  with its current k-th score (a (subscriptions, k) table of scores, no refills);
- the share of busy time spent on expiries (buffer upkeep) and re-evaluations (reported; the <= 20%
  target is on test_topk_reevaluation_share, at a size where re-evaluations happen): the
  busy time of the same batch with its expiries left out (the epoch's end set to its start, so no
  message leaves a buffer and none is re-evaluated), subtracted from the index's.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from bench_data import synthetic_objects
from conftest import cpu_timer
from datasets.workloads.topk import build_topk_workload
from harness.core.events import OBJECT
from harness.families.base import IndexContext
from harness.families.topk.family import TopkFamily
from harness.families.topk.index import TopkIndex
from harness.families.workload import WorkloadConfig

SUBS = {"full": 156_000, "small": 20_000}
WINDOW = {"full": 1_000_000, "small": 20_000}
MEASURED = {"full": 20_000, "small": 2_000}
BRUTE_PREFIX = 2_000  # messages the brute-force scorer runs at most (its rate is per message)
K = 20
ROUNDS = {"full": 3, "small": 5}  # paired rounds (the share is a difference of two busy times)


@pytest.fixture(scope="module")
def topk_state(scale):
    n_q, window, n_meas = SUBS[scale["name"]], WINDOW[scale["name"]], MEASURED[scale["name"]]
    table, df, extent = synthetic_objects(window + n_meas, seed=5)  # no message repeats
    cfg = WorkloadConfig(name="topk_q", family="topk", queries=n_q, window=window, measured_messages=n_meas,
                         k_min=K, k_max=K, keywords_min=1, keywords_max=5)
    wl = build_topk_workload(table, df, extent, cfg, 7)
    ev = wl.events
    context = TopkFamily.stream_context(IndexContext(tuple(extent), len(df)), ev)
    warm = TopkIndex(context)
    warm.begin_epoch(0, wl.warmup)
    t0 = time.perf_counter()
    warm_out = warm.process(ev.take(np.arange(wl.warmup)))
    warm_s = time.perf_counter() - t0
    state = warm.export_state()
    measured = ev.take(np.arange(wl.warmup, len(ev)))
    assert (measured.kind == OBJECT).all() and len(state.queries) == n_q and len(state.objects) == window
    return context, state, measured, (wl.warmup, len(ev)), warm_s, warm_out.counters


class BruteForce:
    """Per message, numpy over a term -> subscriptions inverted list built here: the text cosine of
    every subscription sharing a keyword (a dense bincount of weight products), the spatial part,
    the score, and the strict comparison with the subscription's k-th score; entrants replace their
    k-th score in a (subscriptions, k) ascending table. Weights: the context's idf, L2-normalised
    per set; MaxDist: the context's."""

    def __init__(self, context, state):
        subs = state.queries
        self.n = n = len(subs)
        self.idf = np.asarray(context.term_weight, np.float64)
        self.max_dist = float(context.max_dist)
        self.x, self.y = subs.x.astype(np.float64), subs.y.astype(np.float64)
        self.alpha = subs.alpha.astype(np.float64)
        w = self.weights(subs.offsets, subs.values)
        owner = np.repeat(np.arange(n), np.diff(subs.offsets))
        order = np.argsort(subs.values, kind="stable")
        self.post_sub, self.post_w = owner[order], w[order]
        self.post_off = np.zeros(len(self.idf) + 1, np.int64)
        np.cumsum(np.bincount(subs.values, minlength=len(self.idf)), out=self.post_off[1:])
        # each subscription's top-k scores from the exported buffers (header rows have mseq -1)
        t = state.results
        qid, mseq, score = (t.column(c).to_numpy() for c in ("qid", "mseq", "score"))
        mem = mseq >= 0
        qid, score = qid[mem], score[mem]
        first = np.r_[0, np.flatnonzero(qid[1:] != qid[:-1]) + 1]
        rank = np.arange(len(qid)) - np.repeat(first, np.diff(np.r_[first, len(qid)]))
        assert (np.diff(subs.id) > 0).all()
        slot = np.searchsorted(subs.id, qid)
        top = rank < K
        self.start = np.full((n, K), -np.inf)
        self.start[slot[top], K - 1 - rank[top]] = score[top]  # ascending: column 0 is the k-th

    def weights(self, offsets, values):
        w = self.idf[values]
        lens = np.diff(offsets)
        norm = np.sqrt(np.add.reduceat(w * w, offsets[:-1])) if len(w) else np.zeros(0)
        return w / np.repeat(np.where(lens > 0, norm, 1.0), lens)

    def run(self, msgs):
        """(entries, pairs scored) over msgs."""
        best = self.start.copy()
        m_w = self.weights(msgs.offsets, msgs.values)
        entries = pairs = 0
        for i in range(len(msgs)):
            a, b = msgs.offsets[i], msgs.offsets[i + 1]
            terms = msgs.values[a:b]
            cand = np.concatenate([self.post_sub[self.post_off[t]:self.post_off[t + 1]] for t in terms])
            prod = np.concatenate([self.post_w[self.post_off[t]:self.post_off[t + 1]] * m_w[a + j]
                                   for j, t in enumerate(terms)])
            tsim = np.bincount(cand, weights=prod, minlength=self.n)
            s = np.flatnonzero(tsim > 0.0)
            ssim = 1.0 - np.hypot(msgs.x[i] - self.x[s], msgs.y[i] - self.y[s]) / self.max_dist
            score = self.alpha[s] * ssim + (1.0 - self.alpha[s]) * tsim[s]
            enter = score >= best[s, 0]  # a tie goes to the newer message
            e = s[enter]
            if len(e):
                rows = best[e]
                rows[:, 0] = score[enter]
                rows.sort(axis=1)
                best[e] = rows
            entries += len(e)
            pairs += len(s)
        return entries, pairs


def entries_of(out) -> np.ndarray:
    ch = out.results
    enter = ch["delta"] > 0
    keys = np.stack([ch["qid"][enter], ch["trigger"][enter], ch["mseq"][enter]], axis=1)
    return keys[np.lexsort(keys.T[::-1])]


def counts(out) -> dict:
    """The output's counters without its clocks (the phase times differ from round to round)."""
    return {k: v for k, v in out.counters.items() if not k.endswith("_s")}


@pytest.mark.gate
def test_topk_index_throughput(benchmark, topk_state, scale, record):
    context, state, measured, (lo, hi), warm_s, warm_counters = topk_state
    n_q, n_msg = len(state.queries), len(measured)
    brute = BruteForce(context, state)
    prefix = measured.take(np.arange(min(BRUTE_PREFIX, n_msg)))
    outs, calm, brute_rates, setups = [], [], [], []

    def index_run(end, events=measured):
        index = TopkIndex(context)
        index.restore(state)
        index.begin_epoch(lo, end)
        return index.process(events)

    def setup():  # each round's baselines, right before its index run
        base_s, (_, pairs) = cpu_timer(lambda: brute.run(prefix), rounds=1)
        brute_rates.append(len(prefix) / base_s)
        brute.pairs = pairs
        calm.append(index_run(lo))  # no expiries within the batch
        setups.append(index_run(lo + 1, measured.take(np.arange(1))).busy_s)  # the epoch's set-up and one message

    def run():
        out = index_run(hi)
        outs.append(out)
        return out

    benchmark.pedantic(run, setup=setup, rounds=ROUNDS[scale["name"]], iterations=1)
    first = entries_of(outs[0])
    for out in outs[1:]:  # the measured entries are deterministic
        assert np.array_equal(entries_of(out), first) and counts(out) == counts(outs[0])
    c = outs[0].counters
    assert c["objects"] == n_msg and c["window"] == len(state.objects)
    if len(prefix) == n_msg:  # the scan scores every pair the index scores or prunes on arrival, and more
        assert brute.pairs >= c["arrival_pairs"] + c["pruned_pairs"]
    assert calm[0].counters["reevaluations"] == 0 and calm[0].counters["window"] == len(state.objects) + n_msg

    setup_s = float(np.median(setups))

    busy = np.array([o.busy_s for o in outs])
    rates = n_msg / busy
    tag = f"topk@{n_q // 1000}k"
    ref = f"{tag}/brute_force"
    per_round = rates / np.array(brute_rates)
    vs_brute = float(np.median(per_round))
    window = len(state.objects)
    record(ref, max(brute_rates), "messages/s/core",
           note=f"{len(prefix)} messages, {brute.pairs / len(prefix):.0f} subscriptions sharing a keyword each, "
                f"all scored")
    record(f"{tag}/index", rates.max(), "messages/s/core", baseline=ref, target=8_000, paired={ref: vs_brute},
           note=f"{n_q} subscriptions, k = {K}, |W| = {window}, {n_msg} messages in one epoch "
                f"({setup_s:.1f}s of the busy time is the epoch's set-up); per message "
                f"{c['arrival_pairs'] / n_msg:.0f} pairs scored, "
                f"{c['pruned_pairs'] / n_msg:.0f} pruned, {c['results'] / n_msg:.0f} entries; AMP "
                f"{c['arrival_s'] / n_msg * 1e6:.0f} us, EMP {c['expiry_s'] / max(c['expiries'], 1) * 1e6:.0f} us; "
                f"warm-up {warm_s:.0f}s untimed ({warm_counters['candidates'] / n_q:.0f} pairs per registration); "
                f"DSkype's Java bolts: ~833 messages/s at 156k")
    steady = n_msg / np.maximum(busy - np.array(setups), 1e-9)  # each round less its own set-up
    after = steady / np.array(brute_rates)
    record(f"{tag}/index_after_setup", steady.max(), "messages/s/core", target=8_000, baseline=ref,
           paired={ref: float(np.median(after))},
           note=f"the same rounds less the epoch's set-up (a one-message epoch in each round, median "
                f"{setup_s:.2f}s): the rate once the index is built, as a long-running worker (DSkype's bolts) "
                f"or an epoch much longer than this batch sees it")
    record(f"{tag}/index_vs_brute", float(np.median(steady)), "messages/s/core", baseline=ref, target=10,
           target_on=ref, paired={ref: float(np.median(after))},
           note="ratio without either side's set-up (the scan's inverted lists and k-th score table are built "
                "untimed): median of the per-round ratios " + ", ".join(f"{r:.2f}" for r in after)
                + "; with the index's set-up in its batch: " + ", ".join(f"{r:.2f}" for r in per_round))
    calm_busy = np.array([o.busy_s for o in calm])
    shares = 1.0 - calm_busy / busy  # of the worker's busy time, as the issue states it
    share_of_work = float(np.median((busy - calm_busy) / np.maximum(busy - np.array(setups), 1e-9)))
    pair_share = (c["candidates"] - c["arrival_pairs"]) / max(c["candidates"], 1)
    record(f"{tag}/reevaluation_share", float(np.median(shares)), "share of worker busy",
           note=f"no target here: at this window the batch re-evaluates little or nothing (the target is on "
                f"test_topk_reevaluation_share's figure, where the window turns over); busy time minus that of "
                f"the batch without expiries, over the busy time (set-up included, as in "
                f"expiry_share), median of paired rounds {', '.join(f'{x:.2f}' for x in shares)}; over the busy time "
                f"less the set-up: {share_of_work:.2f}: "
                f"{c['reevaluations']} re-evaluations ({pair_share:.1%} of pairs scored), {n_msg} expiries; "
                f"the arrivals' own buffer upkeep (dominance counters) is inside the arrival loop, not split")


# Where re-evaluations happen: the window turns over within the batch (as many messages as the
# window holds), so top-k members expire and subscriptions whose buffers run short are re-evaluated.
# At the throughput figure's sizes (|W| = 1M with 20,000 messages) almost none are, and a share of
# expiries and re-evaluations measured there cannot fail (issue 41).
REEVAL = {"full": dict(subs=20_000, window=20_000, messages=20_000),
          "small": dict(subs=5_000, window=2_000, messages=2_000)}
REEVAL_ROUNDS = 5


def test_topk_reevaluation_share(scale, record):
    """The share of the index's busy time spent on expiries and re-evaluations (target <= 20%), at a
    size where the batch expires the whole window: the busy time of the batch with its expiries left
    out (epoch end = start: nothing leaves a buffer, nothing is re-evaluated), subtracted from the
    index's, paired in each round, the median of the rounds. The re-evaluations must occur (else the
    figure could not fail) and the entries must be equal in every round."""
    size = REEVAL[scale["name"]]
    table, df, extent = synthetic_objects(size["window"] + size["messages"], seed=15)
    cfg = WorkloadConfig(name="topk_q", family="topk", queries=size["subs"], window=size["window"],
                         measured_messages=size["messages"], k_min=K, k_max=K, keywords_min=1, keywords_max=5)
    wl = build_topk_workload(table, df, extent, cfg, 8)
    ev = wl.events
    context = TopkFamily.stream_context(IndexContext(tuple(extent), len(df)), ev)
    warm = TopkIndex(context)
    warm.begin_epoch(0, wl.warmup)
    warm.process(ev.take(np.arange(wl.warmup)))
    state = warm.export_state()
    measured = ev.take(np.arange(wl.warmup, len(ev)))
    lo, hi = wl.warmup, len(ev)

    def index_run(end):
        index = TopkIndex(context)
        index.restore(state)
        index.begin_epoch(lo, end)
        out = index.process(measured)
        return out.busy_s, out

    index_run(hi)  # warm-up
    outs, shares = [], []
    for _ in range(REEVAL_ROUNDS):
        calm_s, calm = index_run(lo)
        busy_s, out = index_run(hi)
        outs.append(out)
        shares.append(1.0 - calm_s / busy_s)
        assert calm.counters["reevaluations"] == 0
    first = entries_of(outs[0])
    for out in outs[1:]:
        assert np.array_equal(entries_of(out), first) and counts(out) == counts(outs[0])
    c = outs[0].counters
    assert c["reevaluations"] > 0 and c["expiries"] >= len(measured), "no re-evaluation: the share could not fail"
    pair_share = (c["candidates"] - c["arrival_pairs"]) / max(c["candidates"], 1)
    record(f"topk@{size['subs'] // 1000}k_W{size['window'] // 1000}k/reevaluation_share", float(np.median(shares)),
           "share of worker busy", target_max=0.20,
           note=f"{size['subs']} subscriptions, |W| = {size['window']}, {len(measured)} messages (the window turns "
                f"over): {c['reevaluations']} re-evaluations ({pair_share:.1%} of pairs scored), {c['expiries']} "
                f"expiries; paired rounds {', '.join(f'{x:.2f}' for x in shares)}")
