"""A top-k run at this checkout against the same run at another commit, paired: the same synthetic
`topk_q` stream (datasets/tiny.py's random objects; k = 20; epochs of |W|/10, as the DSkype presets
cut them; 32 workers, or --workers) goes through one strategy in process (harness/engine/simulate.py's loop,
measure.repeat as given), each side in its own process, ABBA within each round; the CPU time of
the epoch loop (the workers' repetitions, the merges' repetitions, routing; not the oracle) and the
workers' and merger's own busy times are compared. Both sides' digests must be equal, and equal to
the oracle's (checked once per side), and so must the indexes' work counters (pairs scored and
pruned, blocks skipped, re-evaluations, ...), or the script stops.

Why a commit and not a baseline in this file: the reference is the code as it was (ADR-0083). The
commit is checked out once into a temporary worktree; its kernels compile on its first run.

    PYTHONPATH=. python benchmarks/topk_run_ab.py --baseline afec603 [--strategy dskype_prefix \
        --queries 4000 --window 4000 --repeat 7 --rounds 3]

With `--dataset` the stream is a preset's own (`--preset`, default dskype_k: |S| = |W| = 20,000,
epochs of |W|/10, 32 workers; `--k`), read from the prepared data in `--results`' cache:

    PYTHONPATH=. python benchmarks/topk_run_ab.py --baseline 434fcff --results RESULTS \
        --dataset synthetic_long --strategy dskype_hash,dskype_location,dskype_keyword,dskype_prefix \
        --repeat 3 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
import numpy as np
from datasets.tiny import random_objects
from datasets.workloads.anomalies import normalise_prefix
from harness.core.events import format_digest
from harness.engine.assembly import assemble_run, oracle_digest
from harness.engine.epochs import epoch_bounds
from harness.engine.executors import InProcessExecutor
from harness.engine.loop import run_epochs
from harness.engine.simulate import default_context
from harness.families import registry as families
from harness.families.workload import WorkloadConfig
from strategies import registry

a = json.loads(sys.argv[1])
if a["dataset"]:  # a preset's own stream, from the results folder's prepared data
    from pathlib import Path
    sys.path.insert(0, "benchmarks")
    from audit_strategies import compose, load_stream
    from strategies.base import FitContext
    c = compose(a["preset"], [f"dataset={a['dataset']}", "workload=topk_q", f"strategy={a['strategy']}",
                              f"workload.k_max={a['k']}", f"workers={a['workers']}"], a["results"])
    ds, events, warmup = load_stream(c, Path(a["results"]))
    context = FitContext(ds.extent, ds.vocab.column("df").to_numpy().astype(np.float64), int(c.seed))
    index_params, size = {k: dict(v) for k, v in dict(c.index).items()}, int(c.epochs.size)
else:
    objects, df, extent = random_objects(a["objects"], seed=4, vocab=2000)
    cfg = WorkloadConfig(name="topk_q", family="topk", queries=a["queries"], window=a["window"],
                         measured_messages=a["window"] // 2, k_min=a["k"], k_max=a["k"])
    wl = families.get("topk").build_workload(objects, df, extent, cfg, 3)
    events, warmup, context, index_params, size = wl.events, wl.warmup, None, {}, a["window"] // 10
events, warmup, anomalies = normalise_prefix(events, warmup)
context = default_context(events) if context is None else context
cls = registry.get(a["strategy"])
n_w = a["workers"]
run = assemble_run(cls, events, warmup, context, n_w, index_params, anomalies=anomalies)
router = cls().fit(run.sample, n_w, cls.make_params(None), run.context)
t0 = time.process_time()
loop = run_epochs(InProcessExecutor(events, run.setup, n_w), router, events, run.setup,
                  epoch_bounds(events, warmup, "count", size), run.adjuster, n_w, 1, repeat=a["repeat"])
loop_s = time.process_time() - t0
digest = format_digest(sum(e.result_count for e in loop.epochs), sum(e.result_hash for e in loop.epochs) % (1 << 64))
busy = sum(st["busy_s"] for reps in loop.repetitions for res in reps for st in res.worker_stats.values())
merge = sum(res.merge_busy_s for reps in loop.repetitions for res in reps)
# the work the index counts (pairs scored, pruned, blocks skipped, ...): a fast path must not change it
work = {c: sum(int(st.get(c, 0)) for reps in loop.repetitions for res in reps for st in res.worker_stats.values())
        for c in ("candidates", "results", "reevaluations", "arrival_pairs", "pruned_pairs", "skipped_blocks",
                  "buffered", "window")}
out = {"loop_s": loop_s, "busy_s": busy, "merge_s": merge, "digest": digest, "work": work}
if a["oracle"]:
    out["oracle"] = oracle_digest(events, run.families)
print("RESULT " + json.dumps(out))
"""


def side(root: Path, args, oracle: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    spec = json.dumps({"objects": args.objects, "queries": args.queries, "window": args.window,
                       "strategy": args.strategy, "repeat": args.repeat, "oracle": oracle,
                       "workers": args.workers, "k": args.k, "preset": args.preset, "dataset": args.dataset,
                       "results": str(Path(args.results).resolve()) if args.results else None})
    out = subprocess.run([sys.executable, "-c", CHILD, spec], cwd=root, env=env, check=True, capture_output=True,
                         text=True).stdout
    return json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])


def paired(tree: Path, args) -> None:
    """One strategy's ABBA rounds (module docstring), printed as they go."""
    base0, cur0 = side(tree, args, True), side(ROOT, args, True)  # compile, and check the oracle once
    for name, r in (("baseline", base0), ("this checkout", cur0)):
        if r["digest"] != r["oracle"]:
            raise SystemExit(f"{name}: digest {r['digest']} differs from the oracle's {r['oracle']}")
    if base0["digest"] != cur0["digest"]:
        raise SystemExit(f"digests differ: baseline {base0['digest']}, this checkout {cur0['digest']}")
    if base0["work"] != cur0["work"]:
        raise SystemExit(f"the indexes' work counters differ: baseline {base0['work']}, this checkout {cur0['work']}")
    shape = (f"{args.preset} on {args.dataset}, k = {args.k}" if args.dataset
             else f"|S| = {args.queries:,}, |W| = {args.window:,}")
    print(f"{args.strategy}, {shape}, repeat {args.repeat}: digest "
          f"{cur0['digest']} on both sides ({args.workers} workers), equal to the oracle's", flush=True)
    ratios = {k: [] for k in ("loop_s", "busy_s", "merge_s")}
    for r in range(args.rounds):
        order = ("b", "c", "c", "b") if r % 2 == 0 else ("c", "b", "b", "c")
        runs = {"b": [], "c": []}
        for who in order:
            res = side(tree if who == "b" else ROOT, args, False)
            if res["digest"] != cur0["digest"] or res["work"] != cur0["work"]:
                raise SystemExit(f"round {r + 1}: digest {res['digest']} or work counters {res['work']} differ")
            runs[who].append(res)
        line = []
        for k in ratios:
            b, c = np.mean([x[k] for x in runs["b"]]), np.mean([x[k] for x in runs["c"]])
            ratios[k].append(b / c)
            line.append(f"{k} {b:.2f} -> {c:.2f} s (x{b / c:.2f})")
        print(f"round {r + 1}: " + ", ".join(line), flush=True)
    print(f"{args.strategy} median: " + ", ".join(f"{k} x{np.median(v):.2f}" for k, v in ratios.items())
          + f" over {args.rounds} ABBA rounds (digests equal in every run)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="the commit whose code is the reference")
    ap.add_argument("--strategy", default="dskype_prefix", help="one, or several separated by commas")
    ap.add_argument("--objects", type=int, default=20_000)
    ap.add_argument("--queries", type=int, default=4_000)
    ap.add_argument("--window", type=int, default=4_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--workers", type=int, default=32, help="32: the DSkype presets' cluster; 1: Skype's")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--dataset", help="a preset's dataset (synthetic, synthetic_long, geonames) instead of the tiny "
                                      "random stream: its prepared data must be in --results' cache")
    ap.add_argument("--preset", default="dskype_k", help="with --dataset: the preset whose sizes and epochs it takes")
    ap.add_argument("--results", help="with --dataset: a results folder whose cache holds the prepared data")
    args = ap.parse_args()
    if args.dataset and not args.results:
        raise SystemExit("--dataset needs --results FOLDER (its cache holds the prepared data)")
    tree = Path(tempfile.mkdtemp()) / "baseline"
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), args.baseline], cwd=ROOT, check=True,
                   capture_output=True)
    try:
        for strategy in args.strategy.split(","):  # one worktree (one compilation) for every strategy
            paired(tree, argparse.Namespace(**{**vars(args), "strategy": strategy}))
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)


if __name__ == "__main__":
    main()
