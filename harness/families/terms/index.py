"""The frequent_terms family's worker index: SSTD's STQ (the top-k most frequent terms of the objects in a
region that arrived within the last tau) and CTQ (every delta, the same over a window T), answered
from the objects this worker was sent (harness/families/object_store.py).

A CTQ's reports reach the workers as events of their own (kind SNAPSHOT, the CTQ's id, `step` = the
report's number, `tau` = its window; datasets/workloads/snapshot.py `with_ctq_reports`), so a report
is a top-k-terms query at its own time, and a CTQ's registration and deletion only route it.

Counting once. A router may keep an object on several workers (text partitioners send it to the
owner of each of its terms; broadcast strategies to all), and a query may reach several of them.
A worker counts an object for a query only when it is the lowest-numbered worker that both holds
the object and is reached by the query; each worker can tell, since it routes the object and the
query the way the dispatchers did (`observe_routing`). So every object in the region counts exactly
once, whatever the router, without a rule per strategy. That routing is the harness's bookkeeping
(the dispatchers know where they sent an object), so its time is not the index's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from harness.core.events import DELETE, INSERT, OBJECT, SNAPSHOT, Events
from harness.core.timing import CompileClock
from harness.families.base import IndexContext, StateBundle, WorkerIndex, WorkerOutput
from harness.families.object_store import ObjectStore
from harness.families.terms.snapshot import answer_terms, count_tables


@dataclass
class TermCounts:
    """A worker's partial term counts: per (query, report), each term's count among the objects it counted."""

    qid: np.ndarray
    report: np.ndarray
    term: np.ndarray
    count: np.ndarray

    def __len__(self) -> int:
        return len(self.qid)


def copy_masks(pairs: tuple[np.ndarray, np.ndarray], n_rows: int, n_workers: int) -> np.ndarray:
    """Per row, the bit mask (uint64 words) of the workers its routed copies went to."""
    rows, workers = pairs
    words = max((n_workers + 63) // 64, 1)
    mask = np.zeros((n_rows, words), np.uint64)
    np.bitwise_or.at(mask, (rows, workers // 64), np.left_shift(np.uint64(1), (workers % 64).astype(np.uint64)))
    return mask


class TermsIndex(WorkerIndex):
    family = "frequent_terms"

    def __init__(self, context: IndexContext, cells_per_side: int = 64, slice_size: int = 16384):
        super().__init__(context)
        self.store = ObjectStore(context.extent, cells_per_side, max(context.look_back, 0.0), context.vocab_size)
        self.route, self.worker, self.n_workers = None, 0, 1
        self.slice_size = int(slice_size)  # positions per count-table slice; 0: no tables (scan every object)

    def observe_routing(self, route, worker: int, n_workers: int) -> None:
        self.route, self.worker, self.n_workers = route, int(worker), int(n_workers)

    def restore(self, state: StateBundle) -> float:
        self.store.restore(state.objects)
        return 0.0

    def _masks(self, events: Events) -> tuple[np.ndarray, float]:
        """The routing's copies of `events` as worker masks, and the seconds it took."""
        t0 = time.process_time()
        return copy_masks(self.route(events), len(events), self.n_workers), time.process_time() - t0

    def _tables(self, o_mask: np.ndarray) -> tuple:
        """The store's count tables (`count_tables`) over the objects only this worker holds (built
        once per epoch: the index is not chunked); empty ones when `slice_size` is 0."""
        if self.slice_size <= 0:
            return np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(1, np.int64), \
                np.zeros(0, np.int64)
        only_here = copy_masks((np.zeros(1, np.int64), np.full(1, self.worker)), 1, self.n_workers)[0]
        return count_tables(self.store, (o_mask == only_here).all(axis=1), self.slice_size)

    def process(self, ev: Events) -> WorkerOutput:
        with CompileClock() as compiling:
            out = self._process(ev)
        out.busy_s = max(out.busy_s - compiling.seconds, 0.0)
        out.counters["compile_s"] = compiling.seconds
        return out

    def _process(self, ev: Events) -> WorkerOutput:
        if len(ev.values) and (ev.values.max() >= self.store.vocab or ev.values.min() < 0):
            raise ValueError(f"terms index: term ids must be in [0, {self.store.vocab}) (IndexContext.vocab_size); "
                             f"got {int(ev.values.min())}..{int(ev.values.max())}")
        t0 = time.process_time()
        self.store.add(ev)
        rows = np.flatnonzero(ev.kind == SNAPSHOT)
        work = np.ones(len(ev), np.int64)
        result = TermCounts(*(np.zeros(0, np.int64) for _ in range(4)))
        bookkeeping = 0.0
        o = self.store.objects
        if len(rows) and len(o):
            if self.route is None:
                raise RuntimeError("terms index: no routing observed (WorkerIndex.observe_routing) before process")
            q_mask, s1 = self._masks(ev.take(rows))
            o_mask, s2 = self._masks(o)
            bookkeeping = s1 + s2
            tables = self._tables(o_mask)
            q_work = np.ones(len(rows), np.int64)
            qi, term, count = answer_terms(self.store, ev, rows, q_mask, o_mask, self.worker, q_work, self.slice_size,
                                           tables)
            work[rows] = q_work
            step = ev.step[rows[qi]]
            result = TermCounts(ev.id[rows[qi]], np.where(np.isnan(step), 0, step).astype(np.int64), term, count)
        busy = time.process_time() - t0 - bookkeeping
        counters = {"objects": int((ev.kind == OBJECT).sum()), "inserts": int((ev.kind == INSERT).sum()),
                    "deletes": int((ev.kind == DELETE).sum()), "snapshots": len(rows),
                    "snapshot_checks": int(work[rows].sum() - len(rows)), "candidates": 0, "results": len(result)}
        return WorkerOutput(results=result, work=work, counters=counters, busy_s=max(busy, 0.0))

    def export_state(self) -> StateBundle:
        return StateBundle(objects=self.store.objects)

    def size_bytes(self) -> int:
        return self.store.size_bytes()
