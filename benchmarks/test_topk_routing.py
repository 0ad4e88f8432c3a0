"""DSkype's prefix routing on the dispatcher (issue 14's target: at least 3M subscriptions/s): the
`dskype_prefix` router, fitted on a `topk_q` sample at 32 workers, routes every subscription of
the workload to the workers of its loose prefix under its threshold (Eq. 18), one core.

The thresholds are what the workers' feedback would hand the router; here each subscription gets
theta = alpha + (1 - alpha) x u, u uniform in [0, 0.6), so lambda_T = u - 1e-9 and the prefixes run
from one keyword to all of them (routing cost grows with the prefix, not with theta itself).
Baseline, timed in the same rounds (paired): the same routing vectorised in numpy (baselines.py:
weights, running sums, prefix lengths, the prefix terms' distinct workers) on every subscription;
the routes must be equal in every round. Second reference: a plain Python loop cutting the same
prefixes (norm, suffix sum, keywords rarest first) on a subset; the prefixes must agree on it. Sizes: full 200,000
subscriptions, small 20,000.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from bench_data import synthetic_objects
from baselines import numpy_prefix_routes
from conftest import cpu_timer, paired_rounds, timed
from datasets.workloads.topk import build_topk_workload
from harness.core.events import INSERT
from harness.families.base import IndexContext
from harness.families.topk.family import TopkFamily
from harness.families.workload import WorkloadConfig
from strategies import registry
from strategies.base import FitContext

SUBS = {"full": 200_000, "small": 20_000}
WORKERS = 32
LOOP = 2_000  # subscriptions the Python loop cuts
FIT_SUBS = 20_000  # subscriptions in the fitting sample (untimed)
ROUNDS = 5  # paired rounds against the numpy routing
REPS = 3  # calls per side and round


def python_prefixes(ev, rows, theta, idf):
    """Each row's loose prefix, one subscription and one keyword at a time."""
    out = []
    for r, i in enumerate(rows.tolist()):
        terms = ev.values[ev.offsets[i]:ev.offsets[i + 1]].tolist()
        norm = math.sqrt(sum(idf[t] * idf[t] for t in terms))
        a = float(ev.alpha[i])
        lam = (theta[r] - a) / (1.0 - a) - 1e-9
        p = len(terms)
        if lam > 0.0 and norm > 0.0:
            suffix = sum(idf[t] / norm for t in terms)
            p = 0
            while p < len(terms) and (p == 0 or suffix >= lam):
                suffix -= idf[terms[len(terms) - 1 - p]] / norm
                p += 1
        out.append(sorted(terms[len(terms) - p:]))
    return out


@pytest.mark.gate
def test_prefix_routing_rate(benchmark, scale, record):
    n_q = SUBS[scale["name"]]
    table, df, extent = synthetic_objects(20_000, seed=9)
    cfg = WorkloadConfig(name="topk_q", family="topk", queries=n_q, window=10_000, measured_messages=1_000,
                         k_min=20, k_max=20, keywords_min=1, keywords_max=5)
    wl = build_topk_workload(table, df, extent, cfg, 3)
    ev = wl.events
    topk = TopkFamily.stream_context(IndexContext(tuple(extent), len(df)), ev)
    ctx = FitContext(tuple(extent), df.astype(np.float64), family_contexts={"topk": topk})
    cls = registry.get("dskype_prefix")
    fit_sample = ev.take(np.arange(10_000 + min(n_q, FIT_SUBS)))  # the window and the first subscriptions
    router = cls().fit(fit_sample, WORKERS, cls.make_params({}), ctx)
    rows = np.flatnonzero(ev.kind == INSERT)
    u = np.random.default_rng(4).uniform(0.0, 0.6, len(rows))
    alpha = ev.alpha[rows].astype(np.float64)
    router.observe_feedback("topk", pa.table({"qid": ev.id[rows], "value": alpha + (1.0 - alpha) * u}))
    assert len(rows) == n_q

    loop_rows = rows[:LOOP]
    theta = router.thresholds_of(ev.id[loop_rows])
    loop_s, expected = cpu_timer(lambda: python_prefixes(ev, loop_rows, theta, router.idf), rounds=1)
    p_off, p_val = router.prefixes(ev, loop_rows)
    assert [sorted(p_val[p_off[r]:p_off[r + 1]].tolist()) for r in range(LOOP)] == expected
    kept = np.diff(router.prefixes(ev, rows)[0]) / np.diff(ev.offsets)[rows]

    result = benchmark.pedantic(lambda: router.route_topk(ev, rows), rounds=1, iterations=1)

    def fast():  # the router's pairs as it returns them (deduplicated per row)
        return router.route_topk(ev, rows)

    def base():  # the thresholds looked up in the router's table, as route_topk does
        return numpy_prefix_routes(ev, rows, router.thresholds_of(ev.id[rows]), router.idf, router.term_worker,
                                   WORKERS)

    def same(fast_out, b):  # put in the baseline's form here, outside the timing
        r, w = fast_out
        a = r * np.int64(WORKERS) + w
        assert len(a) >= len(rows) and len(np.unique(a)) == len(a), "the prefix router sent a subscription twice"
        assert np.array_equal(np.sort(a), b), "the prefix router and its numpy version disagree"

    fs, bs, ratio, _, _ = paired_rounds(timed(fast, REPS), timed(base, REPS), ROUNDS, same)
    route_s = fs.min()
    pairs = len(result[0])
    ref = "topk_route/python_loop"
    npy = "topk_route/numpy"
    record(npy, n_q / bs.min(), "subscriptions/s/core",
           note=f"{n_q} subscriptions, the same routes (prefix and workers) vectorised in numpy")
    record(ref, LOOP / loop_s, "subscriptions/s/core", note=f"{LOOP} subscriptions, the same prefixes "
                                                             f"(second reference)")
    record("topk_route/dskype_prefix", n_q / route_s, "subscriptions/s/core", baseline=(npy, ref), target=3e6,
           paired={npy: ratio},
           note=f"{n_q} subscriptions to {WORKERS} workers: {pairs / n_q:.2f} workers each, prefixes keep "
                f"{kept.mean():.0%} of the keywords (thresholds: module docstring)")
