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


def load_or_build_workload(ds, cfg, cache_root: Path):
    """The workload's event stream as Parquet (for Spark) and in memory (for fitting and the oracle),
    with its cache meta (warm-up, drift, `info`: objects reused and the stream anomalies normalised)."""
    key = json.dumps({"dataset": ds.cache_path, "workload": workload_key(cfg.workload), "seed": cfg.seed},
                     sort_keys=True)
    folder = cache_root / "workloads" / f"{cfg.workload.name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    path = folder / "events.parquet"
    meta_path = folder / "meta.json"
    if path.exists() and meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if "info" in meta:  # older caches lack the input facts: rebuild (same seed, same stream)
            return mapped_events(folder), meta["warmup"], folder, meta
    df = ds.vocab.column("df").to_numpy()
    wl = families.get(cfg.workload.family).build_workload(ds.objects, df, ds.extent, cfg.workload, cfg.seed)
    wl = normalise_workload(wl)  # one meaning for stream anomalies everywhere (datasets/workloads/anomalies.py)
    ds.drop_objects()
    folder.mkdir(parents=True, exist_ok=True)
    batch = wl.events.to_arrow()
    tmp = folder / "events.tmp.parquet"
    pq.write_table(pa.Table.from_batches([batch]), tmp, row_group_size=65536)
    tmp.replace(path)
    _write_mappable(batch, folder)
    meta = {"warmup": wl.warmup, "events": len(wl.events), "key": json.loads(key), "drift": wl.drift, "info": wl.info}
    text = json.dumps(meta, default=str)
    meta_path.write_text(text)
    del wl, batch  # the run reads the stream through the map, as a cache hit does
    return mapped_events(folder), meta["warmup"], folder, json.loads(text)


MAPPED = "events.arrow"


def _write_mappable(batch: pa.RecordBatch, folder: Path) -> None:
    """The stream as one uncompressed Arrow IPC record batch beside the Parquet copy (which Spark
    reads), so the driver can map it instead of reading it into its own memory."""
    tmp = folder / f"{MAPPED}.tmp"
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, batch.schema) as writer:
        writer.write_batch(batch)
    tmp.replace(folder / MAPPED)


def mapped_events(folder: Path) -> Events:
    """The cached stream with its columns memory-mapped from `events.arrow` (zero-copy, read-only):
    the driver's epochs, routing upkeep and summary read the rows and columns they use, which the
    page cache holds and can drop again, so the driver's own memory does not grow with the stream
    (issue 16). A cache written before the mapped copy existed gets one from its Parquet file."""
    if not (folder / MAPPED).exists():
        _write_mappable(pq.read_table(folder / "events.parquet").combine_chunks().to_batches()[0], folder)
    with pa.ipc.open_file(pa.memory_map(str(folder / MAPPED))) as reader:
        return Events.from_arrow(reader.get_batch(0))


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
