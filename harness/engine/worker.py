"""One worker's indexes, one per query family of the workload, and the routers' view of the stream.

A worker holds an index per family: objects reach every one of them (a family may match them),
each query event only its own family's. With one family (every preset today) the sub-stream goes
to that index untouched. The same class runs inside the Spark worker stage and in process.
"""

from __future__ import annotations

import time
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

    def restore(self, bundles: dict[int, StateBundle], feedback: dict | None = None) -> float:
        """Load each family's state, after handing it the merger's feedback of the previous epoch."""
        for code, table in (feedback or {}).items():
            if code in self.indexes:
                self.indexes[code].observe_feedback(table)
        return sum(index.restore(bundles.get(code, StateBundle())) for code, index in self.indexes.items())

    def observe_routing(self, route, worker: int, n_workers: int) -> None:
        for index in self.indexes.values():
            index.observe_routing(route, worker, n_workers)

    def begin_epoch(self, lo: int, hi: int, horizon: int | None = None) -> None:
        for index in self.indexes.values():
            index.begin_epoch(lo, hi, horizon)

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

    def process_chunks(self, ev: Events, chunk_events: int):
        """`process` over consecutive slices of the epoch (seq order, so the indexes' state moves
        as in one call), yielding (rows of the slice, outputs): a slice's result pairs can be
        finished or shipped before the next one is computed, which bounds a worker's memory at scale.
        Only when every index is `chunkable`; else the epoch is one slice. `totals` then gives the
        work per event, the counters and the busy time."""
        whole = not all(index.chunkable for index in self.indexes.values())
        step = max(len(ev) if whole or chunk_events <= 0 else chunk_events, 1)
        self._work, self._counters, self._busy, self._stored = [], {}, 0.0, self.stored_bytes()
        for lo in range(0, max(len(ev), 1), step):
            rows = np.arange(lo, min(lo + step, len(ev)))
            outs, work, counters, busy = self.process(ev if len(rows) == len(ev) else ev.slice(lo, lo + len(rows)))
            self._work.append(work)
            for k, v in counters.items():
                self._counters[k] = self._counters.get(k, 0) + v
            self._busy += busy
            if self._stored is not None:
                self._stored = max(self._stored, self.stored_bytes())
            yield rows, outs

    def followups(self) -> dict:
        """Each family's first rounds of the epoch (`WorkerIndex.followups`), where it has any."""
        out = {code: index.followups() for code, index in self.indexes.items()}
        return {code: t for code, t in out.items() if t is not None and t.num_rows}

    def totals(self) -> tuple[np.ndarray, dict, float]:
        """The work per event, the summed counters and the busy time of the last `process_chunks`;
        with object stores, the counters' `stored_bytes` is the most they held after any slice (a
        level, not a sum)."""
        counters = {**self._counters, "stored_bytes": self._stored} if self._stored is not None else self._counters
        return (np.concatenate(self._work) if self._work else np.zeros(0, np.int64)), counters, self._busy

    def stored_bytes(self) -> int | None:
        """Bytes the indexes keep for snapshot queries now (`WorkerIndex.stored_bytes`), each
        family's counted; None when none keeps objects."""
        sizes = [b for b in (index.stored_bytes() for index in self.indexes.values()) if b is not None]
        return sum(sizes) if sizes else None

    def prune_replicas(self, router, worker: int, codes: np.ndarray | None) -> dict[str, float]:
        """Drop the replicas that narrowed subscriptions no longer need on this worker.

        A subscription narrowed by feedback (before -> after) is routed both ways with the
        router of the epoch. Only when route(after) is within route(before), which is where its
        replicas are, is anything done: a worker outside route(after) drops its replica, one inside
        keeps it with the narrowed columns (so later routing and migrations use them). Every replica
        decides the same from the same router and feedback, so the holders become route(after),
        and the router's contract for `after` keeps results exact (ADR-0033)."""
        t0 = time.perf_counter()
        dropped = narrowed = 0
        for index in self.indexes.values():
            pair = index.narrowed()
            if pair is None or len(pair[0]) == 0:
                continue
            before, after = (routing_view(e, codes) for e in pair)
            rows = np.arange(len(before), dtype=np.int64)
            n_w = router.n_workers
            old = np.zeros((len(rows), n_w), np.bool_)
            new = np.zeros((len(rows), n_w), np.bool_)
            r, w = router.route_queries(before, rows)
            old[r, w] = True
            r, w = router.route_queries(after, rows)
            new[r, w] = True
            within = ~(new & ~old).any(axis=1)
            mine = new[:, worker]
            drop, narrow = before.id[within & ~mine], before.id[within & mine]
            index.apply_narrowing(drop, narrow)
            dropped += len(drop)
            narrowed += len(narrow)
        return {"replicas_dropped": dropped, "narrowed": narrowed, "prune_s": time.perf_counter() - t0}

    def export_state(self) -> dict[int, StateBundle]:
        return {code: index.export_state() for code, index in self.indexes.items()}

    def size_bytes(self) -> int:
        return sum(index.size_bytes() for index in self.indexes.values())


def with_resent(ev: Events, resend: Events | None, router, worker: int, codes: np.ndarray | None,
                sole: np.ndarray | None = None) -> tuple[Events, int, np.ndarray | None]:
    """The worker's epoch events with the re-sent subscriptions the router now also sends it in front
    (`Router.pending_resends`: routes that gained workers between epochs; their seqs are older than
    the epoch's, so seq order holds). Routed here, by the worker's own task, so the shared dispatch
    stage stays per epoch; a worker that already holds one ignores it. Returns the events, how many
    were put in front, and `sole` (local pairs' flags) aligned with them."""
    if resend is None or len(resend) == 0:
        return ev, 0, sole
    rows, workers = router.route(routing_view(resend, codes))
    mine = np.unique(rows[workers == worker])
    if len(mine) == 0:
        return ev, 0, sole
    sole = None if sole is None else np.concatenate([np.zeros(len(mine), sole.dtype), sole])
    return Events.concat([resend.take(mine), ev]), len(mine), sole


def without_resent(ev: Events, work: np.ndarray, n_resent: int) -> tuple[Events, np.ndarray]:
    """The epoch's own events and their work, as the statistics and the latency model read them: the
    re-sent subscriptions in front (older seqs, not events of this epoch) go, their work is charged
    to the epoch's first event."""
    if n_resent == 0:
        return ev, work
    rest = work[n_resent:].copy()
    if len(rest):
        rest[0] += work[:n_resent].sum()
    return ev.take(np.arange(n_resent, len(ev))), rest


def stored_queries(bundles: dict[int, StateBundle]) -> Events:
    """Every family's stored subscriptions of a worker (what the monitor counts)."""
    parts = [b.queries for b in bundles.values() if len(b.queries)]
    if len(parts) == 1:
        return parts[0]
    merged = Events.concat(parts)
    return merged.take(np.argsort(merged.seq, kind="stable")) if len(merged) else merged


def held(start_q: Events, end_q: Events, kept: dict[int, StateBundle]) -> dict[str, int]:
    """A worker's statistics on what it holds: subscriptions at the epoch's start and end
    (`stored_queries`), and the objects it keeps for snapshot queries at the end."""
    return {"restored": len(start_q), "kept": len(end_q), "stored_objects": sum(len(b.objects) for b in kept.values())}
