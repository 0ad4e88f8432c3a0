"""Audit of strategies side by side on one preset cell (issue 40, part 2: why a published result
does not reproduce), e.g. the QT-tree against the Quadtree baseline, or DkM-SKS with and without
its cost floor.

Runs in process (harness.engine.simulate, no Spark once the dataset is prepared), on the preset's
own stream: for each strategy, the tree's split kinds, the copies each measured object makes
(stored where `store_objects` keeps it), the copies per worker of objects and of queries, and the
workers' measured busy time (the busiest, the mean, their ratio). Prints one table; `--json` adds
the figures as JSON. Usage, from the repository root:

    PYTHONPATH=. python benchmarks/audit_strategies.py sstd_srq workload.area_fraction=1e-6 \
        --strategies qttree quadtree --results /tmp/audit
    PYTHONPATH=. python benchmarks/audit_strategies.py dkmsks_workers workload=knn_q dataset=synthetic \
        workers=20 --strategies dkmsks floor=dkmsks:min_cost_fraction=0.1 --results /tmp/audit

A strategy is a registered name, or `label=name:key=value,key=value` for a variant with its
parameters (numbers parsed as such).

The dataset is prepared once (with Spark) into `<results>/cache` if it is not there already.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def compose(preset: str, overrides: list[str], results: str):
    from hydra import compose as hydra_compose, initialize_config_dir

    from harness.run.config import register_configs

    register_configs()
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        return hydra_compose(config_name="config",
                             overrides=[f"experiment={preset}", *overrides, f"results_dir={results}",
                                        "mlflow.enabled=false"])


def load_stream(cfg, root: Path):
    from datasets import prepare_dataset
    from harness.run.workload_cache import load_or_build_workload

    cache = root / "cache"
    try:
        ds = prepare_dataset(cfg.dataset, None, cache / "datasets")
    except Exception:  # noqa: BLE001 - not cached yet: prepare it with Spark once
        from harness.run.spark import get_session

        ds = prepare_dataset(cfg.dataset, get_session("local[2]", conf={}), cache / "datasets")
    events, warmup, _, _ = load_or_build_workload(ds, cfg, cache)
    return ds, events, warmup


def parse_variant(spec: str) -> tuple[str, str, dict]:
    """`name` or `label=name:key=value,key=value` -> (label, strategy name, parameters)."""
    label, _, rest = spec.partition("=")
    if not rest:
        return spec, spec, {}
    name, _, kv = rest.partition(":")
    params = {}
    for item in filter(None, kv.split(",")):
        k, _, v = item.partition("=")
        try:
            params[k] = int(v)
        except ValueError:
            try:
                params[k] = float(v)
            except ValueError:
                params[k] = v
    return label, name, params


def run_in_process(events, warmup, name, n_workers, context, index_params, params, repeat):
    """(fitted router, last measured epoch) of one strategy, as harness.engine.simulate runs it
    (one measured epoch over the whole measured stream), without the oracle."""
    from datasets.workloads.anomalies import normalise_prefix
    from harness.engine.assembly import assemble_run
    from harness.engine.epochs import epoch_bounds
    from harness.engine.executors import InProcessExecutor
    from harness.engine.loop import run_epochs
    from strategies import registry

    events, warmup, anomalies = normalise_prefix(events, warmup)
    cls = registry.get(name)
    run = assemble_run(cls, events, warmup, context, n_workers, index_params, anomalies=anomalies)
    router = cls().fit(run.sample, n_workers, cls.make_params(params), run.context)
    loop = run_epochs(InProcessExecutor(events, run.setup, n_workers), router, events, run.setup,
                      epoch_bounds(events, warmup, "count", 0), run.adjuster, n_workers, 1, repeat=repeat)
    return router, loop.epochs[-1]


def audit(cfg, ds, events, warmup, strategies: list[str], repeat: int = 3, oracle: bool = False) -> dict:
    from harness.core.events import DELETE, INSERT, OBJECT
    from harness.engine.simulate import simulate
    from strategies import registry
    from strategies.base import FitContext

    n_workers = int(cfg.workers)
    context = FitContext(ds.extent, ds.vocab.column("df").to_numpy().astype(np.float64), int(cfg.seed))
    measured = events.take(np.arange(warmup, len(events)))
    is_obj = measured.kind == OBJECT
    out = {}
    for spec in strategies:
        label, name, params = parse_variant(spec)
        if oracle:
            sim = simulate(events, warmup, name, n_workers, context=context, index_params=dict(cfg.index),
                           strategy_params=params, repeat=repeat)
            router, last, exact = sim.router, sim.epochs[-1], bool(sim.exact)
        else:  # simulate's steps without its oracle (minutes on a preset's stream; the runs check it)
            router, last = run_in_process(events, warmup, name, n_workers, context, dict(cfg.index), params, repeat)
            exact = None
        try:
            rows, workers = router.storing_copies(measured)
        except ValueError:  # a query family it routes only through the family's protocol (SKQ's two phases)
            o_rows, o_workers = router.store_objects(measured, np.flatnonzero(is_obj))
            rows, workers = np.asarray(o_rows), np.asarray(o_workers)
        obj_w = np.bincount(workers[is_obj[rows]], minlength=n_workers)
        qry_w = np.bincount(workers[~is_obj[rows]], minlength=n_workers)
        busy = np.array([st["busy_s"] for _, st in sorted(last.worker_stats.items())])
        # subscription copies the workers held at the measured part's start / live subscriptions
        # (before the first thresholds prune; the runs' `stored_replication` reads the measured
        # epochs' ends, harness/measure/summary.py; benchmarks/dskype_replication.py reads both)
        held = sum(st.get("restored", 0) for st in last.worker_stats.values())
        held_end = sum(st.get("kept", 0) for st in last.worker_stats.values())  # after the epoch's pruning
        before = events.kind[:warmup]
        live = int((before == INSERT).sum()) - int((before == DELETE).sum())
        model = {}
        if hasattr(router, "leaf_cost") and hasattr(router, "leaf_worker"):  # the QT-tree's Eq. 2 leaf weights
            lc, lw = np.asarray(router.leaf_cost, float), np.asarray(router.leaf_worker, np.int64)
            model = {"leaves": int(len(lc)), "zero_cost_leaves": int((lc <= 0).sum()),
                     "model_load_per_worker": np.round(np.bincount(lw, weights=lc, minlength=n_workers)
                                                       / max(lc.sum(), 1e-300), 3).tolist()}
        desc = router.describe()
        kinds = desc.get("split_kinds") or desc.get("splits") or {}
        out[label] = {
            "exact": exact,
            "results": int(last.result_count),
            "splits": kinds,
            "object_copies_per_object": float(is_obj[rows].sum() / max(int(is_obj.sum()), 1)),
            "query_copies_per_query": float((~is_obj[rows]).sum() / max(int((~is_obj).sum()), 1)),
            "objects_busiest_worker": int(obj_w.max()),
            "queries_busiest_worker": int(qry_w.max()),
            "stored_replication": float(held / live) if live > 0 else float("nan"),
            "stored_replication_end": float(held_end / live) if live > 0 else float("nan"),
            "busy_max_ms": float(busy.max() * 1e3),
            "busy_mean_ms": float(busy.mean() * 1e3),
            "busy_max_mean": float(busy.max() / busy.mean()) if busy.mean() > 0 else float("nan"),
            "busy_per_worker_ms": [round(float(b) * 1e3, 2) for b in busy],
            "objects_per_worker": obj_w.tolist(),
            "queries_per_worker": qry_w.tolist(),
            **model,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("preset")
    ap.add_argument("overrides", nargs="*")
    ap.add_argument("--strategies", nargs="+", default=["qttree", "quadtree"])
    ap.add_argument("--results", default="results")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--oracle", action="store_true", help="also check each run against the oracle (slow)")
    a = ap.parse_args(argv)
    root = Path(a.results).resolve()
    cfg = compose(a.preset, a.overrides, str(root))
    ds, events, warmup = load_stream(cfg, root)
    res = audit(cfg, ds, events, warmup, a.strategies, a.repeat, a.oracle)
    print(f"{a.preset} {' '.join(a.overrides)}: {len(events) - warmup} measured events, {cfg.workers} workers")
    cols = ["exact", "results", "object_copies_per_object", "query_copies_per_query", "objects_busiest_worker",
            "queries_busiest_worker", "stored_replication", "stored_replication_end", "busy_max_ms", "busy_mean_ms", "busy_max_mean"]
    print("| strategy | " + " | ".join(cols) + " | splits |")
    print("|---" * (len(cols) + 2) + "|")
    for name, r in res.items():
        vals = [f"{r[c]:.3g}" if isinstance(r[c], float) else str(r[c]) for c in cols]
        print(f"| {name} | " + " | ".join(vals) + f" | {r['splits']} |")
    # per-copy costs across every worker of every strategy: busy ~ a * objects + b * queries
    x = np.array([[o, q] for r in res.values() for o, q in zip(r["objects_per_worker"], r["queries_per_worker"])], float)
    y = np.array([b for r in res.values() for b in r["busy_per_worker_ms"]], float)
    if len(y) >= 3 and np.linalg.matrix_rank(x) == 2:
        (a_obj, b_q), *_ = np.linalg.lstsq(x, y, rcond=None)
        share = [a_obj * r["objects_busiest_worker"] / r["busy_max_ms"] for r in res.values()]
        print(f"least squares over the workers: {a_obj * 1e3:.2f} us per object copy, {b_q * 1e3:.2f} us per query copy; "
              "object copies' share of the busiest worker's time: "
              + ", ".join(f"{k} {v:.0%}" for k, v in zip(res, share)))
    for name, r in res.items():
        if "model_load_per_worker" in r:
            print(f"{name}: {r['leaves']} leaves, {r['zero_cost_leaves']} with Eq. 2 cost 0; model load share per "
                  f"worker {r['model_load_per_worker']}; objects per worker {r['objects_per_worker']}; busy ms "
                  f"{r['busy_per_worker_ms']}")
    if a.json:
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
