"""Compile every family's kernels once, before the first test or run needs them (`make venv`).

numba caches each kernel's machine code beside its source (`cache=True`), but only a kernel that
ran is cached: a tiny run of the default experiment compiled the range path alone, so the first
test of each other family paid its compilation inside the suite (231 s for the first top-k test).
This runs a tiny stream of every built-in family through every strategy that routes it, SSTD's
six query types in one stream, and each load adjuster once, in process; every process after it
(test workers, Spark's Python workers) loads the kernels from the cache.

`python -m harness.engine.warmup` prints what it ran and its time per family. `--family range
--strategy grid,kdtree,...` compiles only what one run needs: `make venv` compiles the default
run's (the range family, the four baselines) so that the first `make run` starts at once, and
`make test` / `make reproduce` the rest, once (`.venv/.kernels-all`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import yaml

from datasets.tiny import random_objects
from harness.engine.contract import tiny_workload
from harness.engine.simulate import simulate
from harness.families import registry as families
from harness.families.workload import WorkloadConfig
from strategies import registry

CONF = Path(__file__).resolve().parents[2] / "conf"

MIXED = dict(name="mix", family="range", protocol="mix", types=["srq", "skq", "stq", "crq", "ckq", "ctq"],
             queries=40, batch=20, preload_objects=600, sample_queries=10, objects_per_s=100, op="and",
             keywords_max=1, area_fraction=0.02, k_min=2, k_max=5, ctq_span_s=4.0, ctq_step_hours=40,
             ctq_window_hours=60, tau_hours=300)
# each adjuster with a strategy it moves (their kernels: unit loads, plans, state moves)
ADJUSTED = (("kdt", "gr"), ("kdt", "si"), ("kdt", "ra"), ("grid", "dp"), ("qttree", "pm"), ("qttree", "fm"),
            ("qttree", "fg"), ("agrid", "tornado"))


def streams() -> dict[str, object]:
    """A tiny workload of each built-in family, and SSTD's mixed one."""
    objects, df, extent = random_objects(1500, seed=4)
    out = {}
    for name in families.names():
        fam = families.get(name)
        if fam.__module__.startswith("harness.families."):
            out[name] = tiny_workload(fam)  # its own generator (Family.tiny_workload)
    out["mixed"] = families.get("range").build_workload(objects, df, extent, WorkloadConfig(**MIXED), 1)
    return out


def default_run_strategies() -> list[str]:
    """The strategies of the default experiment (conf/strategy/baselines.yaml's `include`)."""
    conf = yaml.safe_load((CONF / "strategy" / "baselines.yaml").read_text())
    return list(conf["include"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.engine.warmup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", default=None,
                        help="comma-separated families (default: every built-in one, and SSTD's mixed stream)")
    parser.add_argument("--strategy", default=None, help="comma-separated strategies (default: every one "
                                                            "that routes the family, and each adjuster once)")
    parser.add_argument("--default-run", action="store_true",
                        help="what `make run` needs: the range family and conf/strategy/baselines.yaml's strategies")
    args = parser.parse_args(argv)
    if args.default_run:
        args.family, args.strategy = "range", ",".join(default_run_strategies())
    every = streams()
    chosen = args.family.split(",") if args.family else list(every)
    unknown = [f for f in chosen if f not in every]
    if unknown:
        print(f"--family {','.join(unknown)} is unknown; allowed: {', '.join(every)}", file=sys.stderr)
        return 2
    only = args.strategy.split(",") if args.strategy else None
    if only:
        known = set(registry.names())
        bad = [s for s in only if s not in known]
        if bad:
            print(f"--strategy {','.join(bad)} is unknown; allowed: {', '.join(sorted(known))}", file=sys.stderr)
            return 2
    t_all = time.perf_counter()
    for name in chosen:
        wl = every[name]
        t0 = time.perf_counter()
        family = "range" if name == "mixed" else name
        able = [s for s in registry.supporting(family)
                if (name != "mixed" or registry.get(s).stores_objects) and (only is None or s in only)]
        for strategy in able:
            simulate(wl.events, wl.warmup, strategy, 3, epoch_events=len(wl.events) // 3)
        if name == "range" and only is None:
            for strategy, adjust in ADJUSTED:
                simulate(wl.events, wl.warmup, strategy, 4, epoch_events=len(wl.events) // 6, adjust=adjust)
        print(f"warm-up: {name}: {len(able)} strategies in {time.perf_counter() - t0:.1f} s", flush=True)
    what = "every family's kernels" if args.family is None and only is None else "the kernels asked for"
    print(f"warm-up: {what} compiled and cached in {time.perf_counter() - t_all:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
