"""The summary over repetitions: each repetition's throughputs computed the cheap way
(`repeated_figures`) equal its full summary's, the medians are of those, and the figures come from
the repetition whose throughput is the median's."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.engine.pipeline import EpochResult
from harness.measure.network import NetworkProfile
from harness.measure.summary import REPEATED, summarise_repetitions, summarise_run
from harness.run.config import LatencyConfig, MeasureConfig
from tests.streams import random_stream

WARMUP = 20
PROFILES = [NetworkProfile(), NetworkProfile(name="slow", send_s_per_message=3e-6, recv_s_per_block=4e-4,
                                             block_bytes=2000, bandwidth_bps=1e8, hop_latency_s=1e-4,
                                             sweep_bandwidths_bps=(0.0, 1e8))]


def repetitions(seed: int, n_reps: int, n_workers: int, n_epochs: int = 2):
    """Measured epochs cut from a random stream, each repeated: the same copies and counters, each
    repetition its own routing, busy, merge and service times."""
    events = random_stream(seed, n_objects=150, n_queries=40)
    rng = np.random.default_rng(seed)
    cuts = np.linspace(WARMUP, len(events), n_epochs + 1).astype(int)
    out = []
    for e, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:])):
        seqs = events.seq[lo:hi]
        owner = rng.integers(0, n_workers, len(seqs))
        extra = rng.random(len(seqs)) < 0.3  # some events copied to a second worker
        routed = {w: np.sort(np.concatenate([seqs[owner == w], seqs[extra & (owner == (w + 1) % n_workers)]]))
                  for w in range(n_workers)}
        work = {w: rng.integers(1, 9, len(s)) for w, s in routed.items()}
        counters = {w: {"objects": int(len(s)), "events": int(len(s)), "candidates": int(rng.integers(0, 99)),
                        "results": int(rng.integers(0, 50)), "restored": 3} for w, s in routed.items()}
        reps = []
        for _ in range(n_reps):
            busy = rng.uniform(1e-4, 5e-3, n_workers)
            res = EpochResult(e + 1, hi - lo, int(rng.integers(10**5, 10**6)), sum(len(s) for s in routed.values()),
                              sum(len(s) for s in routed.values()), 0, merge_max_s=float(rng.uniform(0, 8e-3)))
            res.worker_stats = {w: {**counters[w], "busy_s": float(busy[w])} for w in routed}
            res.service = {w: (routed[w], busy[w] * work[w] / work[w].sum()) for w in routed}
            res.timings = {"job_s": 1.0, "job_share": 0.5}
            reps.append(res)
        out.append(reps)
    return events, out


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
@pytest.mark.parametrize("seed, n_reps, discard", [(1, 7, 1), (2, 4, 1), (3, 1, 1), (4, 5, 0)])
def test_repetitions_summarised_from_their_own_full_summaries(profile, seed, n_reps, discard):
    events, reps = repetitions(seed, n_reps, n_workers=3)
    series = [{"epoch": e + 1} for e in range(len(reps))]
    latency = LatencyConfig(rate_fraction=0.5)
    full = {r: summarise_run([epoch[r] for epoch in reps], series, events, WARMUP, 3, 2, latency, profile)
            for r in range(n_reps)}
    got = summarise_repetitions(reps, series, events, WARMUP, 3, 2, latency, profile,
                                MeasureConfig(repeat=n_reps, discard=discard))
    counted = list(range(discard, n_reps)) if n_reps > discard else list(range(n_reps))
    for k in REPEATED:
        assert json.loads(got.metrics[f"reps_{k}"]) == [full[r].metrics[k] for r in counted], k
        assert got.metrics[k] == float(np.median([full[r].metrics[k] for r in counted]))
    # the figures are the median repetition's: a lower median picks the lower of the middle two
    by_tp = sorted(counted, key=lambda r: full[r].metrics["throughput_eps"])
    pick = full[by_tp[(len(counted) - 1) // 2]].metrics
    for k in ("latency_p50_ms", "latency_p99_ms", "bottleneck_s", "dispatcher_s", "network_bytes",
              "bottleneck_resource"):
        assert got.metrics[k] == pick[k], k
    if profile.sweep_bandwidths_bps:
        assert got.metrics["throughput_by_bandwidth"] == pick["throughput_by_bandwidth"]
    assert got.metrics["repetitions"] == len(counted)


def test_a_summary_in_a_pool_process_is_the_drivers():
    """A sweep summarises its runs in the driver's pool (harness/run/runner.py): the same figures."""
    from harness.measure.summary import timed_summary
    from harness.run import processes

    events, reps = repetitions(5, 4, n_workers=3)
    args = (reps, [{"epoch": e + 1} for e in range(len(reps))], events, WARMUP, 3, 2, LatencyConfig(rate_fraction=0.5),
            PROFILES[1], MeasureConfig(repeat=4, discard=1))
    here = summarise_repetitions(*args)
    there, seconds = processes.submit(1, timed_summary, *args).result()  # in the process, no fallback
    assert seconds > 0 and set(there.metrics) == set(here.metrics)
    for k, v in here.metrics.items():
        assert there.metrics[k] == v or (v != v and there.metrics[k] != there.metrics[k]), k
    for name in ("workers", "latency_sample", "epochs"):
        assert getattr(there, name).equals(getattr(here, name)), name
