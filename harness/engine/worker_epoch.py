"""One worker's epoch, timed `repeat` times from the same start: what both executors run per worker.

Repetitions (measure.repeat) happen here, inside the worker's task, not as repeated epoch jobs: a
Spark job costs about a second of fixed time on this machine for milliseconds of measured index
work, so a job per repetition multiplied a sweep's wall time by the repetitions and measured
nothing more (issue 19, ADR-0051). Each repetition builds the worker's indexes afresh,
restores the same state with the same feedback, takes the same events and does the same work;
the first one's results go on to the merge and its state is the one kept, every later one's
results are checked against it: a repetition whose results differ means the index is not
deterministic, an error. A task holding the workers of several runs (the lanes of one epoch job)
runs repetition r of every one before repetition r + 1 of any (`repetition`, harness/core/
interleave.py), so that the runs a claim compares share the machine's state.
"""

from __future__ import annotations

import pickle
import time
import zlib
from dataclasses import dataclass, field, fields, is_dataclass

import numpy as np
import pyarrow as pa

from harness.core.events import Events
from harness.engine.blocks import to_ipc
from harness.engine.local_pairs import LocalCount, result_blocks
from harness.engine.setup import FamilySetup
from harness.engine.worker import WorkerSet, routing_view, with_resent, without_resent
from harness.families.base import StateBundle


@dataclass
class WorkerEpoch:
    """The inputs of one worker's epoch; `results` runs it, after which the outputs are set."""
    setup: FamilySetup
    router: object
    feedback: dict | None  # the mergers' feedback of the previous epoch (None: none)
    worker: int
    ev: Events  # the worker's events of the epoch, in seq order
    sole: np.ndarray | None  # per event, whether it is its event's only copy (local pairs)
    bundles: dict[int, StateBundle]  # the state it kept last epoch, per family
    lo: int
    hi: int
    horizon: int | None = None
    resend: Events | None = None
    n_buckets: int = 1
    repeat: int = 1
    # outputs (after `results`): the epoch's own events and their work counts, the state kept, the
    # index size, and per repetition the statistics (counters, busy and restore time, ...)
    events: Events | None = None
    work: np.ndarray | None = None
    kept: dict[int, StateBundle] = field(default_factory=dict)
    stats: list[dict] = field(default_factory=list)
    followups: dict[int, pa.Table] = field(default_factory=dict)  # family code -> its first rounds (rounds.py)
    _first: int = 0  # the first repetition's digest, that every later one must equal
    _size: int = 0  # the first repetition's index size

    def results(self, local: LocalCount):
        """Run the repetitions; yield the first one's result blocks (family code, bucket, block) and
        add the pairs it finished itself to `local`. Later repetitions only process and digest
        their outputs (splitting and packing results is not measured work, and it was half of a
        repetition's time)."""
        for r in range(self.repeat):
            yield from self.repetition(r, local)

    def repetition(self, r: int, local: LocalCount):
        """Repetition `r` alone (0 first: it yields the result blocks and keeps the state), so that a
        task holding several lanes' workers can run repetition r of every one before repetition
        r + 1 of any (harness/core/interleave.py). Its CPU and wall time go in its statistics
        (`rep_cpu_s`, `rep_wall_s`: a CPU/wall ratio far below 1 says the machine took the CPU
        from it, harness/core/machine_load.py)."""
        t_wall, t_cpu = time.perf_counter(), time.thread_time()
        indexes = WorkerSet.build(self.setup.factories)
        indexes.observe_routing(self._route, self.worker, self.router.n_workers)
        restore_s = indexes.restore(self.bundles, self.feedback)
        pruned = (indexes.prune_replicas(self.router, self.worker, self.setup.codes)
                  if self.feedback is not None else {})
        indexes.begin_epoch(self.lo, self.hi, self.horizon)
        ev, n_resent, sole = with_resent(self.ev, self.resend, self.router, self.worker, self.setup.codes,
                                         self.sole)
        digest = Digest()
        if r == 0:  # digested only when a later repetition will be compared with it
            yield from result_blocks(indexes, ev, sole, self.setup, self.n_buckets, local,
                                     digest.add if self.repeat > 1 else None)
        else:
            for _, outs in indexes.process_chunks(ev, self.setup.chunk_events):
                digest.add(outs)
        work, counters, busy_s = indexes.totals()
        own, work = without_resent(ev, work, n_resent)
        if r == 0:
            self._first = digest.crc
            self.events, self.work, self.kept = own, work, indexes.export_state()
            self.followups = indexes.followups()
            self._size = indexes.size_bytes()
        elif digest.crc != self._first:
            raise RuntimeError(f"worker {self.worker}: repetition {r + 1} of epoch [{self.lo}, {self.hi}) gave "
                               f"other results than the first (CRC {digest.crc:08x} vs {self._first:08x}): the run "
                               "is not deterministic")
        self.stats.append({**counters, **pruned, "busy_s": busy_s, "restore_s": restore_s, "index_bytes": self._size,
                           "events": len(own), "resent": n_resent,
                           "rep_cpu_s": time.thread_time() - t_cpu, "rep_wall_s": time.perf_counter() - t_wall})

    def _route(self, ev: Events):
        """The dispatchers' routing of `ev` (for indexes that ask where else things went)."""
        return self.setup.route(self.router, routing_view(ev, self.setup.codes), ev)

    @property
    def busy_s(self) -> list[float]:
        return [st["busy_s"] for st in self.stats]

    def median_busy_s(self) -> float:
        """The busy time the monitor apportions to units: the median of the repetitions'."""
        return float(np.median(self.busy_s)) if self.stats else 0.0


class Digest:
    """A CRC-32 over a worker's outputs, slice by slice: each family's results and work counts (a
    family's results are an array, a dataclass, dict or tuple of arrays, an Arrow table, or a
    plugin's own type, digested by its pickle)."""

    def __init__(self):
        self.crc = 0

    def add(self, outs: dict) -> None:
        for code, out in sorted(outs.items()):
            self.crc = zlib.crc32(code.to_bytes(2, "little", signed=True), self.crc)
            self._value(out.results)
            self._value(out.work)

    def _value(self, value) -> None:
        if isinstance(value, np.ndarray):
            self.crc = zlib.crc32(np.ascontiguousarray(value).view(np.uint8).reshape(-1), self.crc)
        elif is_dataclass(value):
            for f in fields(value):
                self._value(getattr(value, f.name))
        elif isinstance(value, dict):
            for key in sorted(value):
                self.crc = zlib.crc32(str(key).encode(), self.crc)
                self._value(value[key])
        elif isinstance(value, (list, tuple)):
            for item in value:
                self._value(item)
        elif isinstance(value, (pa.Table, pa.RecordBatch)):
            self.crc = zlib.crc32(to_ipc(value), self.crc)
        elif isinstance(value, (pa.Array, pa.ChunkedArray)):
            self.crc = zlib.crc32(to_ipc(pa.table({"v": value})), self.crc)
        elif value is None or isinstance(value, (int, float, str, bool, np.generic)):
            self.crc = zlib.crc32(repr(value).encode(), self.crc)
        else:  # a plugin family's own type: its pickle (deterministic for equal plain data)
            self.crc = zlib.crc32(pickle.dumps(value, protocol=5), self.crc)
