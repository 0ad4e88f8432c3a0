"""One run's assembly, whichever executor runs it: the families of its stream, their worker
indexes and mergers (with the strategy's paper index under `layout: paper`), the fit sample and
fit context, the local-pairs and migratable rules, the load adjuster, and the brute-force oracle's
digest.

The Spark runner (harness/run/runner.py) and the in-process executor (harness/engine/simulate.py)
both call `assemble_run`, so the two cannot drift: they once did, and KOP and SOP ran the shared
kNN grid on Spark while the in-process path gave them their papers' indexes (ADR-0063). Only the
fit itself differs (a pool process or the caller's), and what carries the epochs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from harness.core.events import Events, digest_of
from harness.engine.setup import FamilySetup, check_snapshots, family_setup, stream_families
from harness.families import registry as families
from harness.families.base import IndexContext
from strategies.adjust_base import Adjuster, get_adjuster
from strategies.base import FitContext


@dataclass
class RunAssembly:
    families: list[str]  # the query families of the run's stream
    setup: FamilySetup  # their worker indexes and mergers, as the executors build them
    sample: Events  # the warm-up prefix as the strategy fits on it
    context: FitContext  # what the strategy and the adjuster know besides the sample
    adjuster: Adjuster | None  # None: adjust=none

    def indexes(self) -> str:
        """The worker index each family runs, with its settings, as JSON (the run row's `indexes`):
        what a reader checks to see that `layout: paper` gave a strategy its paper's index."""
        return describe_indexes(self.setup)


def run_families(events: Events, workload_family: str | None = None) -> list[str]:
    """The query families a run's stream holds: the workload's own family, and the others a mixed
    workload (SSTD's six types at once) brings; a stream of objects alone is range's."""
    present = stream_families(events) if (events.family >= 0).any() else []
    named = {workload_family} if workload_family else set()
    return sorted(set(present) | named) or ["range"]


def check_adjustable(family_names: list[str], adjust: str, what: str = "stream") -> None:
    """A load adjuster runs only where every family's worker state can move between workers
    (`Family.migratable`): a ValueError naming the first that cannot (in a `what`: the stream, or
    the configured workload before Spark starts)."""
    fixed = [n for n in family_names if not families.get(n).migratable]
    if adjust != "none" and fixed:
        raise ValueError(f"adjust={adjust} cannot run a {fixed[0]!r} {what}: its workers' state does not move "
                         "between workers; allowed: adjust=none")


def assemble_run(strategy: type, events: Events, warmup: int, context: FitContext, n_workers: int,
                 index_params: dict | None = None, *, workload_family: str | None = None,
                 adjust: "str | Adjuster" = "none", adjust_params: dict | None = None, local_pairs: bool = True,
                 keep_pairs: bool = False, anomalies: dict | None = None,
                 setup: FamilySetup | None = None, fit_prefix: Events | None = None) -> RunAssembly:
    """Everything a run needs before its router is fitted, from the (normalised) stream.

    `index_params` maps a family name to its `index.<family>.*` settings; a family set to
    `layout: paper` takes `strategy.paper_index` for it. Pairs of sole objects are counted on the
    workers (`local_pairs`) only when no pair is kept (`keep_pairs`) and the stream's object ids are
    unique (`anomalies["duplicate_object_ids"] == 0`, what normalising the stream found). `adjust`
    names an adjuster (built with its `adjust_params`) or is one already built (a test's own);
    `setup` replaces the family setup (a test's own indexes), under the same rules. `fit_prefix`:
    the warm-up the strategy fits on when `events` is not the whole stream (the count mode's object
    sample, harness/counts/: the fit stays the full run's)."""
    names = run_families(events, workload_family)
    index_context = IndexContext(context.extent, context.vocab_size)
    if setup is None:
        setup = family_setup(names, strategy.families, index_context, dict(index_params or {}),
                             strategy.paper_index, events)
    if setup.stores_objects:
        check_snapshots(strategy)
    setup.local_pairs = bool(local_pairs and not keep_pairs and (anomalies or {}).get("duplicate_object_ids", 1) == 0)
    sample = (setup.fit_sample(events, warmup, index_context) if fit_prefix is None
              else setup.fit_sample(fit_prefix, len(fit_prefix), index_context))
    context = replace(context, family_contexts={**setup.contexts, **context.family_contexts})
    if isinstance(adjust, Adjuster):
        adjuster = adjust
    else:
        adj_cls = get_adjuster(adjust)
        adjuster = adj_cls(adj_cls.make_params(dict(adjust_params or {})), n_workers, context, strategy.name)
    check_adjustable(names, adjuster.name)
    return RunAssembly(names, setup, sample, context, None if adjuster.name == "none" else adjuster)


def describe_indexes(setup: FamilySetup) -> str:
    """Each family's worker index class and settings, as JSON keyed by family name."""
    out = {}
    for code, factory in sorted(setup.factories.items()):
        if isinstance(factory, partial):
            settings = ", ".join(f"{k}={v}" for k, v in sorted(factory.keywords.items()))
            out[setup.names[code]] = f"{getattr(factory.func, '__name__', factory.func)}({settings})"
        else:
            out[setup.names[code]] = getattr(factory, "__name__", repr(factory))
    return json.dumps(out, sort_keys=True)


def oracle_digest(events: Events, names: list[str]) -> str:
    """The centralised brute-force answer of every family of the run, as a digest."""
    keys = [families.get(n).oracle(events) for n in names]
    return digest_of(np.concatenate(keys) if keys else np.zeros(0, np.int64))
