"""The Spark pipeline of one run: per epoch, one Spark job of three stages (DESIGN.md).

1. dispatch: `mapInArrow` with the broadcast router routes each input batch and emits, per
   worker it reaches, one row holding that worker's events of the batch as an Arrow IPC block,
   plus one statistics row (worker = -1, `info` JSON) with the routing time.
2. workers: the blocks are repartitioned by worker (a small row per worker joins in, so a worker
   whose epoch is empty still carries its state on); `mapInArrow` runs one WorkerIndex per
   worker: read the state it kept (its Parquet file of the previous epoch), sort its events by
   `seq`, process them, and emit its distinct result keys split into `merge buckets` by key hash,
   its per-event service times, one statistics row, and write the state it keeps as its Parquet
   file for the next epoch (keyed by worker, so a retried task overwrites rather than
   duplicates; on a cluster `results_dir` must be a shared filesystem).
3. merge: the key blocks are shuffled by bucket and de-duplicated per partition (keys of
   different buckets never collide); each partition returns its count and hash sum (and writes
   its keys when pairs are kept); every other row passes through to the driver.

Moving Arrow IPC blocks instead of one Spark row per event or per result pair keeps Spark's
per-row conversion cost out of the measurement (a dense epoch yields millions of pairs), while
the shuffles and the distribution of work stay Spark's. One action per epoch; every stage
records its start and end, which gives the per-stage time split. No per-row Python.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from harness.core.events import EVENT_FIELDS, Events, key_hash_sum, sorted_unique, splitmix64

BLOCK_SCHEMA = pa.schema([("worker", pa.int32()), ("payload", pa.binary()), ("info", pa.string())])
STATE_SCHEMA = pa.schema(EVENT_FIELDS)
# rtype: result keys (payload int64), worker statistics (info JSON), service times (payload IPC
# of seq, seconds), dispatch statistics (info JSON), merge statistics (info JSON), the monitor's
# per-unit statistics (payload IPC, harness/monitor.py)
RESULT, STATS, SERVICE, DISPATCH, MERGED, UNITS = 0, 1, 2, 3, 4, 5
OUT_SCHEMA = pa.schema(
    [("rtype", pa.int8()), ("worker", pa.int32()), ("bucket", pa.int32()), ("payload", pa.binary()),
     ("info", pa.string())]
)
MAX_BLOCK_BYTES = 64 << 20  # well under Arrow's 2 GiB per binary array


def _spark_schema(schema: pa.Schema) -> str:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def to_ipc(table: pa.Table | pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write(table)
    return sink.getvalue().to_pybytes()


def from_ipc(blob: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(blob)).read_all()


def _row(schema: pa.Schema, **values) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([values.get(f.name)], f.type) for f in schema], schema=schema)


def dispatch_batches(batches, router_bc):
    """mapInArrow body of the dispatch stage."""
    router = router_bc.value
    for batch in batches:
        if batch.num_rows == 0:
            continue
        start = time.time()
        ev = Events.from_arrow(batch)
        t0 = time.perf_counter_ns()
        rows, workers = router.route(ev)
        ns = time.perf_counter_ns() - t0
        order = np.lexsort((rows, workers))  # by worker, then stream order within the batch
        routed = batch.take(pa.array(rows[order]))
        ws = workers[order]
        cuts = np.flatnonzero(np.diff(ws)) + 1
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(ws)]):
            if hi > lo:
                yield _row(BLOCK_SCHEMA, worker=int(ws[lo]), payload=to_ipc(routed.slice(lo, hi - lo)))
        n_obj_copies = int(np.count_nonzero(ev.kind[rows] == 0))
        info = {"events": batch.num_rows, "route_ns": ns, "object_copies": n_obj_copies,
                "query_copies": len(rows) - n_obj_copies, "start": start, "end": time.time()}
        yield _row(BLOCK_SCHEMA, worker=-1, info=json.dumps(info))


def _out(rtype: int, worker: int, bucket: int | None = None, payload: bytes | None = None,
         info: dict | None = None) -> pa.RecordBatch:
    return _row(OUT_SCHEMA, rtype=rtype, worker=worker, bucket=bucket, payload=payload,
                info=None if info is None else json.dumps(info))


def key_blocks(keys: np.ndarray, n_buckets: int):
    """(bucket, bytes) blocks of sorted distinct keys, split by key hash and capped in size."""
    bucket = (splitmix64(keys) % np.uint64(n_buckets)).astype(np.int64)
    order = np.argsort(bucket, kind="stable")
    keys, bucket = keys[order], bucket[order]
    step = MAX_BLOCK_BYTES // 8
    for b in np.unique(bucket):
        lo, hi = np.searchsorted(bucket, [b, b + 1])
        for s in range(lo, hi, step):
            yield int(b), keys[s:min(s + step, hi)].tobytes()


def state_file(state_dir: Path | str, worker: int) -> Path:
    return Path(state_dir) / f"worker-{worker:05d}.parquet"


def _read_state(state_dir: str | None, worker: int) -> Events:
    if state_dir is None or not state_file(state_dir, worker).exists():
        return Events.empty()
    return Events.from_arrow(pq.read_table(state_file(state_dir, worker)))


def worker_batches(batches, index_factory, state_in: str | None, state_out: str, n_buckets: int,
                   collect_service: bool, router_bc=None):
    """mapInArrow body of the worker stage: one index per worker present in the partition. With
    the epoch's router (`router_bc`) each worker also reports its per-unit statistics."""
    start = time.time()
    table = pa.Table.from_batches([b for b in batches if b.num_rows], schema=BLOCK_SCHEMA)
    workers = table.column("worker").to_numpy()
    payload = table.column("payload")
    infos = table.column("info")
    for i in np.flatnonzero(workers < 0):  # dispatch statistics travel with the data to the driver
        yield _row(OUT_SCHEMA, rtype=DISPATCH, worker=-1, info=infos[int(i)].as_py())
    for w in np.unique(workers[workers >= 0]).tolist():
        blocks = [from_ipc(payload[int(i)].as_py()) for i in np.flatnonzero(workers == w)
                  if payload[int(i)].is_valid]
        epoch = pa.concat_tables(blocks) if blocks else Events.empty().to_arrow()
        if isinstance(epoch, pa.RecordBatch):
            epoch = pa.Table.from_batches([epoch])
        seq = epoch.column("seq").to_numpy()
        ev = Events.from_arrow(epoch.take(pa.array(np.argsort(seq, kind="stable"))))
        state = _read_state(state_in, w)
        index = index_factory()
        restore_s = index.restore(state)
        out = index.process(ev)
        size = index.size_bytes()
        for bucket, blob in key_blocks(sorted_unique(out.keys), n_buckets):
            yield _out(RESULT, w, bucket, blob)
        if collect_service and len(ev):
            total_work = max(int(out.work.sum()), 1)
            service = pa.table({"seq": ev.seq, "s": out.busy_s * out.work / total_work})
            yield _out(SERVICE, w, payload=to_ipc(service))
        kept = index.export_state()
        if router_bc is not None:
            from harness.engine.monitor import unit_stats

            yield _out(UNITS, w, payload=to_ipc(unit_stats(router_bc.value, w, ev, out.work, out.busy_s, state, kept)))
        path = state_file(state_out, w)
        if len(kept):
            pq.write_table(pa.Table.from_batches([kept.to_arrow()]), path)
        elif path.exists():
            path.unlink()
        yield _out(STATS, w, info={**out.counters, "busy_s": out.busy_s, "restore_s": restore_s,
                                   "index_bytes": size, "events": len(ev), "restored": len(state),
                                   "kept": len(kept)})
    yield _out(STATS, -1, info={"start": start, "end": time.time()})


def merge_batches(batches, keep_pairs_dir: str | None):
    """mapInArrow body of the merge stage: distinct keys of this partition's buckets; other rows pass."""
    start = time.time()
    keys = []
    for b in batches:
        if b.num_rows == 0:
            continue
        is_key = b.column("rtype").to_numpy(zero_copy_only=False) == RESULT
        payload = b.column("payload")
        keys += [np.frombuffer(payload[int(i)].as_py(), np.int64) for i in np.flatnonzero(is_key)]
        if not is_key.all():
            yield b.filter(pa.array(~is_key))
    uniq = sorted_unique(np.concatenate(keys)) if keys else np.zeros(0, np.int64)
    if keep_pairs_dir is not None and len(uniq):
        from pyspark import TaskContext

        pid = TaskContext.get().partitionId()
        pq.write_table(pa.table({"key": uniq}), Path(keep_pairs_dir) / f"part-{pid:05d}.parquet")
    yield _out(MERGED, -1, info={"count": len(uniq), "hash": key_hash_sum(uniq), "start": start,
                                 "end": time.time()})


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
    units: list[pa.Table] = field(default_factory=list)  # the monitor's per-unit tables (when asked)
    result_count: int = 0
    result_hash: int = 0
    timings: dict[str, float] = field(default_factory=dict)


def _span(infos: list[dict]) -> float:
    return max(i["end"] for i in infos) - min(i["start"] for i in infos) if infos else 0.0


def _fresh_dir(path: Path) -> str:
    path.mkdir(parents=True, exist_ok=True)
    for old in path.glob("*.parquet"):
        old.unlink()
    return str(path)


def run_epoch(spark, events_df, epoch: int, seq_lo: int, seq_hi: int, router, index_factory, n_workers: int,
              state_path: Path | None, next_state_path: Path, keep_pairs: bool, pairs_path: Path | None,
              collect_service: bool = True, monitor: bool = False) -> EpochResult:
    from pyspark.sql import functions as F

    sc = spark.sparkContext
    # several workers may share a partition (each still gets its own index), so the task count
    # follows the cores, not the worker count
    parts = max(2, min(n_workers, 2 * sc.defaultParallelism))
    state_in = str(state_path) if state_path is not None else None
    state_out = _fresh_dir(Path(next_state_path))
    pairs_dir = _fresh_dir(Path(pairs_path) / f"epoch={epoch}") if keep_pairs and pairs_path else None
    t0 = time.perf_counter()
    router_bc = sc.broadcast(router)
    epoch_df = events_df.where((F.col("seq") >= seq_lo) & (F.col("seq") < seq_hi))
    blocks = epoch_df.mapInArrow(lambda it: dispatch_batches(it, router_bc), _spark_schema(BLOCK_SCHEMA))
    every_worker = spark.createDataFrame([(w, None, None) for w in range(n_workers)], _spark_schema(BLOCK_SCHEMA))
    out = (
        blocks.unionByName(every_worker)
        .repartition(parts, "worker")
        .mapInArrow(lambda it: worker_batches(it, index_factory, state_in, state_out, parts, collect_service,
                                              router_bc if monitor else None),
                    _spark_schema(OUT_SCHEMA))
        .repartition(parts, "bucket")
        .mapInArrow(lambda it: merge_batches(it, pairs_dir), _spark_schema(OUT_SCHEMA))
        .toArrow()
    )
    job_s = time.perf_counter() - t0
    router_bc.unpersist()
    return _collect(epoch, out, collect_service, job_s)


def _collect(epoch: int, out: pa.Table, collect_service: bool, job_s: float) -> EpochResult:
    rtype = out.column("rtype").to_numpy()
    wcol = out.column("worker").to_numpy()
    info = out.column("info")

    def infos(mask):
        return [json.loads(info[int(i)].as_py()) for i in np.flatnonzero(mask)]

    dispatch = infos(rtype == DISPATCH)
    merged = infos(rtype == MERGED)
    stage = infos((rtype == STATS) & (wcol < 0))
    res = EpochResult(
        epoch=epoch,
        n_events=sum(d["events"] for d in dispatch),
        route_ns=sum(d["route_ns"] for d in dispatch),
        routed_pairs=sum(d["object_copies"] + d["query_copies"] for d in dispatch),
        routed_objects=sum(d["object_copies"] for d in dispatch),
        routed_queries=sum(d["query_copies"] for d in dispatch),
        result_count=sum(m["count"] for m in merged),
        result_hash=sum(m["hash"] for m in merged) % (1 << 64),
    )
    for i in np.flatnonzero((rtype == STATS) & (wcol >= 0)):
        res.worker_stats[int(wcol[i])] = json.loads(info[int(i)].as_py())
    payload = out.column("payload")
    res.units = [from_ipc(payload[int(i)].as_py()) for i in np.flatnonzero(rtype == UNITS)]
    if collect_service:
        for i in np.flatnonzero(rtype == SERVICE):
            t = from_ipc(payload[int(i)].as_py())
            res.service[int(wcol[i])] = (t.column("seq").to_numpy(), t.column("s").to_numpy())
    spans = {"dispatch_s": _span(dispatch), "workers_s": _span(stage), "merge_s": _span(merged)}
    res.timings = {**spans, "job_s": job_s, "spark_overhead_s": max(job_s - sum(spans.values()), 0.0)}
    return res
