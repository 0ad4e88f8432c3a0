"""The worker-index contract shared by every strategy: one index per query family.

A worker receives its sub-stream of an epoch in `seq` order. It first restores the state the
previous epoch left (the live subscriptions, as insert events), then processes the epoch, and
finally exports its state for the next epoch (or for a migration, which may split it by cell).
Semantics are exactly per event: an object matches the subscriptions inserted before it and not
yet deleted, however the index batches its work internally.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from harness.events import DELETE, Events


NEVER = np.iinfo(np.int64).max  # deletion seq of a subscription that is still live


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
    keys: np.ndarray  # matched (query, object) pairs as int64 keys (harness.events.pair_keys)
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
