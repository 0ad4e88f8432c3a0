"""What crosses Spark and the disk between stages: Arrow blocks and the state files of epochs.

Moving Arrow IPC blocks instead of one Spark row per event or per result keeps Spark's per-row
conversion cost out of the measurement (a dense epoch yields millions of pairs), while the
shuffles and the distribution of work stay Spark's. State is an Arrow IPC file (it lives one
epoch: no Parquet encoding), one per (worker, family, part) and per (family, merge bucket), in a folder per epoch under the run's state URI
(harness/core/store.py): a retried task overwrites rather than duplicates, and an epoch reads only
what the one before it wrote.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from harness.core import store
from harness.core.events import Events
from harness.families.base import StateBundle

# dispatch -> workers: one block per (batch, lane, worker), the seq of the events routed there (the
# worker reads the events from the events table; pipeline.EpochEvents); worker -1 carries the dispatch statistics
# (info) and, with a bucket, the batch's query events for a merger that needs them
# `lane`: which run of a shared epoch job the row belongs to (harness/engine/pipeline.py)
BLOCK_SCHEMA = pa.schema([("worker", pa.int32()), ("payload", pa.binary()), ("info", pa.string()),
                          ("bucket", pa.int32()), ("family", pa.int8()), ("lane", pa.int32())])
# rtype of the worker and merge stages' rows: result blocks (payload: the family's merger reads
# them), worker statistics (info JSON), service times (payload: `service_block`), dispatch
# statistics (info JSON), merge statistics (info JSON), the monitor's per-unit statistics
# (payload IPC), query events for a merger, a tick that makes a stateful merger's bucket run,
# and feedback for the router (payload IPC of qid, value), and the count and hash of the pairs a
# worker stage task finished itself (info JSON; harness/engine/local_pairs.py), and a worker's first
# rounds of two-round snapshot queries for the driver (payload IPC of qid, seq, value; rounds.py)
RESULT, STATS, SERVICE, DISPATCH, MERGED, UNITS, QUERIES, TICK, FEEDBACK, LOCAL, FOLLOWUP = range(11)
OUT_SCHEMA = pa.schema(
    [("rtype", pa.int8()), ("worker", pa.int32()), ("bucket", pa.int32()), ("payload", pa.binary()),
     ("info", pa.string()), ("family", pa.int8()), ("lane", pa.int32())]
)
BUNDLE_PARTS = ("queries", "objects", "results")


def spark_schema(schema: pa.Schema) -> str:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def to_ipc(table: pa.Table | pa.RecordBatch, compression: str | None = None) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression=compression)) as writer:
        writer.write(table)
    return sink.getvalue().to_pybytes()


def from_ipc(blob: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(blob)).read_all()


def service_block(seq: np.ndarray, work: np.ndarray, busy_s: list[float]) -> bytes:
    """A worker's service times as they cross Spark: the seq as deltas and the work counts,
    zstd-compressed, and the busy time of each repetition (the work counts are the same in every
    one); `read_service` apportions it (s = busy * work / total). Small integers compress about
    tenfold where the seconds themselves would not, and this is the largest thing an epoch job
    carries (one row per event copy)."""
    table = pa.table({"dseq": np.diff(seq, prepend=0), "work": work})
    table = table.replace_schema_metadata({"busy_s": ",".join(float(b).hex() for b in busy_s)})
    return to_ipc(table, compression="zstd")


def read_service(blob: bytes) -> list[tuple[np.ndarray, np.ndarray]]:
    """(seq, service seconds) of a `service_block`, per repetition (the seq array shared)."""
    table = from_ipc(blob)
    busy = [float.fromhex(b) for b in table.schema.metadata[b"busy_s"].decode().split(",")]
    seq = np.cumsum(table.column("dseq").to_numpy())
    work = table.column("work").to_numpy()
    total = max(int(work.sum()), 1)
    return [(seq, b * work / total) for b in busy]


def one_row(schema: pa.Schema, **values) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([values.get(f.name)], f.type) for f in schema], schema=schema)


def out_values(rtype: int, worker: int, bucket: int | None = None, payload: bytes | None = None,
               info: dict | None = None, family: int | None = None, lane: int | None = None) -> dict:
    return dict(rtype=rtype, worker=worker, bucket=bucket, payload=payload,
                info=None if info is None else json.dumps(info), family=family, lane=lane)


def out_row(*args, **kwargs) -> pa.RecordBatch:
    return one_row(OUT_SCHEMA, **out_values(*args, **kwargs))


ROWS_FLUSH_BYTES = 8 << 20


class Rows:
    """Rows of one schema gathered into one RecordBatch, flushed when their payloads reach
    `flush_bytes` (a worker's results still leave slice by slice at scale) or when asked. A batch
    per row cost an Arrow array per column and a message through Spark each: thousands per epoch
    job (a row per (lane, worker, dispatch batch) block, several per worker unit)."""

    def __init__(self, schema: pa.Schema, flush_bytes: int = ROWS_FLUSH_BYTES):
        self.schema, self.flush_bytes = schema, flush_bytes
        self._reset()

    def _reset(self) -> None:
        self.cols: dict[str, list] = {f.name: [] for f in self.schema}
        self.n = self.bytes = 0

    def add(self, **values):
        """Gather one row; yields the gathered batch once its payloads reach `flush_bytes`."""
        for name, col in self.cols.items():
            col.append(values.get(name))
        self.n += 1
        self.bytes += len(values.get("payload") or b"")
        if self.bytes >= self.flush_bytes:
            yield from self.flush()

    def out(self, *args, **kwargs):
        """`add` of an OUT_SCHEMA row (`out_values`' arguments)."""
        yield from self.add(**out_values(*args, **kwargs))

    def flush(self):
        if self.n:
            batch = pa.RecordBatch.from_arrays([pa.array(self.cols[f.name], f.type) for f in self.schema],
                                               schema=self.schema)
            self._reset()
            yield batch


def _events_table(ev: Events) -> pa.Table:
    return pa.Table.from_batches([ev.to_arrow()])


def bundle_file(state_dir: str, worker: int, family: int, part: str) -> str:
    return store.join(state_dir, f"worker-{worker:05d}-f{family}-{part}.arrow")


def write_bundle(state_dir: str, worker: int, family: int, bundle: StateBundle) -> None:
    """A worker's state for one family, one Parquet file per non-empty part (an empty part leaves none)."""
    tables = {"queries": _events_table(bundle.queries) if len(bundle.queries) else None,
              "objects": _events_table(bundle.objects) if len(bundle.objects) else None,
              "results": bundle.results if bundle.results is not None and bundle.results.num_rows else None}
    for part, table in tables.items():
        path = bundle_file(state_dir, worker, family, part)
        if table is not None:
            store.write_table(path, table)
        else:
            store.remove(path)


def read_bundle(state_dir: str | None, worker: int, family: int) -> StateBundle:
    """The state a worker kept for one family (an empty bundle when it kept nothing)."""
    if state_dir is None:
        return StateBundle()
    parts = {part: store.read_table(bundle_file(state_dir, worker, family, part)) for part in BUNDLE_PARTS}
    return StateBundle(
        queries=Events.from_arrow(parts["queries"]) if parts["queries"] is not None else Events.empty(),
        objects=Events.from_arrow(parts["objects"]) if parts["objects"] is not None else Events.empty(),
        results=parts["results"],
    )


def merge_state_file(state_dir: str, family: int, bucket: int) -> str:
    return store.join(state_dir, f"merge-f{family}-{bucket:05d}.arrow")


def read_merge_state(state_dir: str | None, family: int, bucket: int) -> pa.Table | None:
    return None if state_dir is None else store.read_table(merge_state_file(state_dir, family, bucket))


def write_merge_state(state_dir: str, family: int, bucket: int, state: pa.Table | None) -> None:
    path = merge_state_file(state_dir, family, bucket)
    if state is not None and state.num_rows:
        store.write_table(path, state)
    else:
        store.remove(path)
