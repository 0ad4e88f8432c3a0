"""Where an epoch runs: on Spark (what experiments measure) or in process (tests, quick studies).

Both run the same stages with the same code: the router's routing, a `WorkerEpoch` per worker
(repetitions included), the families' mergers bucket by bucket (`merge_bucket`), the migration's
`split_bundle` and `gather_bundle`. The in-process executor merges each family in one bucket and
does not time routing; it exists so that the strategy x workers x family matrix runs in seconds.
An epoch returns one EpochResult per repetition (measure.repeat): the same results, each
repetition's times.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pyarrow as pa

from harness.core import store
from harness.core.events import OBJECT, Events, key_hash_sum
from harness.engine.local_pairs import LocalCount, sole_copies
from harness.engine.merge import merge_bucket, query_rows
from harness.engine.migration import MigrationResult, gather_bundle, migrate_state, split_bundle, summarise
from harness.engine.monitor import unit_stats
from harness.engine.lockstep import Lockstep
from harness.engine.pipeline import EpochResult, Lane, LaneEpoch, run_second_round
from harness.engine.rounds import answer_second_round
from harness.engine.setup import FamilySetup
from harness.engine.tally import dispatch_counts, work_sums
from harness.engine.worker import held, routing_view, stored_queries
from harness.engine.worker_epoch import WorkerEpoch
from harness.families.base import StateBundle


class SparkExecutor:
    """One run's epochs as its lane of the invocation's shared epoch jobs (`Lockstep`); worker state
    in a folder per epoch under the URI `state_root` (harness/core/store.py: file://, hdfs://,
    s3a://). `waited_s`: the time its loop spent waiting for other runs, less its share of the
    jobs (a run's wall time is its own driver time plus its share of the jobs).

    `tally` (the count mode's observer, harness/counts/tally.py) is told what InProcessExecutor
    tells it, counted inside the tasks (harness/engine/tally.py) and returned through Arrow with
    the workers' own counters; no per-event service times are collected then. `seq`: the stream's
    seq per position when they differ (the count mode's object sample: events keep their seqs,
    and the events table holds the kept ones), so an epoch's positions [lo, hi) are asked of the
    jobs as the seq range of its events."""

    def __init__(self, lockstep: Lockstep, lane: int, setup: FamilySetup, n_workers: int, state_root: str,
                 keep_pairs: bool, pairs_path: str | None, ship_events: bool = False, tally=None,
                 seq: np.ndarray | None = None):
        self.lockstep, self.lane, self.setup, self.n_workers = lockstep, lane, setup, n_workers
        self.state_root, self.keep_pairs = store.as_uri(state_root), keep_pairs
        self.pairs_path = None if pairs_path is None else store.as_uri(pairs_path)
        self.ship_events = ship_events
        self.tally, self.seq = tally, seq
        self.state: str | None = None
        self.previous: str | None = None
        self.waited_s = 0.0

    def epoch(self, epoch, lo, hi, router, collect_service, monitor, feedback=None, keep_state=True,
              horizon=None, resend=None, repeat=1) -> list[EpochResult]:
        nxt = store.join(self.state_root, f"epoch={epoch}")
        pairs = store.join(self.pairs_path, f"epoch={epoch}") if self.keep_pairs and self.pairs_path else None
        tally = self.tally.n_dispatchers if self.tally is not None else 0
        lane = Lane(self.setup, self.state, nxt, pairs, collect_service and not tally, monitor, keep_state, horizon,
                    resend, self.ship_events, repeat, tally=tally)
        if self.seq is not None and hi > lo:  # positions of a sample -> the seq range of its events
            lo, hi = int(self.seq[lo]), int(self.seq[hi - 1]) + 1
        t0 = time.perf_counter()
        reps = self.lockstep.epoch(self.lane, epoch, lo, hi, LaneEpoch(router, lane, feedback or None))
        timings = reps[0].timings
        self.waited_s += time.perf_counter() - t0 - timings["job_s"] * timings["job_share"]
        self.state = nxt
        if self.tally is not None:
            self.tally.dispatched(epoch, reps[0].dispatched)
            for w, st in sorted(reps[0].worker_stats.items()):
                self.tally.worked(epoch, w, st["work_sums"])
            for res in reps:
                for st in res.worker_stats.values():
                    st.pop("work_sums", None)
        return reps

    def second_round(self, epoch: int, requests: dict[int, dict[int, Events]]) -> list[tuple]:
        """The epoch's second round (harness/engine/rounds.py): its own job over the state the epoch
        kept, run while this run holds the lockstep's baton."""
        return run_second_round(self.lockstep.spark, Lane(self.setup, None, self.state), requests)

    def keep_pairs_of(self, epoch: int, rows: pa.Table) -> None:
        """The results the driver merged for the epoch (a second round's), in plain form
        (harness/families/result_rows.py), beside the merge stage's files when the run keeps pairs
        (`keep_pairs`)."""
        if self.keep_pairs and self.pairs_path and rows.num_rows:
            store.write_table(store.join(self.pairs_path, f"epoch={epoch}", "part-second-round.parquet"), rows)

    def migrate(self, epoch, router, old_router) -> MigrationResult:
        moved = store.join(self.state_root, f"epoch={epoch}-migrated")
        mig = migrate_state(self.lockstep.spark, self.state, moved, router, self.n_workers, self.setup,
                            old_router=old_router)
        self.state = moved
        if self.tally is not None:
            self.tally.migrated(epoch, mig.infos)
        return mig


class InProcessExecutor:
    """The same stages on one core, state in memory. `tally`, when set, is told what the stages did
    (the count mode's observer, harness/counts/tally.py), as SparkExecutor tells it:
    `dispatched(epoch, counts)` after the routing (`dispatch_counts`, harness/engine/tally.py),
    `worked(epoch, w, sums)` after each worker's `WorkerEpoch` (`work_sums`), `migrated(epoch,
    infos)` after a migration (per source and destination worker, what `summarise` adds up)."""

    def __init__(self, events: Events, setup: FamilySetup, n_workers: int, tally=None):
        self.events, self.setup, self.n_workers = events, setup, n_workers
        self.tally = tally
        self.states: dict[int, dict[int, StateBundle]] = {w: {} for w in range(n_workers)}
        self.merge_states: dict[int, pa.Table | None] = {}

    def epoch(self, epoch, lo, hi, router, collect_service, monitor, feedback=None, keep_state=True,
              horizon=None, resend=None, repeat=1) -> list[EpochResult]:
        ev = self.events.take(np.arange(lo, hi))
        rows, workers = self.setup.route(router, routing_view(ev, self.setup.codes), ev)
        if self.tally is not None:
            self.tally.dispatched(epoch, dispatch_counts(ev, rows, self.tally.n_dispatchers))
        n_obj_copies = int(np.count_nonzero(ev.kind[rows] == OBJECT))
        res = EpochResult(epoch, hi - lo, 0, len(rows), n_obj_copies, len(rows) - n_obj_copies)
        blobs: dict[int, list[bytes]] = {code: [] for code in self.setup.mergers}
        sole = sole_copies(rows, len(ev)) if self.setup.local_codes else None
        local = LocalCount()
        stats: list[dict[int, dict]] = [{} for _ in range(repeat)]
        followups: dict[int, list[pa.Table]] = {}
        for w in range(self.n_workers):
            mine = np.flatnonzero(workers == w)
            mine = mine[np.argsort(rows[mine], kind="stable")]
            start = self.states[w]
            run = WorkerEpoch(self.setup, router, feedback or None, w, ev.take(rows[mine]),
                              None if sole is None else sole[mine], start, lo, hi, horizon, resend, 1, repeat)
            for code, _, blob in run.results(local):
                blobs[code].append(blob)
            self.states[w] = run.kept
            if self.tally is not None:
                self.tally.worked(epoch, w, work_sums(run.events, run.work))
            for code, table in run.followups.items():
                followups.setdefault(code, []).append(table)
            start_q, end_q = stored_queries(start), stored_queries(run.kept)
            holding = held(start_q, end_q, run.kept)
            for r, st in enumerate(run.stats):
                stats[r][w] = {**st, **holding}
            if monitor:
                codes = self.setup.codes
                res.units.append(unit_stats(router, w, routing_view(run.events, codes), run.work,
                                            run.median_busy_s(), routing_view(start_q, codes),
                                            routing_view(end_q, codes)))
        res.result_count, res.result_hash, res.local_pairs = local.count, local.hash, local.count
        res.followups = {code: pa.concat_tables(ts) for code, ts in followups.items()}
        merge_busy = np.zeros(repeat)
        for code, merger in self.setup.mergers.items():
            queries = ev.take(query_rows(ev, {code})) if merger.needs_queries else None
            out = merge_bucket(merger, self.merge_states.get(code), blobs[code], queries, repeat)
            self.merge_states[code] = out.state
            res.result_count += len(out.keys)
            res.result_hash = (res.result_hash + key_hash_sum(out.keys)) % (1 << 64)
            merge_busy += out.busy_s
            if out.feedback is not None and out.feedback.num_rows:
                res.feedback[code] = out.feedback
        # one merge task: its CPU time is the busiest's
        return [replace(res, worker_stats=stats[r], merge_busy_s=float(merge_busy[r]), merge_max_s=float(merge_busy[r]))
                for r in range(repeat)]

    def second_round(self, epoch: int, requests: dict[int, dict[int, Events]]) -> list[tuple]:
        """The epoch's second round (harness/engine/rounds.py) over the workers' kept state."""
        return [(code, w, *answer_second_round(self.setup, code, self.states[w].get(code, StateBundle()), ev))
                for code, by_worker in sorted(requests.items()) for w, ev in sorted(by_worker.items())]

    def keep_pairs_of(self, epoch: int, rows) -> None:
        """In process no pairs are written: the digest is the result."""

    def migrate(self, epoch, router, old_router) -> MigrationResult:
        infos = []
        kept: dict[int, dict[int, StateBundle]] = {w: {} for w in range(self.n_workers)}
        incoming: dict[int, dict[int, list[StateBundle]]] = {w: {} for w in range(self.n_workers)}
        for w in range(self.n_workers):
            out_s = leaving = 0
            for code in self.setup.factories:
                bundle = self.states[w].get(code, StateBundle())
                parts, f_out_s, f_leaving = split_bundle(bundle, router, w, old_router, self.setup.codes)
                out_s += f_out_s
                leaving += f_leaving
                for dest, part in parts.items():
                    if dest == w:
                        kept[w][code] = part
                    else:
                        incoming[dest].setdefault(code, []).append(part)
            infos.append({"src": w, "out_s": out_s, "leaving": leaving})
        for w in range(self.n_workers):
            info = {"dst": w, "moved_in": 0, "moved_bytes": 0, "in_s": 0.0}
            for code, factory in self.setup.factories.items():
                g = gather_bundle(w, kept[w].get(code), incoming[w].get(code, []), factory)
                self.states[w][code] = g.state
                info["moved_in"] += g.moved_in
                info["moved_bytes"] += g.moved_bytes
                info["in_s"] += g.index_s
            infos.append(info)
        mig = summarise(infos, self.n_workers, 0.0)
        if self.tally is not None:
            self.tally.migrated(epoch, mig.infos)
        return mig
