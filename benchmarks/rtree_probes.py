"""The R-tree router's probes and routing rate against the number of partitions (issue 47; Tornado
Fig. 9(a), tornado.txt l.370): per routed object and per STS-Q1 rectangle, the nodes visited and
entry rectangles tested (`RTreeRouter.probe_stats`), and objects / rectangles routed per second
on one core by the R-tree and by the `tiles` variant (whose copies must be the same).

    PYTHONPATH=$PWD:$PWD/benchmarks python benchmarks/rtree_probes.py
"""

from __future__ import annotations

import time

import numpy as np

from bench_data import object_events, synthetic_objects
from datasets.workloads.range import build_workload
from harness.core.events import INSERT
from harness.families.workload import WorkloadConfig
from strategies.base import FitContext
from strategies.ps2stream.rtree import RTreeStrategy

# (workers, leaves per worker): one worker with 4-1024 leaves, and the preset's 4-25 workers at 16
SETTINGS = [(1, 4), (1, 16), (1, 64), (4, 16), (9, 16), (16, 16), (25, 16), (1, 1024)]


def best_seconds(fn, rounds: int = 3) -> float:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


def main() -> None:
    table, df, extent = synthetic_objects(200_000, seed=1)
    wl = build_workload(table, df, extent, WorkloadConfig(name="sts_q1", profile="q1", queries=20000, updates=0),
                        seed=3)
    ctx = FitContext(tuple(extent), df.astype(np.float64))
    objs = object_events(table)
    rows = np.arange(len(objs), dtype=np.int64)
    q = np.flatnonzero(wl.events.kind == INSERT)
    print("| leaves | workers | height | nodes/object | tests/object | nodes/rect | tests/rect "
          "| objects M/s rtree | tiles | rects M/s rtree | tiles |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for workers, lpw in SETTINGS:
        r = {m: RTreeStrategy().fit(wl.sample, workers, RTreeStrategy.make_params(
            {"leaves_per_worker": lpw, "routing": m}), ctx) for m in ("rtree", "tiles")}
        po, pq = r["rtree"].probe_stats(objs), r["rtree"].probe_stats(wl.events, q)
        rate, qrate = {}, {}
        for m, rt in r.items():
            rt.route_objects(objs, rows[:100])  # numba warm-up
            rt.route_queries(wl.events, q[:100])
            rate[m] = len(rows) / best_seconds(lambda: rt.route_objects(objs, rows)) / 1e6
            qrate[m] = len(q) / best_seconds(lambda: rt.route_queries(wl.events, q)) / 1e6
        assert np.array_equal(r["rtree"].route_objects(objs, rows)[1], r["tiles"].route_objects(objs, rows)[1])
        print(f"| {len(r['rtree'].leaf_worker)} | {workers} | {int(r['rtree'].tree['height'])} "
              f"| {po['object_nodes_mean']:.2f} | {po['object_tests_mean']:.1f} | {pq['query_nodes_mean']:.2f} "
              f"| {pq['query_tests_mean']:.1f} | {rate['rtree']:.1f} | {rate['tiles']:.1f} "
              f"| {qrate['rtree']:.2f} | {qrate['tiles']:.2f} |")


if __name__ == "__main__":
    main()
