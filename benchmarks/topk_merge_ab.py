"""The top-k merger at this checkout against the merger of another commit, paired, on the inputs of
one real merge: a preset's stream is run in process (one measured epoch), the measured epoch's
merge inputs (the workers' change blobs, the queries, the merger's state) are kept, and both
mergers merge them in turn, ABBA within each round. Their outputs (entries, exits, new state,
feedback) must be equal, or the script stops; it prints each round's ratio and the median.

Why a commit and not a baseline in this file: the reference is the merger as it was, not a second
implementation of it kept here (ADR-0083).

    PYTHONPATH=. python benchmarks/topk_merge_ab.py --baseline e3beed4 --results /work/res-pc/150 \
        [--preset dskype_mechanisms --dataset synthetic --strategy dskype_keyword --rounds 5]

Without a results folder, `--synthetic QUERIES` runs a synthetic `topk_q` stream instead (datasets/
tiny.py's random objects, |W| = 4,000, k = 20, 32 workers, epochs of |W|/10) and merges every
epoch's inputs (the warm-up's and the measured ones') with both mergers in each round:

    PYTHONPATH=. python benchmarks/topk_merge_ab.py --baseline afec603 --synthetic 20000
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from at_commit import abba_rounds, module_at  # noqa: E402
from audit_strategies import compose, load_stream, run_in_process  # noqa: E402

MERGE_PATH = "harness/families/topk/merge.py"


def merger_at(commit: str):
    """The top-k merge module as it was at `commit`."""
    return module_at(commit, MERGE_PATH)


@contextlib.contextmanager
def merges_kept(calls: list):
    """While inside, every TopkMerger.merge call's (blobs, queries, state) is appended to `calls`."""
    from harness.families.topk import merge as current

    original = current.TopkMerger.merge

    def keep(self, blobs, queries):
        calls.append((list(blobs), queries, self.state))
        return original(self, blobs, queries)

    current.TopkMerger.merge = keep
    try:
        yield calls
    finally:
        current.TopkMerger.merge = original


def measured_merge_inputs(args) -> tuple:
    """(blobs, queries, state) of the first merge of the measured epoch of one in-process run."""
    from strategies.base import FitContext

    cfg = compose(args.preset, [f"dataset={args.dataset}", "workload=topk_q", f"strategy={args.strategy}"],
                  args.results)
    ds, events, warmup = load_stream(cfg, Path(args.results))
    context = FitContext(ds.extent, ds.vocab.column("df").to_numpy().astype(np.float64), int(cfg.seed))
    with merges_kept([]) as calls:
        run_in_process(events, warmup, args.strategy, int(cfg.workers), context,
                       {k: dict(v) for k, v in dict(cfg.index).items()}, {}, 1)
    if not calls:
        raise SystemExit(f"{args.preset} on {args.dataset} merged no top-k results")
    return calls[-1]  # the measured epoch's (one bucket in process)


def synthetic_merge_inputs(args) -> list[tuple]:
    """(blobs, queries, state) of every merge of one in-process run over a synthetic stream."""
    from datasets.tiny import random_objects
    from harness.engine.simulate import simulate
    from harness.families import registry as families
    from harness.families.workload import WorkloadConfig

    objects, df, extent = random_objects(20_000, seed=4, vocab=2_000)
    window = 4_000
    cfg = WorkloadConfig(name="topk_q", family="topk", queries=args.synthetic, window=window,
                         measured_messages=window // 2, k_min=20, k_max=20)
    wl = families.get("topk").build_workload(objects, df, extent, cfg, 3)
    with merges_kept([]) as calls:
        res = simulate(wl.events, wl.warmup, args.strategy, 32, epoch_events=window // 10)
    if not res.exact:
        raise SystemExit("the synthetic run differs from its oracle")
    return calls


def timed_all(module, inputs):
    """timed() over several merges: (their summed seconds, every output)."""
    outs = [timed(module, *x) for x in inputs]
    return sum(o[0] for o in outs), outs


def timed(module, blobs, queries, state):
    merger = module.TopkMerger()
    merger.restore(state)
    t0 = time.perf_counter()
    out = merger.merge(blobs, queries)
    return time.perf_counter() - t0, out, merger.export_state()


def same(a, b) -> bool:
    (_, out_a, st_a), (_, out_b, st_b) = a, b
    feedback = (out_a.feedback is None and out_b.feedback is None) or out_a.feedback.equals(out_b.feedback)
    return (np.array_equal(out_a.keys, out_b.keys) and out_a.rows.equals(out_b.rows) and out_a.exits.equals(out_b.exits)
            and st_a.to_pandas().equals(st_b.to_pandas()) and feedback)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="the commit whose merger is the reference")
    ap.add_argument("--results", help="a results folder whose cache holds the preset's data")
    ap.add_argument("--synthetic", type=int, default=0, metavar="QUERIES",
                    help="merge the epochs of a synthetic stream with this many subscriptions instead")
    ap.add_argument("--preset", default="dskype_mechanisms")
    ap.add_argument("--dataset", default="synthetic")
    ap.add_argument("--strategy", default="dskype_keyword")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    from harness.families.topk import merge as current

    baseline = merger_at(args.baseline)
    if not args.synthetic and not args.results:
        raise SystemExit("--results FOLDER or --synthetic QUERIES is required")
    inputs = synthetic_merge_inputs(args) if args.synthetic else [measured_merge_inputs(args)]
    rows = sum(len(b) for x in inputs for b in x[0]) // 48
    what = f"synthetic ({args.synthetic:,} subscriptions)" if args.synthetic else f"{args.preset} / {args.dataset}"
    print(f"{what} / {args.strategy}: {len(inputs)} merges, about {rows:,} changes", flush=True)
    for module in (baseline, current):  # compile both before timing
        timed_all(module, inputs)
    abba_rounds(args.rounds, lambda: timed_all(baseline, inputs), lambda: timed_all(current, inputs),
                lambda a, b: all(same(x, y) for x, y in zip(a, b)), "merger outputs")

if __name__ == "__main__":
    main()
