"""The worker-index contract shared by every strategy: one index per query family.

A worker receives its sub-stream of an epoch in `seq` order. It first restores the state the
previous epoch left (the live subscriptions, as insert events), then processes the epoch, and
finally exports its state for the next epoch (or for a migration, which may split it by cell).
Semantics are exactly per event: an object matches the subscriptions inserted before it and not
yet deleted, however the index batches its work internally.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from harness.core.events import DELETE, Events


NEVER = np.iinfo(np.int64).max  # deletion seq of a subscription that is still live


class CompileClock:
    """Seconds numba spends compiling inside a `with` block (outermost compilations only: nested
    ones are part of their caller's). Busy times exclude it: a kernel compiled for a type
    signature no earlier epoch met (once per machine, as it is then cached) is not index work,
    and one such compilation in one epoch used to swamp a whole run's throughput."""

    def __init__(self):
        self.seconds = 0.0
        self._depth = 0
        self._t0 = 0.0

    def __enter__(self):
        from numba.core import event

        clock = self

        class _Listener(event.Listener):
            def on_start(self, ev):
                if clock._depth == 0:
                    clock._t0 = time.perf_counter()
                clock._depth += 1

            def on_end(self, ev):
                clock._depth -= 1
                if clock._depth == 0:
                    clock.seconds += time.perf_counter() - clock._t0

        self._ctx = event.install_listener("numba:compile", _Listener())
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)


def deletion_seqs(query_ids: np.ndarray, ev: Events) -> tuple[np.ndarray, int]:
    """Seq of the first deletion of each query id in the batch (NEVER if none), and how many
    deletions named a query the worker does not hold."""

    dele = np.full(len(query_ids), NEVER, np.int64)
    d_rows = np.flatnonzero(ev.kind == DELETE)
    if len(d_rows) == 0:
        return dele, 0
    if len(query_ids) == 0:
        return dele, len(d_rows)
    order = np.argsort(query_ids, kind="stable")
    sorted_ids = query_ids[order]
    at = np.searchsorted(sorted_ids, ev.id[d_rows])
    found = sorted_ids[np.minimum(at, len(sorted_ids) - 1)] == ev.id[d_rows]
    np.minimum.at(dele, order[at[found]], ev.seq[d_rows][found])
    return dele, int((~found).sum())


@dataclass
class WorkerOutput:
    keys: np.ndarray  # matched (query, object) pairs as int64 keys (harness.core.events.pair_keys)
    work: np.ndarray  # work units per input event (for apportioning service time)
    counters: dict[str, int] = field(default_factory=dict)  # objects, inserts, deletes, candidates, results
    busy_s: float = 0.0  # CPU time of the index work on this epoch (restore excluded)


@dataclass(frozen=True)
class IndexContext:
    extent: tuple[float, float, float, float]
    vocab_size: int


class WorkerIndex(ABC):
    family: ClassVar[str]

    def __init__(self, context: IndexContext, **params):
        self.context = context

    @abstractmethod
    def restore(self, state: Events) -> float:
        """Load the live subscriptions of the previous epoch; returns the CPU seconds it took."""

    @abstractmethod
    def process(self, events: Events) -> WorkerOutput:
        """Run the epoch's sub-stream (sorted by seq) through the index."""

    @abstractmethod
    def export_state(self) -> Events:
        """The subscriptions still live, as insert events, for the next epoch or a migration."""

    @abstractmethod
    def size_bytes(self) -> int:
        """Memory held by the index."""
