"""Applying a migration plan between epochs: check it, then move the stored subscriptions.

`validate_plan` runs on the driver before anything moves and rejects, naming the culprit:
a unit listed twice or sent to two workers, a worker out of range, a plan that disagrees with
its own router, a live subscription the new router would place nowhere (lost), and a
subscription that would land on a worker that did not hold it without the plan declaring its
unit as moving there (an undeclared move).

The move itself is per worker and family, in two steps that run as Spark tasks (`migrate_state`)
or in process (harness/engine/inprocess.py): `split_bundle` re-routes a worker's stored
subscriptions under the new router and cuts them by destination (the results a worker keeps for a
subscription travel with it, stored objects go where the new router sends them); `gather_bundle`
keeps what a worker already had, adds what arrives (each subscription and object once) and says
what moved. Only the moving subscriptions are
timed (serialising them out, de-serialising and indexing them in), in CPU time of the thread doing
it (harness.core.timing.work_clock): that is the stall a migration causes on the workers involved
(the throughput and latency models charge it there), whatever else the machine runs meanwhile.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from harness.core import store
from harness.core.timing import work_clock
from harness.core.events import DELETE, INSERT, Events, row_bytes, sorted_runs
from harness.engine.blocks import (BLOCK_SCHEMA, from_ipc, one_row, read_bundle, read_merge_state, spark_schema,
                                   to_ipc, write_bundle, write_merge_state)
from harness.engine.faults import maybe_kill_executor
from harness.engine.pipeline import merge_buckets
from harness.engine.worker import routing_view
from harness.families.base import StateBundle
from strategies.adjust_base import MigrationPlan


class InvalidPlanError(ValueError):
    """An adjuster's plan that would lose or misplace subscriptions; nothing has moved."""


def live_queries(events: Events, seq_end: int) -> Events:
    """The subscriptions alive just before `seq_end`: inserted before it and not yet deleted."""
    seq = events.seq
    ins = np.flatnonzero((events.kind == INSERT) & (seq < seq_end))
    dead = events.id[(events.kind == DELETE) & (seq < seq_end)]
    alive = ins[~np.isin(events.id[ins], dead)]
    return events.take(alive)


def _pair_keys(rows: np.ndarray, workers: np.ndarray, n_workers: int) -> np.ndarray:
    return np.asarray(rows, np.int64) * n_workers + np.asarray(workers, np.int64)


@dataclass
class Placement:
    """Where the live subscriptions are before and after the plan (as row * n_workers + worker)."""

    old: np.ndarray
    new: np.ndarray
    moved: np.ndarray  # copies that land on a worker which did not hold them

    def moved_rows(self, n_workers: int) -> np.ndarray:
        return np.unique(self.moved // n_workers)


def validate_plan(plan: MigrationPlan, old_router, live: Events, n_workers: int) -> Placement:
    """Check a plan against the live subscriptions; raise InvalidPlanError naming what is wrong."""
    unit, src, dst = plan.unit, plan.src, plan.dst
    if not (len(unit) == len(src) == len(dst)):
        raise InvalidPlanError(f"plan arrays differ in length: unit {len(unit)}, src {len(src)}, dst {len(dst)}")
    bad = np.flatnonzero((dst < 0) | (dst >= n_workers))
    if len(bad):
        i = bad[0]
        raise InvalidPlanError(f"plan moves unit {unit[i]} to worker {dst[i]}; workers are 0..{n_workers - 1}")
    bad = np.flatnonzero((src < -1) | (src >= n_workers))
    if len(bad):
        i = bad[0]
        raise InvalidPlanError(f"plan moves unit {unit[i]} from worker {src[i]}; allowed: 0..{n_workers - 1}, "
                               f"or -1 (several)")
    order = np.argsort(unit, kind="stable")
    dup = np.flatnonzero(np.diff(unit[order]) == 0)
    if len(dup):
        a, b = order[dup[0]], order[dup[0] + 1]
        raise InvalidPlanError(f"unit {unit[a]} is planned twice (to worker {dst[a]} and to worker {dst[b]}): "
                               "a unit lives on exactly one worker")
    same = np.flatnonzero(src == dst)
    if len(same):
        raise InvalidPlanError(f"plan moves unit {unit[same[0]]} from worker {src[same[0]]} to itself")
    new_owner = None
    if len(unit):
        new_owner = plan.router.unit_owner()
        out = np.flatnonzero((unit < 0) | (unit >= len(new_owner)))
        if len(out):
            raise InvalidPlanError(f"plan names unit {unit[out[0]]}, but the new router has units "
                                   f"0..{len(new_owner) - 1}")
        wrong = np.flatnonzero(new_owner[unit] != dst)
        if len(wrong):
            i = wrong[0]
            raise InvalidPlanError(f"plan moves unit {unit[i]} to worker {dst[i]}, but its new router gives "
                                   f"it to worker {new_owner[unit[i]]}")
    rows = np.arange(len(live), dtype=np.int64)
    r_old, w_old = old_router.route_queries(live, rows)
    r_new, w_new = plan.router.route_queries(live, rows)
    if len(w_new) and (w_new.min() < 0 or w_new.max() >= n_workers):
        i = np.flatnonzero((w_new < 0) | (w_new >= n_workers))[0]
        raise InvalidPlanError(f"the new router sends subscription {live.id[r_new[i]]} to worker {w_new[i]}; "
                               f"workers are 0..{n_workers - 1}")
    lost = np.setdiff1d(rows, r_new)
    if len(lost):
        raise InvalidPlanError(f"the plan loses {len(lost)} live subscription(s) (e.g. id {live.id[lost[0]]}): "
                               "the new router places them on no worker")
    old = np.unique(_pair_keys(r_old, w_old, n_workers))
    new = np.unique(_pair_keys(r_new, w_new, n_workers))
    moved = np.setdiff1d(new, old, assume_unique=True)
    if len(moved):
        m_rows = np.unique(moved // n_workers)
        pr, pu = plan.router.units(live, m_rows)
        owner = new_owner if new_owner is not None else plan.router.unit_owner()
        declared = np.full(len(owner), -1, np.int64)
        declared[unit] = dst
        ok = declared[pu] == owner[pu]
        covered = np.unique(_pair_keys(pr[ok], owner[pu[ok]], n_workers))
        undeclared = np.setdiff1d(moved, covered, assume_unique=True)
        if len(undeclared):
            k = undeclared[0]
            row, w = int(k // n_workers), int(k % n_workers)
            units_there = sorted(set(pu[(pr == row) & (owner[pu] == w)].tolist()))
            raise InvalidPlanError(
                f"undeclared move: subscription {live.id[row]} would land on worker {w}, which does not hold it, "
                f"but the plan moves none of its units there (its units on worker {w}: {units_there}); "
                f"{len(undeclared)} such placement(s)")
    return Placement(old, new, moved)


def split_state(state: Events, router, worker: int, old_router=None, codes=None) -> tuple[dict[int, Events], float, int]:
    """A worker's stored subscriptions by destination under `router`; the seconds spent cutting
    out the copies that leave (what the migration costs this worker) and how many leave.

    With `old_router` (where the subscriptions were), a copy is sent only to a destination that
    did not hold it, and only by one of its holders (the lowest-numbered), so nothing travels
    twice and the counts are the migration's; without it every destination gets a copy (the
    destination de-duplicates)."""
    if len(state) == 0:
        return {}, 0.0, 0
    rows = np.arange(len(state), dtype=np.int64)
    view = routing_view(state, codes)
    r, w = router.route_queries(view, rows)
    stays = w == worker
    if old_router is not None:
        ro, wo = old_router.route_queries(view, rows)
        n = router.n_workers
        held = np.zeros(len(state) * n, bool)
        held[ro * n + wo] = True
        first = np.full(len(state), n, np.int64)
        np.minimum.at(first, ro, wo)
        sender = (first == worker) | ~held[rows * n + worker]  # inconsistent holders send too
        keep = stays | (~held[r * n + w] & sender[r])
        r, w = r[keep], w[keep]
    order = np.lexsort((r, w))
    r, w = r[order], w[order]
    parts = {}
    out_s = 0.0
    leaving = 0
    for lo, hi in sorted_runs(w):
        dest = int(w[lo])
        t0 = work_clock()
        parts[dest] = state.take(r[lo:hi])
        if dest != worker:  # cutting out what stays is not migration work
            out_s += work_clock() - t0
            leaving += hi - lo
    return parts, out_s, leaving


def _results_of(results: pa.Table | None, qids: np.ndarray) -> pa.Table | None:
    if results is None or results.num_rows == 0:
        return None
    return results.filter(pc.is_in(results.column("qid"), value_set=pa.array(np.asarray(qids, np.int64))))


def split_bundle(bundle: StateBundle, router, worker: int, old_router=None,
                 codes=None) -> tuple[dict[int, StateBundle], float, int]:
    """`split_state` for a worker's whole state of one family: its subscriptions by destination,
    each with the results the worker keeps for it; its stored objects stay where they are (SSTD's
    versioned routing sends a snapshot query to them: harness/engine/versions.py). Returns the
    parts by destination, the seconds spent on what leaves, and how many subscriptions leave."""
    q_parts, out_s, leaving = split_state(bundle.queries, router, worker, old_router, codes)
    parts = {dest: StateBundle(queries=q) for dest, q in q_parts.items()}
    for dest, part in parts.items():
        t0 = work_clock()
        part.results = _results_of(bundle.results, part.queries.id)
        if dest != worker:
            out_s += work_clock() - t0
    if len(bundle.objects):
        parts.setdefault(worker, StateBundle()).objects = bundle.objects
    return parts, out_s, leaving


@dataclass
class Gathered:
    state: StateBundle  # the worker's state after the migration, subscriptions and objects in seq order
    moved_in: int = 0  # subscriptions that arrived
    moved_bytes: int = 0
    index_s: float = 0.0  # indexing the arrivals (the destination's migration work)
    info: dict = field(default_factory=dict)


def _fresh(kept: Events, arrivals: Events) -> Events:
    """Each arriving event once, and none the worker already holds (by id)."""
    if len(arrivals) == 0:
        return arrivals
    _, first = np.unique(arrivals.id, return_index=True)
    fresh = first[~np.isin(arrivals.id[first], kept.id)]
    return arrivals.take(np.sort(fresh))


def _joined(kept: Events, arrivals: Events) -> Events:
    if len(arrivals) == 0:
        return kept
    both = Events.concat([kept, arrivals])
    return both.take(np.argsort(both.seq, kind="stable"))


def gather_bundle(worker: int, kept: StateBundle | None, incoming: list[StateBundle], index_factory) -> Gathered:
    """A worker's state of one family after a migration: what it kept plus each arriving
    subscription (with its kept results) and object once."""
    kept = kept if kept is not None else StateBundle()
    queries = _fresh(kept.queries, Events.concat([b.queries for b in incoming]) if incoming else Events.empty())
    objects = _fresh(kept.objects, Events.concat([b.objects for b in incoming]) if incoming else Events.empty())
    # a subscription may arrive from several holders: its results come from the first one only
    tables, pending = [], set(queries.id.tolist())
    for b in incoming:
        taken = _results_of(b.results, np.array(sorted(pending), np.int64))
        if taken is not None and taken.num_rows:
            tables.append(taken)
            pending -= set(taken.column("qid").to_pylist())
    arriving_results = pa.concat_tables(tables) if tables else None
    arrivals = StateBundle(queries, objects, arriving_results)
    index_s = index_factory().restore(arrivals) if len(arrivals) else 0.0
    results = [t for t in (kept.results, arriving_results) if t is not None and t.num_rows]
    state = StateBundle(_joined(kept.queries, queries), _joined(kept.objects, objects),
                        pa.concat_tables(results) if results else None)
    moved_bytes = int(row_bytes(queries).sum() + row_bytes(objects).sum()) if len(queries) + len(objects) else 0
    moved_bytes += arriving_results.nbytes if arriving_results is not None else 0
    return Gathered(state, len(queries), moved_bytes, index_s)


# -- on Spark -----------------------------------------------------------------------------------

def _bundle_blocks(bundle: StateBundle) -> dict[str, bytes]:
    blocks = {}
    if len(bundle.queries):
        blocks["queries"] = to_ipc(bundle.queries.to_arrow())
    if len(bundle.objects):
        blocks["objects"] = to_ipc(bundle.objects.to_arrow())
    if bundle.results is not None and bundle.results.num_rows:
        blocks["results"] = to_ipc(bundle.results)
    return blocks


def _split_task(batches, routers_bc, state_in: str, codes_by_family: dict[int, object]):
    router, old_router = routers_bc.value
    for batch in batches:
        for w in batch.column("worker").to_numpy().tolist():
            out_s, leaving = 0.0, 0
            for family, codes in codes_by_family.items():
                parts, f_out_s, f_leaving = split_bundle(read_bundle(state_in, w, family), router, w, old_router, codes)
                out_s += f_out_s
                leaving += f_leaving
                for dest, part in parts.items():
                    t0 = work_clock()
                    blocks = _bundle_blocks(part)
                    if dest != w:
                        out_s += work_clock() - t0
                    for name, blob in blocks.items():
                        yield one_row(BLOCK_SCHEMA, worker=dest, payload=blob, family=family,
                                      info=json.dumps({"src": w, "part": name}))
            yield one_row(BLOCK_SCHEMA, worker=-1, info=json.dumps({"src": w, "out_s": out_s, "leaving": int(leaving)}))


def _gather_task(batches, factories: dict[int, object], state_out: str):
    table = pa.Table.from_batches([b for b in batches if b.num_rows], schema=BLOCK_SCHEMA)
    maybe_kill_executor("migration")  # cluster tests only (harness/engine/faults.py)
    workers = table.column("worker").to_numpy()
    infos, payload, fams = table.column("info"), table.column("payload"), table.column("family")
    out = []
    for i in np.flatnonzero(workers < 0):
        out.append(infos[int(i)].as_py())
    for w in np.unique(workers[workers >= 0]).tolist():
        summary = {"dst": w, "moved_in": 0, "moved_bytes": 0, "in_s": 0.0}
        for family, factory in factories.items():
            kept, incoming, read_s = StateBundle(), {}, 0.0
            for i in np.flatnonzero((workers == w)).tolist():
                if not payload[i].is_valid or fams[i].as_py() != family:
                    continue
                info = json.loads(infos[i].as_py())
                t0 = work_clock()
                table_i = from_ipc(payload[i].as_py())
                part = table_i if info["part"] == "results" else Events.from_arrow(table_i)
                if info["src"] == w:
                    setattr(kept, info["part"], part)
                else:
                    setattr(incoming.setdefault(info["src"], StateBundle()), info["part"], part)
                    read_s += work_clock() - t0
            g = gather_bundle(w, kept, list(incoming.values()), factory)
            write_bundle(state_out, w, family, g.state)
            summary["moved_in"] += int(g.moved_in)
            summary["moved_bytes"] += int(g.moved_bytes)
            summary["in_s"] += g.index_s + (read_s if g.moved_in else 0.0)
        out.append(json.dumps(summary))
    yield pa.RecordBatch.from_arrays([pa.array(out, pa.string())], names=["info"])


@dataclass
class MigrationResult:
    moved_queries: int
    moved_bytes: int
    pause_s: dict[int, float]  # per worker: its migration work (out + in)
    job_s: float
    # per source worker (src, out_s, leaving) and destination (dst, moved_in, moved_bytes, in_s): what
    # the totals add up, as the count mode reads it per worker (harness/counts/tally.py)
    infos: list[dict] = field(default_factory=list)

    @property
    def migration_s(self) -> float:
        """The migration's duration: the involved workers work in parallel."""
        return max(self.pause_s.values(), default=0.0)


def migrate_state(spark, state_in: str, state_out: str, router, n_workers: int, setup,
                  old_router=None) -> MigrationResult:
    """Move the workers' stored state (every family's) from where `old_router` placed it to where
    `router` places it (one Spark job); `setup` is the run's FamilySetup."""
    sc = spark.sparkContext
    parts = merge_buckets(spark, n_workers)
    out_dir = store.fresh_dir(state_out)
    t0 = time.perf_counter()
    routers_bc = sc.broadcast((router, old_router))
    codes_by_family = {family: setup.codes for family in setup.factories}
    workers = spark.createDataFrame([(w, None, None, None, None, None) for w in range(n_workers)],
                                    spark_schema(BLOCK_SCHEMA))
    rows = (
        workers.repartition(parts, "worker")
        .mapInArrow(lambda it: _split_task(it, routers_bc, str(state_in), codes_by_family), spark_schema(BLOCK_SCHEMA))
        .unionByName(workers)
        .repartition(parts, "worker")
        .mapInArrow(lambda it: _gather_task(it, setup.factories, out_dir), "info string")
        .toArrow()
    )
    job_s = time.perf_counter() - t0
    routers_bc.unpersist()
    # the mergers' state is kept by bucket of query ids, not by worker: it stays as it is
    for code in setup.stateful:
        for bucket in range(parts):
            write_merge_state(out_dir, code, bucket, read_merge_state(str(state_in), code, bucket))
    infos = [json.loads(v) for v in rows.column("info").to_pylist()]
    return summarise(infos, n_workers, job_s)


def summarise(infos: list[dict], n_workers: int, job_s: float) -> MigrationResult:
    pause = {w: 0.0 for w in range(n_workers)}
    moved = moved_bytes = 0
    for info in infos:
        if "src" in info:
            if info["leaving"]:
                pause[info["src"]] += info["out_s"]
        else:
            pause[info["dst"]] += info["in_s"]
            moved += info["moved_in"]
            moved_bytes += info["moved_bytes"]
    return MigrationResult(moved, moved_bytes, {w: s for w, s in pause.items() if s > 0}, job_s, infos)
