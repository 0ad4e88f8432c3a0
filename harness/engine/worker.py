"""One worker's indexes, one per query family of the workload, and the routers' view of the stream.

A worker holds an index per family: objects reach every one of them (a family may match them),
each query event only its own family's. With one family (every preset today) the sub-stream goes
to that index untouched. The same class runs inside the Spark worker stage and in process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from harness.core.events import OBJECT, Events
from harness.families.base import StateBundle, WorkerIndex, WorkerOutput


def routing_view(ev: Events, codes: np.ndarray | None) -> Events:
    """The stream as a router sees it: the family column through `codes` (indexed by code + 128,
    harness.families.registry.routing_codes), so a family routed like another looks like it."""
    if codes is None or len(ev) == 0:
        return ev
    return Events({**ev.cols, "family": codes[ev.family.astype(np.int64) + 128]}, ev.offsets, ev.values)


@dataclass
class WorkerSet:
    """The indexes of one worker: family code -> index."""

    indexes: dict[int, WorkerIndex]

    @classmethod
    def build(cls, factories: dict[int, Callable[[], WorkerIndex]]) -> "WorkerSet":
        return cls({code: make() for code, make in factories.items()})

    def restore(self, bundles: dict[int, StateBundle]) -> float:
        return sum(index.restore(bundles.get(code, StateBundle())) for code, index in self.indexes.items())

    def process(self, ev: Events) -> tuple[dict[int, WorkerOutput], np.ndarray, dict, float]:
        """Per family output; the work per event, the summed counters and the busy time of the worker."""
        if len(self.indexes) == 1:
            code, index = next(iter(self.indexes.items()))
            out = index.process(ev)
            return {code: out}, out.work, dict(out.counters), out.busy_s
        outs, work, counters, busy = {}, np.zeros(len(ev), np.int64), {}, 0.0
        is_obj = ev.kind == OBJECT
        for code, index in self.indexes.items():
            rows = np.flatnonzero(is_obj | (ev.family == code))
            out = index.process(ev.take(rows))
            outs[code] = out
            np.add.at(work, rows, out.work)
            for k, v in out.counters.items():
                counters[k] = counters.get(k, 0) + v
            busy += out.busy_s
        counters["objects"] = int(is_obj.sum())  # every index saw them; the worker received them once
        return outs, work, counters, busy

    def export_state(self) -> dict[int, StateBundle]:
        return {code: index.export_state() for code, index in self.indexes.items()}

    def size_bytes(self) -> int:
        return sum(index.size_bytes() for index in self.indexes.values())


def stored_queries(bundles: dict[int, StateBundle]) -> Events:
    """Every family's stored subscriptions of a worker (what the monitor counts)."""
    parts = [b.queries for b in bundles.values() if len(b.queries)]
    if len(parts) == 1:
        return parts[0]
    merged = Events.concat(parts)
    return merged.take(np.argsort(merged.seq, kind="stable")) if len(merged) else merged
