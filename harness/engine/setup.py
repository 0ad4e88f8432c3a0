"""What a run's workers and mergers are: built on the driver from the family registry, shipped to
the executors inside the Spark tasks (index factories and merger classes pickle by reference),
so executors never consult a registry that a user's plugin module may not have filled there."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from harness.families import registry as families
from harness.core.events import SNAPSHOT, Events
from harness.engine.rounds import with_first_round
from harness.engine.worker import routing_view
from harness.families.base import IndexContext, Merger, WorkerIndex


@dataclass
class FamilySetup:
    factories: dict[int, Callable[[], WorkerIndex]]  # family code -> worker index constructor
    mergers: dict[int, type[Merger]]  # family code -> merger
    codes: np.ndarray | None = None  # the routers' view of the family column (registry.routing_codes)
    names: dict[int, str] = field(default_factory=dict)
    local_pairs: bool = False  # count the pairs of sole object copies on the workers (local_pairs.py)
    # a worker's epoch in slices of this many events, so one slice's result pairs are in memory at
    # a time (families whose merge is a union of pairs; the others take the epoch whole)
    chunk_events: int = 1 << 15
    contexts: dict[str, IndexContext] = field(default_factory=dict)  # family name -> the workers' context
    # families whose snapshot queries take two rounds (Family.snapshot_rounds: SSTD's two-phase SKQ)
    two_rounds: frozenset[int] = frozenset()

    def fit_sample(self, events: Events, warmup: int, context: IndexContext) -> Events:
        """The warm-up prefix as the strategy fits on it: each family's `fit_view`, then the
        routers' view of the family column."""
        sample = events.take(np.arange(warmup))
        for name in self.names.values():
            sample = families.get(name).fit_view(sample, context)
        return routing_view(sample, self.codes)

    @property
    def merge_queries(self) -> set[int]:
        """Families whose mergers read the epoch's query events."""
        return {c for c, m in self.mergers.items() if m.needs_queries}

    @property
    def local_codes(self) -> set[int]:
        """Families whose pairs of sole object copies the workers count themselves."""
        return {c for c, m in self.mergers.items() if m.union_of_pairs} if self.local_pairs else set()

    @property
    def stores_objects(self) -> bool:
        """Whether a family of the workload has snapshot queries, so that workers keep objects."""
        return any(ctx.look_back > 0 for ctx in self.contexts.values())

    def route(self, router, view: Events, raw: Events | None = None):
        """A batch's copies (`view`: the batch as the router sees it, `routing_view`): objects
        where the router keeps them when workers store objects. Given the batch itself (`raw`),
        the snapshot queries of a two-round family go to their first round's one worker
        (harness/engine/rounds.py); without it, every query where its rectangle reaches."""
        copies = (lambda v: router.storing_copies(v)) if self.stores_objects else router.route
        first = (np.flatnonzero((raw.kind == SNAPSHOT) & np.isin(raw.family, list(self.two_rounds)))
                 if self.two_rounds and raw is not None else ())
        if len(first) == 0:
            return copies(view)
        return with_first_round(copies, view, first)

    @property
    def stateful(self) -> set[int]:
        return {c for c, m in self.mergers.items() if m.stateful}


def stream_families(events: Events) -> list[str]:
    """The query families present in a stream, by name (range for a stream of objects alone)."""
    codes = np.unique(events.family[events.family >= 0])
    return [families.by_code(int(c)).name for c in codes] or ["range"]


def family_setup(workload_families: list[str], routed: frozenset[str] | set[str], context: IndexContext,
                 index_params: dict | None = None, paper_index: dict | None = None,
                 events: Events | None = None) -> FamilySetup:
    """The setup of a run whose workload holds `workload_families`, routed by a strategy that routes
    `routed`; `index_params` maps a family name to its `index.<family>.*` settings. A family set to
    `layout: paper` takes the strategy's own index settings for it (`paper_index`, from
    `Strategy.paper_index`) over the shared ones. With the run's `events`, each family derives its
    stream-wide context (`Family.stream_context`)."""
    index_params = dict(index_params or {})
    factories, mergers, names, contexts, two_rounds = {}, {}, {}, {}, set()
    for name in workload_families:
        fam = families.get(name)
        params = dict(index_params.get(name) or {})
        if params.get("layout") == "paper":
            params.update((paper_index or {}).get(name, {}))
        ctx = fam.stream_context(context, events) if events is not None else context
        factories[fam.code] = fam.index_factory(ctx, params)
        contexts[name] = ctx
        mergers[fam.code] = fam.merger
        names[fam.code] = name
        if ctx.look_back > 0 and fam.snapshot_rounds(params) == 2:
            two_rounds.add(fam.code)
    return FamilySetup(factories, mergers, families.routing_codes(workload_families, routed), names,
                       contexts=contexts, two_rounds=frozenset(two_rounds))


def check_snapshots(strategy) -> None:
    """A workload with snapshot queries runs only where they are answered exactly: under a strategy
    whose router keeps every object where a later snapshot query looks (`Strategy.stores_objects`).
    A ValueError naming the strategies that can otherwise. (Load adjusters may run: objects stay
    where they were kept and snapshot queries follow them, harness/engine/versions.py.)"""
    from strategies import registry

    if not strategy.stores_objects:
        able = [n for n in registry.names() if registry.get(n).stores_objects]
        raise ValueError(f"strategy {strategy.name!r} cannot answer snapshot queries exactly: its router may send an "
                         f"object nowhere and has no rule to keep it (ADR-0054, where objects go); "
                         f"strategies that can: {', '.join(able)}")
