"""DSkype's replication ratio (Table 5) at one preset cell, in process: `stored_replication` as the
runs read it (the mean over the measured epochs' ends, after the first thresholds prune;
harness/measure/summary.py) beside the copies held at the measured part's start (the warm-up's
registrations, theta = 0: what the runs read before issue 47), per mechanism. The preset's epochs
(a tenth of |W| in the DSkype presets) cut the measured part, as a run does. Usage, from the
repository root:

    PYTHONPATH=. python benchmarks/dskype_replication.py dskype_table5 workload=topk_q dataset=synthetic \
        workload.window=20000 --results /tmp/audit

The dataset is prepared once (with Spark) into `<results>/cache` (benchmarks/audit_strategies.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    from benchmarks.audit_strategies import compose, load_stream
    from datasets.workloads.anomalies import normalise_prefix
    from harness.core.events import INSERT
    from harness.engine.assembly import assemble_run
    from harness.engine.epochs import epoch_bounds
    from harness.engine.executors import InProcessExecutor
    from harness.engine.loop import run_epochs
    from harness.measure.summary import stored_replication
    from strategies import registry
    from strategies.base import FitContext

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("preset")
    ap.add_argument("overrides", nargs="*")
    ap.add_argument("--strategies", nargs="+", default=["dskype_keyword", "dskype_prefix"])
    ap.add_argument("--results", default="results")
    a = ap.parse_args(argv)
    root = Path(a.results).resolve()
    cfg = compose(a.preset, a.overrides, str(root))
    ds, events, warmup = load_stream(cfg, root)
    events, warmup, anomalies = normalise_prefix(events, warmup)
    n = int(cfg.workers)
    context = FitContext(ds.extent, ds.vocab.column("df").to_numpy().astype(np.float64), int(cfg.seed))
    live = int((events.kind[:warmup] == INSERT).sum())
    print(f"{a.preset} {' '.join(a.overrides)}: |W| = {cfg.workload.window}, |S| = {live}, {n} workers, "
          f"epochs of {cfg.epochs.size:g} events")
    print("| strategy | at the measured start | stored_replication (epochs' ends) | epochs | seconds |")
    print("|---|---:|---:|---:|---:|")
    for name in a.strategies:
        t0 = time.time()
        cls = registry.get(name)
        run = assemble_run(cls, events, warmup, context, n, dict(cfg.index), anomalies=anomalies)
        router = cls().fit(run.sample, n, cls.make_params({}), run.context)
        loop = run_epochs(InProcessExecutor(events, run.setup, n), router, events, run.setup,
                          epoch_bounds(events, warmup, cfg.epochs.by, float(cfg.epochs.size)), run.adjuster, n, 1)
        m = loop.measured
        start = sum(st.get("restored", 0) for st in m[0].worker_stats.values()) / live if live else float("nan")
        print(f"| {name} | {start:.3f} | {stored_replication(m, events, warmup):.3f} | {len(m)} | "
              f"{time.time() - t0:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
