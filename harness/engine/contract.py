"""The contracts a query family and a strategy keep, as functions an author runs on their own class
(the way scikit-learn's `check_estimator` is run on an estimator): `check_family(cls)` and
`check_strategy(cls)`. tests/contract/ runs them over every registered family and strategy, so a
plugin that passes them passes what the built-in ones pass.

- `check_family_parts(cls)`: what the class declares is usable: registered under its name and
  code, an index and a merger of the right kinds, default index settings that pass its own check,
  a family it routes like that exists, workload knobs in the workload schema, figures with registry
  entries (harness/core/metric.py) and a `summarise` that returns only those.
- `check_family(cls)`: the parts, then the family's tiny workload (its own generator, or a given
  stream) through every strategy that routes it, in process over several epochs and worker
  counts: each run's results equal the family's brute-force oracle. A strategy that cannot answer
  snapshot queries exactly must refuse a stream that has them.
- `check_strategy(cls)`: its parameters refuse an unknown key naming the valid ones, its router
  routes exactly the families the class declares (`route_<family>` methods), the routing
  invariant holds on small range streams (every matching pair meets on a common worker, a deletion
  reaches every worker its insertion reached), and each family it routes gives the oracle's results.

Each raises `ContractError` naming what failed, and returns what it checked.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass

import numpy as np

from datasets.tiny import random_objects
from datasets.workloads.config import SNAPSHOT_PROTOCOLS, Workload
from datasets.workloads.range import build_workload as build_range_workload
from harness.core.events import DELETE, INSERT, OBJECT, SNAPSHOT, unpack_keys
from harness.core.metric import BETTER, Metric
from harness.engine.simulate import simulate
from harness.families import registry as family_registry
from harness.families.base import Family, Merger, WorkerIndex
from harness.families.workload import workload_schema
from strategies import registry as strategy_registry
from strategies.base import FitContext, Strategy, route_stream, routes

TINY = dict(name="tiny", queries=150, updates=300)  # a family's tiny workload, before its own settings
REFUSAL = "cannot answer snapshot queries exactly"


class ContractError(AssertionError):
    """A family or strategy class breaks the contract (the message says where)."""


def _require(ok, message: str) -> None:
    if not ok:
        raise ContractError(message)


# -- families -------------------------------------------------------------------------------------


def check_family_parts(cls) -> list[str]:
    """The family's declarations (module docstring); returns the parts checked."""
    _require(isinstance(cls, type) and issubclass(cls, Family), f"{cls!r} is not a Family subclass")
    name = getattr(cls, "name", None)
    _require(isinstance(name, str) and name, f"{cls.__qualname__}: `name` must be a non-empty string")
    _require(name in family_registry.names() and family_registry.get(name) is cls,
             f"family {name!r}: not registered as {cls.__qualname__} (defining the class registers it; a plugin's "
             "module must be imported: families=[module] in the config, or families.load_plugins)")
    _require(family_registry.by_code(cls.code) is cls, f"family {name!r}: code {cls.code} finds another family")
    _require(isinstance(cls.index, type) and issubclass(cls.index, WorkerIndex),
             f"family {name!r}: `index` must be a WorkerIndex subclass")
    _require(cls.index.family == name, f"family {name!r}: its index says family {cls.index.family!r}")
    _require(isinstance(cls.merger, type) and issubclass(cls.merger, Merger),
             f"family {name!r}: `merger` must be a Merger subclass")
    _require(cls.oracle is not Family.oracle, f"family {name!r}: no `oracle` (the brute force every run is checked "
                                              "against)")
    cls.check_params(cls.make_params({}))  # the defaults run
    if cls.routes_like is not None:
        _require(cls.routes_like != name and cls.routes_like in family_registry.names(),
                 f"family {name!r}: routes_like={cls.routes_like!r} is not another registered family")
    bad = sorted(set(cls.snapshot_protocols) - set(SNAPSHOT_PROTOCOLS))
    _require(not bad, f"family {name!r}: snapshot_protocols {bad} are not the snapshot generator's "
                      f"({', '.join(SNAPSHOT_PROTOCOLS)})")
    _check_knobs(cls)
    _check_figures(cls)
    return ["parts"]


def _check_knobs(cls) -> None:
    knobs = cls.WorkloadKnobs
    _require(knobs is None or is_dataclass(knobs), f"family {cls.name!r}: WorkloadKnobs must be a dataclass")
    schema = {f.name for f in fields(workload_schema())}
    own = [f.name for f in fields(knobs)] if knobs is not None else []
    missing = [k for k in (*own, *cls.workload_fields) if k not in schema]
    _require(not missing, f"family {cls.name!r}: workload knobs {missing} are not in the workload schema (a plugin's "
                          "WorkloadKnobs join it when its module is imported before the schema is first composed, "
                          "harness/families/workload.py)")


def _check_figures(cls) -> None:
    declared = [m.name for m in cls.metrics]
    _require(all(isinstance(m, Metric) and m.better in BETTER for m in cls.metrics),
             f"family {cls.name!r}: `metrics` must be harness.core.metric.Metric entries, better in {BETTER}")
    _require(len(declared) == len(set(declared)), f"family {cls.name!r}: a metric is declared twice")
    import pandas as pd

    empty = pd.DataFrame({c: [0.0] for c in ("objects", "busy_s", "results", *cls.counters)})
    extra = sorted(set(cls.summarise(empty, [])) - set(declared))
    _require(not extra, f"family {cls.name!r}: summarise returns {extra}, which `metrics` does not declare")
    if cls.snapshot_type is not None:
        others = [n for n in family_registry.names() if n != cls.name and family_registry.get(n).snapshot_type == cls.snapshot_type]
        _require(not others, f"family {cls.name!r}: snapshot_type {cls.snapshot_type!r} is also {others[:1]}'s")


def tiny_workload(cls, seed: int = 7) -> Workload:
    """The family's tiny workload from its own generator (`TINY`, then `Family.tiny_workload`)
    over 1,500 random objects: what `check_family` and the kernels' warm-up run."""
    objects, df, extent = random_objects(1500, seed=4)
    cfg = workload_schema()(**{**TINY, "family": cls.name, **cls.tiny_workload})
    return cls.build_workload(objects, df, extent, cfg, seed)


def check_family(cls, stream: Workload | None = None, strategies: list | None = None, workers=(3, 8),
                 epochs: int = 4) -> list[str]:
    """The parts, then `stream` (default: `tiny_workload(cls)`) through each of `strategies`
    (names or Strategy classes; default: every registered one routing the family) at each worker
    count in `workers`, cut into about `epochs` epochs: results equal the oracle's. Returns one
    line per run checked."""
    done = check_family_parts(cls)
    wl = stream if stream is not None else tiny_workload(cls)
    mine = wl.events.family == cls.code
    _require(mine.any(), f"family {cls.name!r}: its workload has no query of the family (code {cls.code})")
    _require(len(cls.oracle(wl.events)) > 0, f"family {cls.name!r}: the oracle finds no result in its workload, so "
                                             "the runs would compare nothing")
    names = list(strategies) if strategies is not None else strategy_registry.supporting(cls.name)
    _require(names, f"family {cls.name!r}: no strategy routes it (declare routes_like or routes_everywhere, or give "
                    "a router route_" + cls.name + ")")
    for s in names:
        done += check_runs(cls.name, wl, s, workers, epochs)
    return done


def check_runs(family: str, wl: Workload, strategy, workers=(3, 8), epochs: int = 4) -> list[str]:
    """`wl` (a workload of `family`) through `strategy` (a name or a Strategy class) at each worker
    count, in about `epochs` epochs: the oracle's results, or a refusal of snapshot queries the
    strategy cannot answer exactly (module docstring)."""
    cls = strategy if isinstance(strategy, type) else strategy_registry.get(strategy)
    out = []
    snapshots = bool((wl.events.kind == SNAPSHOT).any())
    for n in workers:
        what = f"family {family!r} under strategy {cls.name!r} at {n} workers"
        if snapshots and not cls.stores_objects:
            try:
                simulate(wl.events, wl.warmup, cls, n)
            except ValueError as exc:
                _require(REFUSAL in str(exc), f"{what}: refused snapshot queries with {exc!r}")
                out.append(f"{what}: refused (snapshot queries)")
                continue
            raise ContractError(f"{what}: ran snapshot queries it cannot answer exactly (stores_objects=False)")
        res = simulate(wl.events, wl.warmup, cls, n, epoch_events=max(len(wl.events) // epochs, 1))
        _require(len(res.epochs) >= 2, f"{what}: ran {len(res.epochs)} measured epoch(s); the check needs several")
        _require(res.exact, f"{what}: digest {res.digest}, the oracle's {res.oracle_digest}")
        out.append(f"{what}: {res.digest} over {len(res.epochs)} epochs")
    return out


# -- strategies ------------------------------------------------------------------------------------


def check_strategy(cls, families: list[str] | None = None, workers=(3,), seeds=(0, 1, 2)) -> list[str]:
    """The strategy's contract (module docstring): parameters, declared families, the routing
    invariant on range streams of `seeds`, and each family of `families` (default: every
    registered family it routes; [] for none) through it at each worker count against the oracle.
    Returns what it checked."""
    _require(isinstance(cls, type) and issubclass(cls, Strategy) and getattr(cls, "name", None),
             f"{cls!r} is not a Strategy subclass with a name")
    if cls.name in strategy_registry.names():
        _require(strategy_registry.get(cls.name) is cls, f"strategy {cls.name!r}: another class is registered under its name")
    unknown = sorted(f for f in cls.families if f not in family_registry.names())
    _require(cls.families and not unknown, f"strategy {cls.name!r}: families {sorted(cls.families)} must name "
                                           f"registered query families ({unknown} are not)")
    cls.make_params({})
    try:
        cls.make_params({"no_such_knob_for_the_contract": 1})
    except ValueError as exc:
        _require("valid parameters" in str(exc), f"strategy {cls.name!r}: an unknown parameter's error must name the "
                                                 f"valid ones; got {exc}")
    else:
        raise ContractError(f"strategy {cls.name!r}: accepted an unknown parameter")
    done = ["parameters"]
    if routes(cls, "range"):
        done += _check_invariant(cls, seeds)
    names = families if families is not None else [f for f in family_registry.names() if routes(cls, f)]
    for name in names:
        done += check_runs(name, tiny_workload(family_registry.get(name)), cls, workers, 4)
    return done


def _check_invariant(cls, seeds) -> list[str]:
    """On small STS streams: the router routes the families its class declares; every (query,
    object) pair of the range oracle meets on a common worker; a deletion reaches exactly the
    workers its insertion reached."""
    oracle = family_registry.get("range").oracle
    out = []
    for seed in seeds:
        objects, df, extent = random_objects(2000, seed=seed)
        cfg = workload_schema()(name="tiny", profile=("q1", "q2", "q3")[seed % 3], queries=60, updates=120)
        wl = build_range_workload(objects, df, extent, cfg, seed)
        ev, n = wl.events, 2 + seed % 7
        router = cls().fit(wl.sample, n, cls.make_params({}), FitContext(extent, df.astype(float)))
        _require(router.families == cls.families, f"strategy {cls.name!r}: its router routes "
                 f"{sorted(router.families)} (route_<family> methods), the class declares {sorted(cls.families)}")
        rows, workers = route_stream(router, ev)
        _require(rows.dtype == np.int64 and workers.dtype == np.int64, f"strategy {cls.name!r}: route() must return "
                                                                       "int64 (rows, workers)")
        _require(workers.min(initial=0) >= 0 and workers.max(initial=0) < n,
                 f"strategy {cls.name!r}: routed to a worker outside 0..{n - 1}")
        sets = [set() for _ in range(len(ev))]
        for r, w in zip(rows.tolist(), workers.tolist()):
            sets[r].add(w)
        inserted, objects_at = {}, {}
        for r in range(len(ev)):
            if ev.kind[r] == INSERT:
                inserted[int(ev.id[r])] = r
            elif ev.kind[r] == OBJECT:
                objects_at.setdefault(int(ev.id[r]), []).append(r)
            elif ev.kind[r] == DELETE and int(ev.id[r]) in inserted:
                _require(sets[r] == sets[inserted[int(ev.id[r])]], f"strategy {cls.name!r} (seed {seed}, {n} "
                         f"workers): deletion of query {int(ev.id[r])} routed unlike its insertion")
        qids, oids = unpack_keys(oracle(ev))
        for q, o in zip(qids.tolist(), oids.tolist()):
            q_workers = sets[inserted[q]]
            _require(any(sets[r] & q_workers for r in objects_at[o]),
                     f"strategy {cls.name!r} (seed {seed}, {n} workers): pair (query {q}, object {o}) never meets")
        out.append(f"routing invariant: seed {seed}, {n} workers, {len(qids)} pairs")
    return out
