"""Figure 2: GI2 object matching against 100k and 1M active STS-Q1 subscriptions, per core.

GI2 is restored with the queries (insert events whose seqs precede the objects'), then
`process` runs a batch of objects only. Baseline, what a user would write: a shapely STRtree over
the query rectangles bulk-queried with the object points, then a vectorised numpy keyword check
for the AND/OR semantics (baselines.py); it runs on the same objects as GI2, back to back in each
of the same rounds (the ratio is the median of the per-round ratios), and must return the same
pairs in every round.
"""

from __future__ import annotations

import numpy as np
import pytest

from bench_data import object_events
from baselines import query_tree, strtree_match
from conftest import cpu_timer, paired_rounds, timed
from harness.core.events import sorted_unique
from harness.families.base import IndexContext, StateBundle
from harness.families.range.gi2 import GI2Index

SIZES = {"100k": 100_000, "1M": 1_000_000}
ROUNDS = 3  # paired rounds


@pytest.mark.gate
@pytest.mark.parametrize("label", list(SIZES))
def test_gi2_matching(benchmark, label, dataset, query_pool, scale, record):
    n_q = SIZES[label]
    if n_q not in scale["gi2_queries"]:
        pytest.skip(f"{label} active queries is not part of scale {scale['name']}")
    table, df, extent = dataset
    queries = query_pool.take(np.arange(n_q))  # seqs 0..n_q-1
    n_o = min(scale["gi2_objects"][n_q], table.num_rows)
    objects = object_events(table, seq0=n_q, rows=np.arange(n_o))
    vocab = len(df)

    index = GI2Index(IndexContext(tuple(extent), vocab))
    restore_s = index.restore(StateBundle(queries=queries))
    index.process(objects.take(np.arange(10)))  # numba warm-up
    # the baseline's tree is set-up (like GI2's restore), not timed
    tree_s, tree = cpu_timer(lambda: query_tree(queries), rounds=1)
    outs = []

    def gi2_side():
        out = index.process(objects)
        outs.append(out)
        return out.busy_s, sorted_unique(out.results)

    def same(gi2_keys, base_keys):
        assert len(gi2_keys) > 0 and np.array_equal(gi2_keys, base_keys), "GI2 and STRtree+numpy disagree"

    benchmark.pedantic(lambda: index.process(objects), rounds=1, iterations=1)
    # both sides on the same objects, back to back in each round, their pairs equal in every round
    fs, bs, ratio, gi2_keys, _ = paired_rounds(gi2_side, timed(lambda: strtree_match(tree, queries, objects, vocab)),
                                               ROUNDS, same)
    out = outs[-1]
    assert len(out.results) == len(gi2_keys), "GI2 reported a pair twice"
    busy = fs.min()
    cand = out.counters["candidates"]

    base = f"gi2@{label}/strtree_numpy"
    record(base, n_o / bs.min(), "objects/s/core", note=f"{n_o} objects; tree build {tree_s:.2f}s untimed")
    record(f"gi2@{label}/match", n_o / busy, "objects/s/core", baseline=base, target=20, target_on=base,
           paired={base: ratio},
           note=f"{n_o} objects vs {n_q} queries, {len(gi2_keys) / n_o:.1f} results/object, equal to the "
                f"baseline's in each of {ROUNDS} paired rounds (per-round ratios "
                + ", ".join(f"{b / f:.1f}" for f, b in zip(fs, bs)) + ")")
    record(f"gi2@{label}/candidate_checks", cand / busy, "checks/s/core",
           note=f"{cand / n_o:.1f} candidates/object")
    record(f"gi2@{label}/restore", n_q / restore_s, "queries/s/core", note=f"{restore_s:.2f}s")
