"""The top-k brute-force oracle at this checkout against the oracle of another commit, paired, on one
synthetic `topk_q` stream (datasets/tiny.py's random objects, k = 20): both answer the whole stream
in turn, ABBA within each round, in threads as runs call them (harness/families/chunks.py). Their
entry keys must be equal, or the script stops; it prints each round's ratio and the median.

Why a commit and not a baseline in this file: the reference is the oracle as it was (ADR-0083).

    PYTHONPATH=. python benchmarks/topk_oracle_ab.py --baseline afec603 [--queries 20000 --window 20000 \
        --window-by count --rounds 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from at_commit import abba_rounds, module_at  # noqa: E402

ORACLE_PATH = "harness/families/topk/oracle.py"


def oracle_at(commit: str):
    """The top-k oracle module as it was at `commit`."""
    return module_at(commit, ORACLE_PATH)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="the commit whose oracle is the reference")
    ap.add_argument("--queries", type=int, default=20_000)
    ap.add_argument("--window", type=int, default=20_000)
    ap.add_argument("--measured", type=int, default=10_000)
    ap.add_argument("--window-by", default="count", choices=("count", "time"))
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from datasets.tiny import random_objects
    from datasets.workloads.anomalies import normalise_prefix
    from harness.families import registry as families
    from harness.families.topk import oracle as current
    from harness.families.workload import WorkloadConfig

    objects, df, extent = random_objects(args.window + args.measured + 10_000, seed=4, vocab=2_000)
    cfg = WorkloadConfig(name="topk_q", family="topk", queries=args.queries, window=args.window,
                         measured_messages=args.measured, k_min=20, k_max=20, window_by=args.window_by,
                         window_s=float(args.window) / 10)
    wl = families.get("topk").build_workload(objects, df, extent, cfg, 3)
    events, _, _ = normalise_prefix(wl.events, wl.warmup)
    baseline = oracle_at(args.baseline)
    small = events.take(np.arange(min(len(events), 3_000)))
    for module in (baseline, current):  # compile both before timing
        module.topk_oracle(small)
    def run(module):
        t0 = time.perf_counter()
        keys = module.topk_oracle(events)
        return time.perf_counter() - t0, keys

    abba_rounds(args.rounds, lambda: run(baseline), lambda: run(current), np.array_equal, "oracle entries")

if __name__ == "__main__":
    main()
