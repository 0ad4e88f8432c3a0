"""Compile every family's kernels once, before the first test or run needs them (`make venv`).

numba caches each kernel's machine code beside its source (`cache=True`), but only a kernel that
ran is cached: a tiny run of the default experiment compiled the range path alone, so the first
test of each other family paid its compilation inside the suite (231 s for the first top-k test).
This runs a tiny stream of every built-in family through every strategy that routes it, SSTD's
six query types in one stream, and each load adjuster once, in process; every process after it
(test workers, Spark's Python workers) loads the kernels from the cache.

`python -m harness.engine.warmup` prints what it ran and its time per family.
"""

from __future__ import annotations

import sys
import time

from datasets.tiny import random_objects
from datasets.workloads.config import WorkloadConfig
from harness.engine.simulate import simulate
from harness.families import registry as families
from strategies import registry

# a family's generator settings where the shared ones do not make its tiny workload (terms: SSTD's
# CTQ registrations and their reports over a preloaded store)
SETTINGS = {"frequent_terms": dict(protocol="ctq", queries=40, preload_objects=800, objects_per_s=100, ctq_span_s=6.0,
                          area_fraction=0.02, ctq_step_hours=40.0, ctq_window_hours=60.0, k_min=3, k_max=5)}
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
        if not fam.__module__.startswith("harness.families."):
            continue
        cfg = WorkloadConfig(**{**dict(name="tiny", family=name, queries=150, updates=300, window=300,
                                       measured_messages=500), **SETTINGS.get(name, {})})
        out[name] = fam.build_workload(objects, df, extent, cfg, 7)
    out["mixed"] = families.get("range").build_workload(objects, df, extent, WorkloadConfig(**MIXED), 1)
    return out


def main() -> int:
    t_all = time.perf_counter()
    for name, wl in streams().items():
        t0 = time.perf_counter()
        family = "range" if name == "mixed" else name
        able = [s for s in registry.supporting(family)
                if name != "mixed" or registry.get(s).stores_objects]
        for strategy in able:
            simulate(wl.events, wl.warmup, strategy, 3, epoch_events=len(wl.events) // 3)
        if name == "range":
            for strategy, adjust in ADJUSTED:
                simulate(wl.events, wl.warmup, strategy, 4, epoch_events=len(wl.events) // 6, adjust=adjust)
        print(f"warm-up: {name}: {len(able)} strategies in {time.perf_counter() - t0:.1f} s", flush=True)
    print(f"warm-up: every family's kernels compiled and cached in {time.perf_counter() - t_all:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
