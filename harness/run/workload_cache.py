"""The workload cache: a workload's event stream built once per (dataset, workload config, seed)
and kept under <results>/cache/workloads/<name>-<key hash>/ as Parquet (what Spark reads), an
Arrow IPC copy the driver maps into memory, and its meta (warm-up, drift, input facts).

The cache identity (`workload_key`) is the workload config without the knobs that cannot change
this workload's stream: the drift knobs without a drift, the snapshot generator's without snapshot
queries, the event-file knobs with the generator (and the file's identity with a file), and the
knobs other families declare (`Family.WorkloadKnobs`, `Family.workload_fields`;
harness/families/workload.py: foreign_fields), each family trimming its own last
(`Family.workload_key`). Dropping rather than listing is what lets a new family or knob leave the
workloads cached before it under their key.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, is_dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from omegaconf import OmegaConf

from datasets.workloads.anomalies import normalise_workload
from datasets.workloads.config import (DRIFT_FIELDS, FILE_FIELDS, OFF_WHEN_NULL, SNAPSHOT_FIELDS, SNAPSHOT_PROTOCOLS,
                                       SharedWorkloadConfig)
from datasets.workloads.events_file import file_identity
from harness.core import store
from harness.core.events import Events
from harness.families import registry as families
from harness.families.workload import foreign_fields


def _as_dict(cfg) -> dict:
    if is_dataclass(cfg):
        return asdict(cfg)
    return OmegaConf.to_container(cfg, resolve=True)


def workload_key(workload_cfg) -> dict:
    """The workload's cache identity (module docstring): its plain config without the knobs that
    cannot change its stream."""
    plain = _as_dict(workload_cfg)
    if plain.get("drift", "none") == "none":
        plain = {k: v for k, v in plain.items() if k not in DRIFT_FIELDS}
    plain = {k: v for k, v in plain.items() if not (k in OFF_WHEN_NULL and v is None)}
    snapshots = plain.get("protocol") in SNAPSHOT_PROTOCOLS
    if not snapshots:
        plain = {k: v for k, v in plain.items() if k not in SNAPSHOT_FIELDS}
    name = plain.get("family", SharedWorkloadConfig.family)
    foreign = foreign_fields(name, snapshots)
    plain = {k: v for k, v in plain.items() if k not in foreign}
    if name in families.names():
        plain = families.get(name).workload_key(plain)
    if plain.get("source", "generator") == "generator":
        plain = {k: v for k, v in plain.items() if k not in FILE_FIELDS}
    else:  # an edited event file is a new workload
        plain["file"] = file_identity(plain["path"])
    return plain


# events per chunk of a stream its generator writes a chunk at a time (`Family.plan_workload`):
# a multiple of the Parquet row group (65,536 rows), so the row groups are those of a stream
# written whole; about 0.4 GB of columns and terms per chunk
CHUNK_ROWS = 1 << 22


def load_or_build_workload(ds, cfg, cache_root: Path, chunks: bool = False):
    """The workload's event stream as Parquet (for Spark) and in memory (for fitting and the oracle),
    with its cache meta (warm-up, drift, `info`: objects reused and the stream anomalies normalised).
    `chunks`: the stream as its batches read one at a time (`StreamChunks`), for a reader that
    goes through it chunk by chunk (the count mode); else one Events (`mapped_events`)."""
    key = json.dumps({"dataset": ds.cache_path, "workload": workload_key(cfg.workload), "seed": cfg.seed},
                     sort_keys=True)
    folder = cache_root / "workloads" / f"{cfg.workload.name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    path = folder / "events.parquet"
    meta_path = folder / "meta.json"
    read = StreamChunks if chunks else mapped_events
    if path.exists() and meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if "info" in meta:  # older caches lack the input facts: rebuild (same seed, same stream)
            return read(folder), meta["warmup"], folder, meta
    df = ds.vocab.column("df").to_numpy()
    family = families.get(cfg.workload.family)
    plan = family.plan_workload(ds.objects, df, ds.extent, cfg.workload, cfg.seed)
    folder.mkdir(parents=True, exist_ok=True)
    if plan is None:  # built whole
        wl = normalise_workload(family.build_workload(ds.objects, df, ds.extent, cfg.workload, cfg.seed))
        ds.drop_objects()
        warmup, n_events, drift, info = wl.warmup, len(wl.events), wl.drift, wl.info
        _write_stream([wl.events.to_arrow()], folder)
        del wl
    else:  # written a chunk at a time: never whole in memory (issue 51)
        ds.drop_objects()
        # what normalising would have fixed, found from the plan: nothing (the generator's own check)
        info = {**plan.info, **plan.check_normal()}
        warmup, n_events, drift = plan.warmup, plan.n_events, plan.drift
        _write_stream((ev.to_arrow() for ev in plan.chunks(CHUNK_ROWS)), folder)
        del plan
    meta = {"warmup": warmup, "events": n_events, "key": json.loads(key), "drift": drift, "info": info}
    text = json.dumps(meta, default=str)
    meta_path.write_text(text)
    return read(folder), meta["warmup"], folder, json.loads(text)  # read through the map, as a cache hit


MAPPED = "events.arrow"


def _write_stream(batches, folder: Path) -> None:
    """The stream's batches, in order, to the Parquet file Spark reads (row groups of 65,536
    rows) and to the Arrow IPC file the driver maps (one record batch per chunk), each written
    to a temporary name and renamed into place."""
    tmp, tmp_ipc = folder / "events.tmp.parquet", folder / f"{MAPPED}.tmp"
    writer = ipc = sink = None
    try:
        for batch in batches:
            if writer is None:
                writer = pq.ParquetWriter(tmp, batch.schema)
                sink = pa.OSFile(str(tmp_ipc), "wb")
                ipc = pa.ipc.new_file(sink, batch.schema)
            writer.write_batch(batch, row_group_size=65536)
            ipc.write_batch(batch)
    finally:
        for handle in (writer, ipc, sink):
            if handle is not None:
                handle.close()
    tmp.replace(folder / "events.parquet")
    tmp_ipc.replace(folder / MAPPED)


def _write_mappable(batch: pa.RecordBatch, folder: Path) -> None:
    """The stream as one uncompressed Arrow IPC record batch beside the Parquet copy (which Spark
    reads), so the driver can map it instead of reading it into its own memory."""
    tmp = folder / f"{MAPPED}.tmp"
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, batch.schema) as writer:
        writer.write_batch(batch)
    tmp.replace(folder / MAPPED)


def mapped_chunks(folder: Path) -> list[Events]:
    """The cached stream as its record batches in order, each with its columns memory-mapped from
    `events.arrow` (zero-copy, read-only): a stream written whole is one batch, one written a
    chunk at a time is one per chunk. A cache written before the mapped copy existed gets one
    from its Parquet file."""
    if not (folder / MAPPED).exists():
        _write_mappable(pq.read_table(folder / "events.parquet").combine_chunks().to_batches()[0], folder)
    with pa.ipc.open_file(pa.memory_map(str(folder / MAPPED))) as reader:
        return [Events.from_arrow(reader.get_batch(i)) for i in range(reader.num_record_batches)]


class StreamChunks:
    """The cached stream's batches in order (one per chunk it was written in, one if written
    whole), each read into memory when iterated and dropped after: going through the stream
    holds one batch at a time. Memory-mapped batches (`mapped_chunks`) would not: a mapped
    file's pages count in the resident set as they are touched, and a pass over the whole
    stream touches all of them (8 GB at PS2Stream's mu = 5M with 2 mu updates). Iterable again."""

    def __init__(self, folder: Path):
        if not (folder / MAPPED).exists():
            mapped_chunks(folder)  # writes the mapped copy of an older cache
        self.path = folder / MAPPED
        with pa.ipc.open_file(pa.memory_map(str(self.path))) as reader:  # headers only: zero-copy
            self.lengths = [reader.get_batch(i).num_rows for i in range(reader.num_record_batches)]

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def rows(self) -> int:
        """The stream's events, from the batches' headers (no batch read)."""
        return sum(self.lengths)

    def __iter__(self):
        with pa.OSFile(str(self.path)) as source, pa.ipc.open_file(source) as reader:
            for i in range(reader.num_record_batches):
                yield Events.from_arrow(reader.get_batch(i))


def mapped_events(folder: Path) -> Events:
    """The cached stream with its columns memory-mapped from `events.arrow` (zero-copy, read-only):
    the driver's epochs, routing upkeep and summary read the rows and columns they use, which the
    page cache holds and can drop again, so the driver's own memory does not grow with the stream
    (issue 16). A stream written a chunk at a time is joined into memory here (a reader that can
    go chunk by chunk takes `mapped_chunks`)."""
    parts = mapped_chunks(folder)
    return parts[0] if len(parts) == 1 else Events.concat(parts)


def publish_events(cfg, folder: Path) -> str:
    """The events table where every executor can read it: the workload cache on this machine, or a
    copy under state_uri (written once per workload, renamed into place); as Spark names it."""
    local = folder / "events.parquet"
    if not cfg.state_uri:
        return str(local)
    target = store.join(cfg.state_uri, "workloads", folder.name, "events.parquet")
    if not store.exists(target):
        store.put_file(local, target)
    return store.spark_uri(target)
