"""The Spark pipeline of one epoch: one Spark job of three stages (DESIGN.md) for one or more
runs of the same events, a lane each (harness/engine/lockstep.py); every row carries its lane.

1. dispatch: `mapInArrow` routes each input batch with every lane's broadcast router (as the
   router sees it: `routing_view`) and emits, per (lane, worker) it reaches, one row holding the
   seq of that worker's events of the batch as an Arrow IPC block (the worker reads the events
   themselves from the events table: a copy costs Spark 8 bytes, not the event), plus one
   statistics row per lane (worker = -1, `info` JSON) with its routing time in each repetition;
   for a family whose merger reads the epoch's query events, the batch's query events go
   straight to their merge buckets (worker = -1 with a bucket).
2. workers: the blocks are repartitioned by (lane, worker) (a small row per worker joins in, so a
   worker whose epoch is empty still carries its state on); `mapInArrow` reads the epoch's events
   once per task and runs one index per family per (lane, worker) (`WorkerEpoch`): read the state
   it kept (the previous epoch's Arrow files), take its events in seq order, process them
   (`repeat` times from that state: measure.repeat), emit its partial results split into merge
   buckets by query id (the family's `Merger.blocks`), its per-event service times, a statistics
   row per repetition, and write the state it keeps for the next epoch.
3. merge: the result blocks are shuffled by (lane, bucket); each bucket of each family of each
   lane is merged by the family's merger (with its state of the previous epoch when it keeps one:
   a tick row per bucket makes every bucket run; `repeat` times, each timed); each partition
   returns per lane its result count and hash sum (and writes its keys when pairs are kept) and
   the mergers' feedback; every other row passes through to the driver.

One action per epoch; every stage records its start and end, which gives the per-stage time
split. No per-row Python.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa

from harness.core import store
from harness.core.events import Events, key_hash_sum, seq_positions, sorted_runs
from harness.core.interleave import rep_order
from harness.engine.blocks import (BLOCK_SCHEMA, DISPATCH, FEEDBACK, FOLLOWUP, MERGED, OUT_SCHEMA, QUERIES, RESULT, SERVICE,
                                   STATS, TICK, UNITS, LOCAL, Rows, from_ipc, out_row, read_bundle,
                                   read_merge_state, read_service, service_block, spark_schema, to_ipc, write_bundle,
                                   write_merge_state)
from harness.engine.faults import maybe_kill_executor
from harness.engine.local_pairs import SOLE, LocalCount, sole_copies, with_sole
from harness.engine.memory import task_peak_bytes
from harness.engine.merge import merge_bucket, plain_rows, query_rows
from harness.engine.rounds import answer_second_round
from harness.engine.setup import FamilySetup
from harness.engine.tally import add_dispatch_counts, dispatch_counts, work_sums
from harness.engine.worker import held, routing_view, stored_queries
from harness.engine.worker_epoch import WorkerEpoch
from harness.families.base import qid_buckets


@dataclass
class Lane:
    """One run's part of an epoch job: what its tasks need besides its router and feedback (which
    travel in one broadcast). Several runs of the same events share a job, one lane each."""
    setup: FamilySetup
    state_in: str | None  # the state the run's workers and mergers kept last epoch (None: none yet)
    state_out: str  # where they keep this epoch's
    pairs_dir: str | None = None  # where the merge writes the distinct pairs (keep_pairs)
    collect_service: bool = True
    monitor: bool = False
    keep_state: bool = True  # False in a run's last epoch: no epoch reads what it would keep
    horizon: int | None = None  # the next epoch's end, for routers that want thresholds (Router.wants_thresholds)
    resend: Events | None = None  # live subscriptions whose routes gained workers (Router.pending_resends)
    ship_events: bool = False  # blocks carry the events themselves, not their seqs (config `ship_events`)
    repeat: int = 1  # timed repetitions of the routing, the workers' and the mergers' work (worker_epoch.py)
    # the count mode's tally (harness/engine/tally.py): the dispatch tasks count per dispatcher of
    # this many, the workers their objects' work sums; 0: nothing counted
    tally: int = 0


def dispatch_batches(batches, routers_bc, lanes: list[Lane], n_buckets: int):
    """mapInArrow body of the dispatch stage: each batch routed by every lane's router, the
    lanes' timed repetitions interleaved (harness/core/interleave.py)."""
    routers = routers_bc.value
    for batch in batches:
        if batch.num_rows == 0:
            continue
        ev = Events.from_arrow(batch)
        rows = Rows(BLOCK_SCHEMA)
        routed = _route_interleaved(ev, [router for router, _ in routers], lanes)
        for lane, (spec, (router, _)) in enumerate(zip(lanes, routers)):
            yield from _route_batch(rows, batch, ev, spec.setup, n_buckets, lane, spec.ship_events, *routed[lane],
                                    tally=spec.tally)
        yield from rows.flush()


def _route_interleaved(ev: Events, routers: list, lanes: list[Lane]) -> list[tuple]:
    """Per lane, (start time, copies' rows, their workers, ns per repetition): the batch routed by
    every lane's router `repeat` times, repetition r of every lane before repetition r + 1 of any;
    every routing must give the first one's copies."""
    views = [routing_view(ev, spec.setup.codes) for spec in lanes]
    got: list[list] = [[time.time(), None, None, []] for _ in lanes]
    for r, lane in rep_order(len(lanes), max((spec.repeat for spec in lanes), default=0)):
        spec, out = lanes[lane], got[lane]
        if r >= spec.repeat:
            continue
        t0 = time.perf_counter_ns()
        rows, workers = spec.setup.route(routers[lane], views[lane], ev)
        out[3].append(time.perf_counter_ns() - t0)
        if r == 0:
            out[1], out[2] = rows, workers
        elif not (np.array_equal(rows, out[1]) and np.array_equal(workers, out[2])):
            raise RuntimeError(f"routing a batch again gave other copies ({len(rows)} vs {len(out[1])}): "
                               "the router is not deterministic")
    return [tuple(out) for out in got]


def _route_batch(out: Rows, batch: pa.RecordBatch, ev: Events, setup: FamilySetup, n_buckets: int,
                 lane: int, ship_events: bool, start: float, rows: np.ndarray, workers: np.ndarray, ns: list[int],
                 tally: int = 0):
    """One lane's copies of a batch (routed by `_route_interleaved`) as blocks into `out`; with
    `tally` (the count mode), its statistics row also holds the batch's `dispatch_counts`."""
    order = np.lexsort((rows, workers))  # by worker, then stream order within the batch
    if ship_events:  # the events themselves, as the compared systems send them
        routed = batch.take(pa.array(rows[order]))
    else:  # their seqs: the worker reads the events from the events table
        routed = pa.record_batch({"seq": ev.seq[rows[order]]})
    if setup.local_codes:
        routed = with_sole(routed, sole_copies(rows, batch.num_rows)[order])
    ws = workers[order]
    shipped = blocks = 0
    for lo, hi in sorted_runs(ws):
        blob = to_ipc(routed.slice(lo, hi - lo))
        shipped, blocks = shipped + len(blob), blocks + 1
        yield from out.add(worker=int(ws[lo]), payload=blob, lane=lane)
    if setup.merge_queries:
        yield from _query_blocks(out, batch, ev, setup.merge_queries, n_buckets, lane)
    n_obj_copies = int(np.count_nonzero(ev.kind[rows] == 0))
    info = {"events": batch.num_rows, "route_ns": ns, "object_copies": n_obj_copies,
            "query_copies": len(rows) - n_obj_copies, "shipped_bytes": shipped, "shipped_blocks": blocks,
            "start": start, "end": time.time()}
    if tally:
        info["tally"] = {k: v.tolist() for k, v in dispatch_counts(ev, rows, tally).items()}
    yield from out.add(worker=-1, info=json.dumps(info), lane=lane)


def _query_blocks(rows: Rows, batch: pa.RecordBatch, ev: Events, codes: set[int], n_buckets: int, lane: int):
    """The batch's query events of the given families, one block per (family, merge bucket)."""
    picked = query_rows(ev, codes)
    if len(picked) == 0:
        return
    key = ev.family[picked].astype(np.int64) * n_buckets + qid_buckets(ev.id[picked], n_buckets)
    order = np.argsort(key, kind="stable")
    picked, key = picked[order], key[order]
    for lo, hi in sorted_runs(key):
        fam, bucket = divmod(int(key[lo]), n_buckets)
        yield from rows.add(worker=-1, bucket=bucket, family=fam, lane=lane,
                            payload=to_ipc(batch.take(pa.array(picked[lo:hi]))))


class EpochEvents:
    """The epoch's events as a worker task reads them from the events table (once per task, when
    its first worker needs them, converted to `Events` once: each of the task's (lane, worker)
    units then takes its rows with numpy, not an Arrow take and conversion of its own), and the
    rows of a worker's events by their seq. A unit that gets every event shares the one copy:
    indexes only read the events they are given."""

    def __init__(self, events_uri: str, seq_lo: int, seq_hi: int):
        self.uri, self.lo, self.hi = events_uri, seq_lo, seq_hi
        self._events: Events | None = None

    def take(self, seq: np.ndarray) -> Events:
        if self._events is None:
            table = store.read_range(self.uri, "seq", self.lo, self.hi)
            events = Events.from_arrow(table)
            if len(events) > 1 and (np.diff(events.seq) < 0).any():
                events = events.take(np.argsort(events.seq, kind="stable"))
            for a in (*events.cols.values(), events.offsets, events.values):  # shared: a write raises
                a.setflags(write=False)
            self._events = events
        known = self._events.seq
        if len(seq) == len(known) and np.array_equal(seq, known):  # every event (objects broadcast)
            return self._events
        pos = seq_positions(known, seq)
        if len(seq) and (pos.max() >= len(known) or (known[pos] != seq).any()):
            raise ValueError(f"the events table at {self.uri} lacks seq values the dispatcher routed")
        return self._events.take(pos)


def worker_batches(batches, lanes: list[Lane], routers_bc, n_buckets: int, events: EpochEvents):
    """mapInArrow body of the worker stage: one WorkerSet per (lane, worker) present in the
    partition. With its mergers' feedback of the previous epoch a lane's indexes read it first and
    drop the replicas it makes unneeded (the epoch's router decides); under `monitor` each worker
    also reports its per-unit statistics."""
    start = time.time()
    table = pa.Table.from_batches([b for b in batches if b.num_rows], schema=BLOCK_SCHEMA)
    maybe_kill_executor("worker")  # cluster tests only (harness/engine/faults.py); after the shuffle read
    workers = table.column("worker").to_numpy()
    lane_of = table.column("lane").to_numpy()
    payload, infos = table.column("payload"), table.column("info")
    buckets, fams = table.column("bucket"), table.column("family")
    rows = Rows(OUT_SCHEMA)
    for i in np.flatnonzero(workers < 0):  # dispatch statistics and query events travel on
        i = int(i)
        if buckets[i].is_valid:
            yield from rows.out(QUERIES, -1, buckets[i].as_py(), payload[i].as_py(), family=fams[i].as_py(),
                                lane=int(lane_of[i]))
        else:
            yield from rows.add(rtype=DISPATCH, worker=-1, info=infos[i].as_py(), lane=int(lane_of[i]))
    here = np.flatnonzero(workers >= 0)
    jobs, local = [], {}  # (lane, worker, its epoch, the state it started from), per lane its local pairs
    for lane in np.unique(lane_of[here]).tolist():
        router, feedback = routers_bc.value[lane]
        local[lane] = LocalCount()
        for w in np.unique(workers[here[lane_of[here] == lane]]).tolist():
            mine = np.flatnonzero((workers == w) & (lane_of == lane))
            jobs.append((lane, w, *_worker_epoch(lanes[lane], router, feedback or None, w,
                                                 [payload[int(i)].as_py() for i in mine], n_buckets, events)))
    # repetition r of every (lane, worker) here before repetition r + 1 of any (harness/core/interleave.py)
    for r, j in rep_order(len(jobs), max((run.repeat for _, _, run, _ in jobs), default=0)):
        lane, w, run, _ = jobs[j]
        if r < run.repeat:
            for code, bucket, blob in run.repetition(r, local[lane]):
                yield from rows.out(RESULT, w, bucket, blob, family=code, lane=lane)
    for lane, w, run, bundles in jobs:
        yield from _worker_outputs(rows, lanes[lane], routers_bc.value[lane][0], w, run, bundles, lane)
    for lane in local:
        if lanes[lane].setup.local_codes:
            yield from rows.out(LOCAL, -1, info={"count": local[lane].count, "hash": local[lane].hash}, lane=lane)
    yield from rows.out(STATS, -1, info={"start": start, "end": time.time(), **task_peak_bytes()})
    yield from rows.flush()


def _worker_epoch(spec: Lane, router, feedback: dict | None, w: int, blobs: list[bytes | None], n_buckets: int,
                  events: EpochEvents) -> tuple[WorkerEpoch, dict]:
    """One worker of one lane for one epoch, ready to run (`WorkerEpoch`: restore, process, `repeat`
    times), and the state it starts from."""
    setup = spec.setup
    blocks = [from_ipc(b) for b in blobs if b is not None]
    routed = pa.concat_tables(blocks) if blocks else None
    seq = routed.column("seq").to_numpy() if routed is not None else np.zeros(0, np.int64)
    order = np.argsort(seq, kind="stable")
    if not len(seq):
        ev = Events.empty()
    elif "terms" in routed.schema.names:  # the dispatcher shipped the events (ship_events)
        ev = Events.from_arrow(routed.take(pa.array(order)))
    else:
        ev = events.take(seq[order])
    sole = (routed.column(SOLE).to_numpy(zero_copy_only=False)[order]
            if routed is not None and SOLE in routed.schema.names else None)
    bundles = {code: read_bundle(spec.state_in, w, code) for code in setup.factories}
    run = WorkerEpoch(setup, router, feedback, w, ev, sole, bundles, events.lo, events.hi, spec.horizon,
                      spec.resend, n_buckets, spec.repeat)
    return run, bundles


def _worker_outputs(rows: Rows, spec: Lane, router, w: int, run: WorkerEpoch, bundles: dict, lane: int):
    """After its repetitions, one worker's first rounds, service times, unit statistics, kept state
    and per-repetition statistics (bucket = repetition) into `rows`."""
    setup = spec.setup
    for code, table in run.followups.items():
        yield from rows.out(FOLLOWUP, w, payload=to_ipc(table), family=code, lane=lane)
    if spec.collect_service and len(run.events):
        yield from rows.out(SERVICE, w, payload=service_block(run.events.seq, run.work, run.busy_s), lane=lane)
    start_q, end_q = stored_queries(bundles), stored_queries(run.kept)
    holding = held(start_q, end_q, run.kept)
    if spec.monitor:
        from harness.engine.monitor import unit_stats

        yield from rows.out(UNITS, w, payload=to_ipc(unit_stats(
            router, w, routing_view(run.events, setup.codes), run.work, run.median_busy_s(),
            routing_view(start_q, setup.codes), routing_view(end_q, setup.codes))), lane=lane)
    if spec.keep_state:
        for code, bundle in run.kept.items():
            write_bundle(spec.state_out, w, code, bundle)
    tallied = {"work_sums": work_sums(run.events, run.work)} if spec.tally else {}
    for r, st in enumerate(run.stats):
        yield from rows.out(STATS, w, r, lane=lane, info={**st, **holding, **tallied})


def merge_batches(batches, lanes: list[Lane]):
    """mapInArrow body of the merge stage: every (lane, family, bucket) of this partition merged by
    its family's merger; other rows pass."""
    start = time.time()
    blobs: dict[tuple[int, int, int], list[bytes]] = {}
    queries: dict[tuple[int, int, int], list[pa.Table]] = {}
    for b in batches:
        if b.num_rows == 0:
            continue
        rtype = b.column("rtype").to_numpy(zero_copy_only=False)
        mine = (rtype == RESULT) | (rtype == QUERIES) | (rtype == TICK)
        if not mine.all():
            yield b.filter(pa.array(~mine))
        payload, bucket, fam, lane = b.column("payload"), b.column("bucket"), b.column("family"), b.column("lane")
        for i in np.flatnonzero(mine).tolist():
            key = (lane[i].as_py(), fam[i].as_py(), bucket[i].as_py())
            blobs.setdefault(key, [])
            if rtype[i] == RESULT:
                blobs[key].append(payload[i].as_py())
            elif rtype[i] == QUERIES:
                queries.setdefault(key, []).append(from_ipc(payload[i].as_py()))
    maybe_kill_executor("merge")  # cluster tests only (harness/engine/faults.py)
    for lane in sorted({k[0] for k in blobs}):
        yield from _merge_lane(lanes[lane], lane, {k[1:]: v for k, v in blobs.items() if k[0] == lane},
                               {k[1:]: v for k, v in queries.items() if k[0] == lane})
    yield out_row(MERGED, -1, info={"start": start, "end": time.time(), **task_peak_bytes()})


def _merge_lane(spec: Lane, lane: int, blobs: dict[tuple[int, int], list[bytes]],
                queries: dict[tuple[int, int], list[pa.Table]]):
    setup = spec.setup
    kept, exits, count, hashed, busy = [], [], 0, 0, np.zeros(spec.repeat)
    for (code, bucket), parts in sorted(blobs.items()):
        q = queries.get((code, bucket))
        q_ev = Events.from_arrow(pa.concat_tables(q)) if q else None
        if q_ev is not None:
            q_ev = q_ev.take(np.argsort(q_ev.seq, kind="stable"))
        res = merge_bucket(setup.mergers[code], read_merge_state(spec.state_in, code, bucket), parts, q_ev,
                           spec.repeat)
        if code in setup.stateful and spec.keep_state:
            write_merge_state(spec.state_out, code, bucket, res.state)
        busy += res.busy_s
        count += len(res.keys)
        hashed += key_hash_sum(res.keys)
        if spec.pairs_dir is not None and len(res.keys):
            kept.append(plain_rows(setup.mergers[code], code, res))
        if spec.pairs_dir is not None and res.exits is not None and res.exits.num_rows:
            exits.append(res.exits)
        if res.feedback is not None and res.feedback.num_rows:
            yield out_row(FEEDBACK, -1, bucket, to_ipc(res.feedback), family=code, lane=lane)
    if kept or exits:  # the results in plain form (harness/families/result_rows.py), their keys beside
        from pyspark import TaskContext

        pid = TaskContext.get().partitionId()
        if kept:
            store.write_table(store.join(spec.pairs_dir, f"part-{pid:05d}.parquet"), pa.concat_tables(kept))
        if exits:
            store.write_table(store.join(spec.pairs_dir, f"exits-{pid:05d}.parquet"), pa.concat_tables(exits))
    yield out_row(MERGED, -1, lane=lane, info={"count": count, "hash": hashed % (1 << 64), "busy_s": busy.tolist()})


@dataclass
class EpochResult:
    epoch: int
    n_events: int
    route_ns: int
    routed_pairs: int
    routed_objects: int
    routed_queries: int
    shipped_bytes: int = 0  # bytes of the blocks the dispatch stage emitted to workers (IPC payloads)
    shipped_blocks: int = 0
    worker_stats: dict[int, dict] = field(default_factory=dict)
    service: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # worker -> (seq, s)
    units: list[pa.Table] = field(default_factory=list)  # the monitor's per-unit tables (when asked)
    result_count: int = 0
    result_hash: int = 0
    merge_busy_s: float = 0.0  # the mergers' CPU time
    merge_max_s: float = 0.0  # the busiest merge task's CPU time (the network model's merge stage)
    observe_s: float = 0.0  # the driver's routing-state upkeep before dispatch (Router.observe_inserts)
    executor_peak_bytes: int = 0  # the largest peak resident set of a worker or merge task's processes
    local_pairs: int = 0  # distinct pairs the workers finished themselves (sole objects), not shuffled
    feedback: dict[int, pa.Table] = field(default_factory=dict)  # family code -> (qid, value) for the router
    timings: dict[str, float] = field(default_factory=dict)
    # family code -> (qid, seq, value) of the first rounds its workers ran (harness/engine/rounds.py)
    followups: dict[int, pa.Table] = field(default_factory=dict)
    # the second round's copies per worker, (seq, service seconds): queued after their first round
    second_service: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    # the count mode's per-dispatcher counts of the epoch (harness/engine/tally.py), when the lane tallies
    dispatched: dict[str, np.ndarray] = field(default_factory=dict)


def _span(infos: list[dict]) -> float:
    return max(i["end"] for i in infos) - min(i["start"] for i in infos) if infos else 0.0


def merge_buckets(spark, n_workers: int) -> int:
    """Buckets (and worker-stage tasks) per epoch job: the same all run long, so merge state lines
    up, which is why they do not follow the number of lanes (a run that ends leaves its lane)."""
    return max(2, min(n_workers, 2 * spark.sparkContext.defaultParallelism))


@dataclass
class LaneEpoch:
    """What one lane asks of an epoch job: its router, the mergers' feedback it read, its lane."""
    router: object
    lane: Lane
    feedback: dict | None = None


def run_epoch(spark, events_df, events_uri: str, epoch: int, seq_lo: int, seq_hi: int, requests: list[LaneEpoch],
              n_workers: int) -> list[list[EpochResult]]:
    """One Spark job for the epoch [seq_lo, seq_hi) of every lane in `requests`: the events are
    read and dispatched once per job, worker and merge tasks are keyed by (lane, worker) and
    (lane, bucket), and each lane's result is collected on its own, one per repetition."""
    from pyspark.sql import functions as F

    sc = spark.sparkContext
    lanes = [r.lane for r in requests]
    # several workers may share a partition (each still gets its own indexes), so the task count
    # follows the cores, not the worker count; every lane uses the same merge buckets
    parts = merge_buckets(spark, n_workers)
    for lane in lanes:
        if lane.keep_state:
            store.fresh_dir(lane.state_out)
        if lane.pairs_dir is not None:
            store.fresh_dir(lane.pairs_dir)
    t0 = time.perf_counter()
    routers_bc = sc.broadcast([(r.router, r.feedback) for r in requests])
    epoch_df = events_df.where((F.col("seq") >= seq_lo) & (F.col("seq") < seq_hi))
    blocks = epoch_df.mapInArrow(lambda it: dispatch_batches(it, routers_bc, lanes, parts), spark_schema(BLOCK_SCHEMA))
    every_worker = spark.createDataFrame([(w, None, None, None, None, i) for i in range(len(lanes))
                                          for w in range(n_workers)], spark_schema(BLOCK_SCHEMA))
    out = (
        blocks.unionByName(every_worker)
        .repartition(parts, "lane", "worker")
        .mapInArrow(lambda it: worker_batches(it, lanes, routers_bc, parts, EpochEvents(events_uri, seq_lo, seq_hi)),
                    spark_schema(OUT_SCHEMA))
    )
    ticks = [(TICK, -1, b, None, None, code, i) for i, lane in enumerate(lanes)
             for code in sorted(lane.setup.stateful) for b in range(parts)]
    if ticks:
        out = out.unionByName(spark.createDataFrame(ticks, spark_schema(OUT_SCHEMA)))
    table = (out.repartition(parts, "lane", "bucket")
             .mapInArrow(lambda it: merge_batches(it, lanes), spark_schema(OUT_SCHEMA))
             .toArrow())
    job_s = time.perf_counter() - t0
    routers_bc.unpersist()
    return collect_lanes(epoch, table, lanes, job_s)


def run_second_round(spark, lane: Lane, requests: dict[int, dict[int, Events]]) -> list[tuple]:
    """A second round's Spark job (harness/engine/rounds.py): per family and worker, the queries
    routed there (`requests`) answered from the state the lane's workers kept this epoch
    (`lane.state_out`), blocks spread over a task per core; returns per block (family code, worker, its
    result blobs by merge bucket 0, work, busy seconds). One stage and no shuffle: the answers are
    at most k per query and worker, so the driver merges them (`rounds.finish_epoch`)."""
    blocks = [(code, w, to_ipc(ev.to_arrow())) for code, by_worker in sorted(requests.items())
              for w, ev in sorted(by_worker.items())]
    if not blocks:
        return []
    setup, state = lane.setup, lane.state_out

    def answer(block):
        code, w, blob = block
        return (code, w, *answer_second_round(setup, code, read_bundle(state, w, code),
                                              Events.from_arrow(from_ipc(blob))))

    sc = spark.sparkContext  # a task per core, not per block: a second round is small
    return sc.parallelize(blocks, min(len(blocks), sc.defaultParallelism)).map(answer).collect()


def collect_lanes(epoch: int, out: pa.Table, lanes: list[Lane], job_s: float) -> list[list[EpochResult]]:
    """Each lane's EpochResults (one per repetition) from a job's rows. The stage spans, the job
    time and the peak memory are the job's; `job_share` is the lane's part of the job's task time
    (routing, workers' restore and index work, merging, every repetition), by which the job time
    is apportioned to it."""
    lane_of = out.column("lane").fill_null(-1).to_numpy()
    rtype = out.column("rtype").to_numpy()
    shared = _infos(out, (lane_of < 0) & ((rtype == STATS) | (rtype == MERGED)))
    results = [collect(epoch, out.filter(pa.array(lane_of == i)), lane.collect_service, lane.repeat)
               for i, lane in enumerate(lanes)]
    spans = {"dispatch_span_s": _span(_infos(out, rtype == DISPATCH)),
             "workers_span_s": _span(_infos(out, (rtype == STATS) & (lane_of < 0))),
             "merge_span_s": _span(_infos(out, (rtype == MERGED) & (lane_of < 0)))}
    timings = {**spans, "job_s": job_s, "spark_overhead_s": max(job_s - sum(spans.values()), 0.0)}
    task_s = [sum(r.route_ns / 1e9 + r.merge_busy_s + sum(st.get("busy_s", 0.0) + st.get("restore_s", 0.0)
                                                          for st in r.worker_stats.values()) for r in reps)
              for reps in results]
    total = sum(task_s)
    peak = max((i.get("rss_peak", 0) + i.get("jvm_peak", 0) for i in shared), default=0)
    for reps, t in zip(results, task_s):
        for r in reps:
            r.timings = {**timings, "job_lanes": len(lanes), "job_share": t / total if total > 0 else 1 / len(lanes)}
            r.executor_peak_bytes = peak
    return results


def tables_by_family(out: pa.Table, mask: np.ndarray) -> dict[int, pa.Table]:
    """The IPC payloads of the rows `mask`, concatenated per family code."""
    payload, fam = out.column("payload"), out.column("family")
    tables: dict[int, list[pa.Table]] = {}
    for i in np.flatnonzero(mask):
        tables.setdefault(int(fam[int(i)].as_py()), []).append(from_ipc(payload[int(i)].as_py()))
    return {code: pa.concat_tables(ts) for code, ts in tables.items()}


def _infos(out: pa.Table, mask: np.ndarray) -> list[dict]:
    info = out.column("info")
    return [json.loads(info[int(i)].as_py()) for i in np.flatnonzero(mask)]


def collect(epoch: int, out: pa.Table, collect_service: bool, repeat: int = 1) -> list[EpochResult]:
    """One lane's EpochResult per repetition from its rows (timings and peak memory:
    `collect_lanes`): the same results and counts, each repetition's routing, worker and merge times."""
    rtype = out.column("rtype").to_numpy()
    wcol = out.column("worker").to_numpy()
    rep_of = out.column("bucket").fill_null(0).to_numpy()
    dispatch = _infos(out, rtype == DISPATCH)
    merged = _infos(out, rtype == MERGED)
    local = _infos(out, rtype == LOCAL)
    base = EpochResult(
        epoch=epoch,
        n_events=sum(d["events"] for d in dispatch),
        route_ns=0,
        routed_pairs=sum(d["object_copies"] + d["query_copies"] for d in dispatch),
        routed_objects=sum(d["object_copies"] for d in dispatch),
        routed_queries=sum(d["query_copies"] for d in dispatch),
        shipped_bytes=sum(d.get("shipped_bytes", 0) for d in dispatch),
        shipped_blocks=sum(d.get("shipped_blocks", 0) for d in dispatch),
        result_count=sum(m["count"] for m in merged + local),
        result_hash=sum(m["hash"] for m in merged + local) % (1 << 64),
        local_pairs=sum(m["count"] for m in local),
        dispatched=add_dispatch_counts([d["tally"] for d in dispatch if "tally" in d]),
    )
    payload, info = out.column("payload"), out.column("info")
    base.units = [from_ipc(payload[int(i)].as_py()) for i in np.flatnonzero(rtype == UNITS)]
    base.feedback = tables_by_family(out, rtype == FEEDBACK)
    base.followups = tables_by_family(out, rtype == FOLLOWUP)
    service = ({int(wcol[i]): read_service(payload[int(i)].as_py()) for i in np.flatnonzero(rtype == SERVICE)}
               if collect_service else {})
    stats = np.flatnonzero((rtype == STATS) & (wcol >= 0))
    merge_busy = [m["busy_s"] for m in merged]
    results = []
    for r in range(repeat):
        res = replace(base, route_ns=sum(d["route_ns"][r] for d in dispatch),
                      merge_busy_s=sum(b[r] for b in merge_busy), merge_max_s=max((b[r] for b in merge_busy),
                                                                                 default=0.0),
                      worker_stats={int(wcol[i]): json.loads(info[int(i)].as_py()) for i in stats if rep_of[i] == r},
                      service={w: reps[r] for w, reps in service.items()})
        results.append(res)
    return results
