"""Where an epoch runs: on Spark (what experiments measure) or in process (tests, quick studies).

Both run the same stages with the same code: the router's routing, a `WorkerSet` per worker, the
families' mergers bucket by bucket (`merge_bucket`), the migration's `split_bundle` and
`gather_bundle`. The in-process executor merges each family in one bucket and does not time
routing; it exists so that the strategy x workers x family matrix runs in seconds.
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from harness.core import store
from harness.core.events import OBJECT, Events, key_hash_sum
from harness.engine.local_pairs import LocalCount, result_blocks, sole_copies
from harness.engine.merge import merge_bucket, query_rows
from harness.engine.migration import MigrationResult, gather_bundle, migrate_state, split_bundle, summarise
from harness.engine.monitor import unit_stats
from harness.engine.lockstep import Lockstep
from harness.engine.pipeline import EpochResult, Lane, LaneEpoch
from harness.engine.setup import FamilySetup
from harness.engine.worker import WorkerSet, routing_view, stored_queries, with_resent, without_resent
from harness.families.base import StateBundle


class SparkExecutor:
    """One run's epochs as its lane of the invocation's shared epoch jobs (`Lockstep`); worker state
    in a folder per epoch under the URI `state_root` (harness/core/store.py: file://, hdfs://,
    s3a://). `waited_s`: the time its loop spent waiting for other runs, less its share of the
    jobs (a run's wall time is its own driver time plus its share of the jobs)."""

    def __init__(self, lockstep: Lockstep, lane: int, setup: FamilySetup, n_workers: int, state_root: str,
                 keep_pairs: bool, pairs_path: str | None, ship_events: bool = False):
        self.lockstep, self.lane, self.setup, self.n_workers = lockstep, lane, setup, n_workers
        self.state_root, self.keep_pairs = store.as_uri(state_root), keep_pairs
        self.pairs_path = None if pairs_path is None else store.as_uri(pairs_path)
        self.ship_events = ship_events
        self.state: str | None = None
        self.previous: str | None = None
        self.waited_s = 0.0

    def epoch(self, epoch, lo, hi, router, collect_service, monitor, feedback=None, keep_state=True,
              horizon=None, resend=None) -> EpochResult:
        nxt = store.join(self.state_root, f"epoch={epoch}")
        pairs = store.join(self.pairs_path, f"epoch={epoch}") if self.keep_pairs and self.pairs_path else None
        lane = Lane(self.setup, self.state, nxt, pairs, collect_service, monitor, keep_state, horizon, resend,
                    self.ship_events)
        t0 = time.perf_counter()
        res = self.lockstep.epoch(self.lane, epoch, lo, hi, LaneEpoch(router, lane, feedback or None))
        self.waited_s += time.perf_counter() - t0 - res.timings["job_s"] * res.timings["job_share"]
        self.previous, self.state = self.state, nxt
        return res

    def rewind(self) -> None:
        self.state = self.previous

    def migrate(self, epoch, router, old_router) -> MigrationResult:
        moved = store.join(self.state_root, f"epoch={epoch}-migrated")
        mig = migrate_state(self.lockstep.spark, self.state, moved, router, self.n_workers, self.setup,
                            old_router=old_router)
        self.state = moved
        return mig


class InProcessExecutor:
    """The same stages on one core, state in memory."""

    def __init__(self, events: Events, setup: FamilySetup, n_workers: int):
        self.events, self.setup, self.n_workers = events, setup, n_workers
        self.states: dict[int, dict[int, StateBundle]] = {w: {} for w in range(n_workers)}
        self.merge_states: dict[int, pa.Table | None] = {}

    def rewind(self) -> None:
        self.states, self.merge_states = dict(self.previous[0]), dict(self.previous[1])

    def epoch(self, epoch, lo, hi, router, collect_service, monitor, feedback=None, keep_state=True,
              horizon=None, resend=None) -> EpochResult:
        self.previous = (dict(self.states), dict(self.merge_states))
        ev = self.events.take(np.arange(lo, hi))
        rows, workers = router.route(routing_view(ev, self.setup.codes))
        n_obj_copies = int(np.count_nonzero(ev.kind[rows] == OBJECT))
        res = EpochResult(epoch, hi - lo, 0, len(rows), n_obj_copies, len(rows) - n_obj_copies)
        blobs: dict[int, list[bytes]] = {code: [] for code in self.setup.mergers}
        sole = sole_copies(rows, len(ev)) if self.setup.local_codes else None
        local = LocalCount()
        for w in range(self.n_workers):
            mine = np.flatnonzero(workers == w)
            mine = mine[np.argsort(rows[mine], kind="stable")]
            sub = ev.take(rows[mine])
            start = self.states[w]
            indexes = WorkerSet.build(self.setup.factories)
            indexes.restore(start, feedback)
            pruned = indexes.prune_replicas(router, w, self.setup.codes) if feedback else {}
            indexes.begin_epoch(lo, hi, horizon)
            sub, n_resent, sole_w = with_resent(sub, resend, router, w, self.setup.codes,
                                                None if sole is None else sole[mine])
            for code, _, blob in result_blocks(indexes, sub, sole_w, self.setup, 1, local):
                blobs[code].append(blob)
            work, counters, busy_s = indexes.totals()
            sub, work = without_resent(sub, work, n_resent)
            self.states[w] = indexes.export_state()
            start_q, end_q = stored_queries(start), stored_queries(self.states[w])
            res.worker_stats[w] = {**counters, **pruned, "busy_s": busy_s, "restored": len(start_q), "events": len(sub),
                                   "kept": len(end_q), "resent": n_resent}
            if monitor:
                codes = self.setup.codes
                res.units.append(unit_stats(router, w, routing_view(sub, codes), work, busy_s,
                                            routing_view(start_q, codes), routing_view(end_q, codes)))
        res.result_count, res.result_hash, res.local_pairs = local.count, local.hash, local.count
        for code, merger in self.setup.mergers.items():
            queries = ev.take(query_rows(ev, {code})) if merger.needs_queries else None
            out = merge_bucket(merger, self.merge_states.get(code), blobs[code], queries)
            self.merge_states[code] = out.state
            res.result_count += len(out.keys)
            res.result_hash = (res.result_hash + key_hash_sum(out.keys)) % (1 << 64)
            res.merge_busy_s += out.busy_s
            if out.feedback is not None and out.feedback.num_rows:
                res.feedback[code] = out.feedback
        res.merge_max_s = res.merge_busy_s  # one merge task
        return res

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
        return summarise(infos, self.n_workers, 0.0)
