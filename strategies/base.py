"""The strategy contract: `Strategy.fit(sample, n_workers, params, context) -> Router`.

A Router is plain data (numpy arrays) plus vectorised routing functions, cheap to pickle and
broadcast to Spark executors. It turns a batch of events into (row, worker) pairs: objects by
`route_objects`, queries by `route_queries`, which dispatches on the query family so that a
router for range subscriptions never has to assume that every query is a rectangle.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from harness.core.events import FAMILY_NAMES, INSERT, OBJECT, Events
from harness.core.params import ParamsMixin
from harness.families import registry as families


FAMILY_LOW = -128  # the family column is int8: codes are counted from here (a bincount, not a sort)


class UnsupportedFamilyError(ValueError):
    """A strategy was asked to route a query family it does not define routing for."""


@dataclass(frozen=True)
class FitContext:
    """What every strategy may know besides the sample: the space, the vocabulary, the seed."""

    extent: tuple[float, float, float, float]  # xmin, ymin, xmax, ymax (km)
    term_df: np.ndarray  # document frequency of each term id (id = frequency rank)
    seed: int = 0
    # the workers' context per family name when a family derives one from the stream
    # (Family.stream_context: top-k's term weights, which DSkype's prefix routing must score with)
    family_contexts: dict = field(default_factory=dict)

    @property
    def vocab_size(self) -> int:
        return len(self.term_df)


Pairs = tuple[np.ndarray, np.ndarray]  # (row index into the batch, worker id), both int64


def empty_pairs() -> Pairs:
    return np.zeros(0, np.int64), np.zeros(0, np.int64)


_ROUTED: dict[type, frozenset[str]] = {}


def routed_families(cls: type) -> frozenset[str]:
    """The query families a router class routes: those it has a `route_<family>` method for."""
    if cls not in _ROUTED:
        _ROUTED[cls] = frozenset(n[len("route_"):] for n in dir(cls)
                                 if n.startswith("route_") and n not in ("route_objects", "route_queries")
                                 and callable(getattr(cls, n)))
    return _ROUTED[cls]


class Router(ABC):
    """Routes events to workers. Subclasses implement `route_objects` and a `route_<family>` per
    query family they route; what a router routes is what it implements, nothing to declare."""

    def __init__(self, n_workers: int):
        self.n_workers = int(n_workers)

    @property
    def families(self) -> frozenset[str]:
        return routed_families(type(self))

    def observe_inserts(self, ev: Events, rows: np.ndarray) -> None:
        """Called on the driver with an epoch's query insertions (`rows` in seq order) before the
        epoch is dispatched. A router whose state grows with subscriptions (keyword summaries,
        term maps that assign new terms) records here the seq at which each entry appeared, and
        routes an event on the entries older than its own seq: exact per-event semantics whatever
        Spark partition the event lands in. Default: the routing state is fixed by `fit`."""

    def observe_objects(self, ev: Events, rows: np.ndarray, n_dispatchers: int) -> None:
        """Called on the driver with an epoch's objects (`rows` in seq order) before the epoch is
        dispatched, with the run's number of dispatchers (events are dealt to them round-robin by
        seq). A router whose object routing evolves with the objects it routes (SSTD's per-router
        keyword lists, sstd.txt l.221) decides here, per dispatcher and in seq order, where each
        object goes, and routes it by its seq: exact per-object semantics whatever Spark partition
        the object lands in. Its time is the dispatchers' (loop.py). Default: object routing is
        fixed by `fit`."""

    def observe_feedback(self, family: str, table) -> None:
        """Called on the driver between epochs with a family merger's per-query feedback (a table
        with `qid` and `value`: a kNN radius, a top-k threshold) before the next epoch is
        dispatched; the router is broadcast afterwards, so workers can read what it keeps.
        Default: feedback changes nothing."""

    # True when the router routes top-k subscriptions by thresholds the workers compute for the
    # next epoch (DSkype's prefix): the loop then tells workers that epoch's end (the horizon)
    wants_thresholds: ClassVar[bool] = False

    def pending_resends(self) -> np.ndarray:
        """Query ids whose routes gained workers with the last feedback (their live subscriptions
        are re-sent to the new workers at the next epoch's start), read once. Default: none."""
        return np.zeros(0, np.int64)

    def routes_gained(self, ev: Events) -> np.ndarray:
        """Of the live insert events of `pending_resends`, which now route to a worker they did not
        before (those are re-sent). Default: all."""
        return np.ones(len(ev), np.bool_)

    def route(self, ev: Events) -> Pairs:
        """All events of a batch; every query kind (insert, delete, snapshot) routes alike."""
        is_obj = ev.kind == OBJECT
        ro, wo = self.route_objects(ev, np.flatnonzero(is_obj))
        rq, wq = self.route_queries(ev, np.flatnonzero(~is_obj))
        return np.concatenate([ro, rq]), np.concatenate([wo, wq])

    def objects_and_queries(self, ev: Events) -> tuple[np.ndarray, np.ndarray]:
        """(object rows, query rows) of a batch, for a router that writes both into one output;
        a query family it does not route is an UnsupportedFamilyError."""
        is_obj = ev.kind == OBJECT
        qs = np.flatnonzero(~is_obj)
        self.check_families(ev.family[qs])
        return np.flatnonzero(is_obj), qs

    @abstractmethod
    def route_objects(self, ev: Events, rows: np.ndarray) -> Pairs: ...

    def store_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        """Where each object goes when workers keep objects for snapshot queries: every copy
        `route_objects` makes (subscriptions still match there), and enough more that every
        snapshot query the object satisfies reaches a worker holding it, whichever arrives first.
        Default: `route_objects`, right for a router whose object routing does not depend on the
        subscriptions it has seen; a router that may send an object nowhere
        (`Strategy.filters_objects`) adds its keepers, or its strategy sets `stores_objects = False`."""
        return self.route_objects(ev, rows)

    def storing_copies(self, ev: Events) -> Pairs:
        """`route`, with objects sent where `store_objects` keeps them (a workload with snapshot
        queries): the router's own `route` when it keeps them where it routes them."""
        if type(self).store_objects is Router.store_objects:
            return self.route(ev)
        is_obj = ev.kind == OBJECT
        ro, wo = self.store_objects(ev, np.flatnonzero(is_obj))
        rq, wq = self.route_queries(ev, np.flatnonzero(~is_obj))
        return np.concatenate([ro, rq]), np.concatenate([wo, wq])

    def route_queries(self, ev: Events, rows: np.ndarray) -> Pairs:
        if len(rows) == 0:
            return empty_pairs()
        parts = []
        fam = ev.family[rows]
        present = self.check_families(fam)
        for code, name in present:
            sub = rows if len(present) == 1 else rows[fam == code]
            route = getattr(self, f"route_{name}", None) or self.to_every_worker
            parts.append(route(ev, sub))
        if len(parts) == 1:
            return parts[0]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def check_families(self, fam: np.ndarray) -> list[tuple[int, str]]:
        """(code, name) of each query family present in `fam`; a family this router does not route
        is an UnsupportedFamilyError naming the ones it does."""
        present = []
        codes = np.flatnonzero(np.bincount(fam.astype(np.int64) - FAMILY_LOW)) + FAMILY_LOW if len(fam) else []
        for code in codes:
            name = FAMILY_NAMES.get(int(code)) or families.name_of(int(code))
            if name not in self.families and not (name in families.names() and families.get(name).routes_everywhere):
                raise UnsupportedFamilyError(
                    f"{type(self).__name__} cannot route {name!r} queries; it supports {sorted(self.families)}"
                )
            present.append((int(code), name))
        return present

    def to_every_worker(self, ev: Events, rows: np.ndarray) -> Pairs:
        """Every row to every worker: broadcast objects, and how a family that `routes_everywhere`
        is routed by a router without a rule of its own for it."""
        rows = np.asarray(rows, np.int64)
        return np.repeat(rows, self.n_workers), np.tile(np.arange(self.n_workers, dtype=np.int64), len(rows))

    def describe(self) -> dict[str, Any]:
        """What plots and reports show about the partitioning (override to add boundaries)."""
        return {"router": type(self).__name__, "workers": self.n_workers}

    # -- migration units (strategies/adjust_base.py) ----------------------------------------------

    def units(self, ev: Events, rows: np.ndarray) -> Pairs:
        """(row, unit) pairs: the migration units (cells, leaves, text parts) each event is stored
        or matched in. Routing an event = the owners of its units. Routers without units cannot
        be adjusted."""
        raise NotImplementedError(f"{type(self).__name__} has no migration units, so it cannot be adjusted")

    def unit_owner(self) -> np.ndarray:
        """The worker of each unit (index = unit id)."""
        raise NotImplementedError(f"{type(self).__name__} has no migration units, so it cannot be adjusted")

    def with_unit_owner(self, owner: np.ndarray) -> "Router":
        """A copy of this router with its units reassigned to `owner` (same unit structure)."""
        raise NotImplementedError(f"{type(self).__name__} cannot reassign its units")

    @property
    def has_units(self) -> bool:
        try:
            self.unit_owner()
        except NotImplementedError:
            return False
        return True

    def size_bytes(self) -> int:
        """Dispatcher memory: the bytes of the router's arrays."""
        return int(sum(v.nbytes for v in vars(self).values() if isinstance(v, np.ndarray)))


def routes(cls: type["Strategy"], family: str) -> bool:
    """Whether the strategy routes `family` exactly: natively or as the family it routes like."""
    return families.routable(family, cls.families)


def route_stream(router: Router, ev: Events) -> Pairs:
    """Route a whole stream in-process as the pipeline does (one dispatcher): observe its
    insertions and objects, then route."""
    router.observe_inserts(ev, np.flatnonzero(ev.kind == INSERT))
    router.observe_objects(ev, np.flatnonzero(ev.kind == OBJECT), 1)
    return router.route(ev)


class Strategy(ParamsMixin, ABC):
    """One partitioning strategy. Subclasses set `name`, `families` (the query families its
    router routes natively: the one place this is declared) and a `Params` dataclass."""

    name: ClassVar[str]
    families: ClassVar[frozenset[str]] = frozenset({"range"})
    # True when the router may send an object nowhere because no subscription where it would go
    # can match it (keyword summaries, per-cell term maps); otherwise every object is routed.
    filters_objects: ClassVar[bool] = False
    # the worker index its paper describes, per family, as `index.<family>` settings; a run with
    # `index.<family>.layout=paper` uses them instead of the shared index (e.g. KOP: an inverted file)
    paper_index: ClassVar[dict[str, dict]] = {}
    # True when the router has migration units (Router.units / unit_owner), so adjusters can move them
    unit_router: ClassVar[bool] = False
    # False when snapshot queries cannot be answered exactly under this strategy: its router may send
    # an object nowhere and has no rule to keep it anyway (Router.store_objects)
    stores_objects: ClassVar[bool] = True

    @classmethod
    def check_run(cls, cfg, job) -> None:
        """Refuse a job this strategy cannot run, before Spark starts: a ValueError naming the
        field, the value and what is allowed (harness.core.params.RunRefused adds the line a
        `strategy=all` job prints when it leaves the strategy out and runs the others). `cfg` is the
        whole composed config, `job` what it asks for, resolved once (harness/run/config.py Job:
        families, snapshots, source). Default: nothing to refuse."""

    @abstractmethod
    def fit(self, sample: Events, n_workers: int, params: Any, context: FitContext) -> Router: ...
