"""The Spark pipeline of one run: per epoch, dispatch -> workers -> merge (DESIGN.md).

1. dispatch: `mapInArrow` with the broadcast router turns events into (worker, event) rows; each
   input batch also yields one statistics row (worker = -1) with its routing time.
2. workers: the routed rows plus the state rows the previous epoch left are repartitioned by
   worker and sorted by (worker, seq); `mapInArrow` runs one WorkerIndex per worker over its
   sub-stream: restore the state (rows with seq before the epoch), process the epoch, emit result
   keys, one statistics row, per-event service times and the state rows for the next epoch.
3. merge: result keys are shuffled by key and de-duplicated per partition (sort + neighbour
   mask); each partition returns its count and hash sum (or the keys when pairs are kept).
State between epochs is Parquet keyed by worker, never executor memory.
Everything crosses the JVM boundary as Arrow batches; no per-row Python.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from harness.events import EVENT_FIELDS, EVENT_SCHEMA, Events, key_hash_sum, sorted_unique

ROUTED_SCHEMA = pa.schema([("worker", pa.int32()), *EVENT_FIELDS])
# rtype: 0 result key, 1 worker statistics (info JSON), 2 service time of one event, 3 state row
RESULT, STATS, SERVICE, STATE = 0, 1, 2, 3
WORKER_OUT_SCHEMA = pa.schema(
    [("rtype", pa.int8()), ("worker", pa.int32()), ("key", pa.int64()), ("value", pa.float64()),
     ("info", pa.string()), *EVENT_FIELDS]
)
MERGE_SCHEMA = pa.schema([("count", pa.int64()), ("hash_sum", pa.int64())])


def _spark_schema(schema: pa.Schema) -> str:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def dispatch_batches(batches, router_bc):
    """mapInArrow body of the dispatch stage."""
    router = router_bc.value
    for batch in batches:
        if batch.num_rows == 0:
            continue
        ev = Events.from_arrow(batch)
        t0 = time.perf_counter_ns()
        rows, workers = router.route(ev)
        ns = time.perf_counter_ns() - t0
        if len(rows):
            routed = batch.take(pa.array(rows))
            yield pa.RecordBatch.from_arrays(
                [pa.array(workers.astype(np.int32)), *routed.columns], schema=ROUTED_SCHEMA
            )
        stats = {name: pa.nulls(1, t) for name, t in EVENT_FIELDS}
        stats["seq"] = pa.array([batch.num_rows], pa.int64())
        stats["id"] = pa.array([ns], pa.int64())
        n_obj_copies = int(np.count_nonzero(ev.kind[rows] == 0))
        stats["x"] = pa.array([float(n_obj_copies)], pa.float64())
        stats["y"] = pa.array([float(len(rows) - n_obj_copies)], pa.float64())
        yield pa.RecordBatch.from_arrays(
            [pa.array([-1], pa.int32())] + [stats[n] for n in EVENT_SCHEMA.names], schema=ROUTED_SCHEMA
        )


def _out_batch(rtype, worker, key=None, value=None, info=None, events: pa.RecordBatch | None = None):
    n = len(key) if key is not None else (len(value) if value is not None else (events.num_rows if events is not None else 1))
    cols = [
        pa.array(np.full(n, rtype, np.int8)),
        pa.array(np.full(n, worker, np.int32)),
        pa.array(key, pa.int64()) if key is not None else pa.nulls(n, pa.int64()),
        pa.array(value, pa.float64()) if value is not None else pa.nulls(n, pa.float64()),
        pa.array([info] * n, pa.string()) if info is not None else pa.nulls(n, pa.string()),
    ]
    if events is not None:
        cols += list(events.columns)
    else:
        cols += [pa.nulls(n, t) for _, t in EVENT_FIELDS]
    return pa.RecordBatch.from_arrays(cols, schema=WORKER_OUT_SCHEMA)


def worker_batches(batches, index_factory, epoch_start: int):
    """mapInArrow body of the worker stage: one index per worker present in the partition."""
    batches = [b for b in batches if b.num_rows]
    if not batches:
        return
    table = pa.Table.from_batches(batches)
    workers = table.column("worker").to_numpy()
    seq = table.column("seq").to_numpy()
    bounds = np.flatnonzero(np.diff(workers)) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(workers)]):
        w = int(workers[lo])
        part = table.slice(lo, hi - lo).drop_columns(["worker"])
        n_state = int(np.searchsorted(seq[lo:hi], epoch_start))  # sorted by seq: state rows first
        state = Events.from_arrow(part.slice(0, n_state))
        epoch = part.slice(n_state)
        ev = Events.from_arrow(epoch)
        index = index_factory()
        restore_s = index.restore(state)
        out = index.process(ev)
        size = index.size_bytes()
        if len(out.keys):
            yield _out_batch(RESULT, w, key=out.keys)
        total_work = max(int(out.work.sum()), 1)
        service = out.busy_s * out.work / total_work
        if len(ev):
            yield _out_batch(SERVICE, w, key=ev.seq, value=service)
        info = {**out.counters, "busy_s": out.busy_s, "restore_s": restore_s, "index_bytes": size,
                "events": len(ev), "restored": len(state)}
        yield _out_batch(STATS, w, info=json.dumps(info))
        kept = index.export_state()
        if len(kept):
            yield _out_batch(STATE, w, events=kept.to_arrow())


def merge_batches(batches, keep_pairs: bool):
    """mapInArrow body of the merge stage: distinct keys of this key-partition."""
    keys = [b.column(0).to_numpy(zero_copy_only=False) for b in batches if b.num_rows]
    uniq = sorted_unique(np.concatenate(keys)) if keys else np.zeros(0, np.int64)
    if keep_pairs:
        yield pa.RecordBatch.from_arrays([pa.array(uniq, pa.int64())], names=["key"])
        return
    h = np.uint64(key_hash_sum(uniq) % (1 << 64)).view(np.int64)
    yield pa.RecordBatch.from_arrays([pa.array([len(uniq)], pa.int64()), pa.array([h], pa.int64())],
                                     schema=MERGE_SCHEMA)


@dataclass
class EpochResult:
    epoch: int
    n_events: int
    route_ns: int
    routed_pairs: int
    routed_objects: int
    routed_queries: int
    worker_stats: dict[int, dict] = field(default_factory=dict)
    service: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # worker -> (seq, s)
    result_count: int = 0
    result_hash: int = 0
    timings: dict[str, float] = field(default_factory=dict)


def run_epoch(spark, events_df, epoch: int, seq_lo: int, seq_hi: int, router, index_factory, n_workers: int,
              state_path: Path | None, next_state_path: Path, keep_pairs: bool, pairs_path: Path | None,
              collect_service: bool = True) -> EpochResult:
    from pyspark.sql import functions as F

    sc = spark.sparkContext
    # several workers may share a partition (each still gets its own index), so the task count
    # follows the cores, not the worker count
    parts = max(2, min(n_workers, 2 * sc.defaultParallelism))
    timings = {}
    t0 = time.perf_counter()
    router_bc = sc.broadcast(router)
    epoch_df = events_df.where((F.col("seq") >= seq_lo) & (F.col("seq") < seq_hi))
    routed = epoch_df.mapInArrow(lambda it: dispatch_batches(it, router_bc), _spark_schema(ROUTED_SCHEMA)).persist()
    stats = routed.where("worker < 0").select("seq", "id", "x", "y").toArrow()
    timings["dispatch_s"] = time.perf_counter() - t0
    total = {c: stats.column(c).to_numpy(zero_copy_only=False).sum() for c in ("seq", "id", "x", "y")}
    res = EpochResult(
        epoch=epoch,
        n_events=int(total["seq"]),
        route_ns=int(total["id"]),
        routed_pairs=int(total["x"] + total["y"]),
        routed_objects=int(total["x"]),
        routed_queries=int(total["y"]),
    )

    t0 = time.perf_counter()
    work_in = routed.where("worker >= 0")
    if state_path is not None and state_path.exists():
        work_in = work_in.unionByName(spark.read.parquet(str(state_path)))
    out = (
        work_in.repartition(parts, "worker")
        .sortWithinPartitions("worker", "seq")
        .mapInArrow(lambda it: worker_batches(it, index_factory, seq_lo), _spark_schema(WORKER_OUT_SCHEMA))
        .persist()
    )
    small = out.where(f"rtype = {STATS}" + (f" OR rtype = {SERVICE}" if collect_service else "")).select(
        "rtype", "worker", "key", "value", "info").toArrow()
    out.where(f"rtype = {STATE}").select("worker", *EVENT_SCHEMA.names).write.mode("overwrite").parquet(
        str(next_state_path))
    timings["workers_s"] = time.perf_counter() - t0
    rtype = small.column("rtype").to_numpy()
    wcol = small.column("worker").to_numpy()
    for i in np.flatnonzero(rtype == STATS):
        res.worker_stats[int(wcol[i])] = json.loads(small.column("info")[int(i)].as_py())
    if collect_service:
        srv = rtype == SERVICE
        keys = small.column("key").to_numpy(zero_copy_only=False)
        vals = small.column("value").to_numpy(zero_copy_only=False)
        for w in np.unique(wcol[srv]):
            m = srv & (wcol == w)
            order = np.argsort(keys[m], kind="stable")
            res.service[int(w)] = (keys[m][order].astype(np.int64), vals[m][order].astype(np.float64))

    t0 = time.perf_counter()
    keys_df = out.where(f"rtype = {RESULT}").select("key").repartition(parts, "key")
    if keep_pairs and pairs_path is not None:
        merged = keys_df.mapInArrow(lambda it: merge_batches(it, True), "key long")
        merged.write.mode("overwrite").parquet(str(pairs_path / f"epoch={epoch}"))
        merged = spark.read.parquet(str(pairs_path / f"epoch={epoch}")).toArrow()
        keys = merged.column("key").to_numpy()
        res.result_count = len(keys)
        res.result_hash = key_hash_sum(keys)
    else:
        merged = keys_df.mapInArrow(lambda it: merge_batches(it, False), _spark_schema(MERGE_SCHEMA)).toArrow()
        res.result_count = int(np.sum(merged.column("count").to_numpy()))
        res.result_hash = int(np.sum(merged.column("hash_sum").to_numpy().view(np.uint64), dtype=np.uint64))
    timings["merge_s"] = time.perf_counter() - t0
    res.timings = timings
    routed.unpersist()
    out.unpersist()
    router_bc.unpersist()
    return res
