"""One preparation path for every source: validate rows, tokenise, rank the vocabulary, encode,
order by time, project to km, and cache the result as Parquet.

Sources only differ in how they produce raw rows (lon, lat, text, ts); everything after that is
shared, so the synthetic generator exercises the same code as user files. The cache directory is
<cache_root>/<name>-<hash of the config fields that affect the result (and, for files, the files'
sizes and mtimes)>; a hit reads three files and starts no Spark job.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pathlib
import shutil
import time
import dataclasses
import uuid
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import functions as F

from harness.core.events import OBJECT_SCHEMA

from . import files, geonames, synthetic
from .config import BAD_ROW_REASONS, source_of, validate_dataset_config
from .projection import bbox_centre, project
from .text import STOP_WORDS, TOKEN_SPLIT, VOCAB_SCHEMA, build_vocab, encode_terms

PREP_VERSION = 1
log = logging.getLogger(__name__)

_PLACES = ["country", "bbox", "min_population"]
_KEY_FIELDS = {  # per source (config.SOURCES); the key also holds the dataset name
    "synthetic": ["size", "seed", *_PLACES, "n_places", "spread_km", "noise_fraction", "vocab_size",
                  "zipf_s", "min_terms", "max_terms", "region_grid", "topic_terms", "topic_weight_min",
                  "topic_weight_max", "rate", "partitions"],
    "geonames": ["size", "seed", *_PLACES],
    "file": ["size", "path", "format", "lon_col", "lat_col", "text_col", "ts_col", "id_col", "on_bad_rows",
             "header", "columns", "delimiter", "quote", "escape", "encoding"],
}
_FLOATS = {"spread_km", "noise_fraction", "zipf_s", "topic_weight_min", "topic_weight_max", "rate"}


@dataclass
class PreparedDataset:
    name: str
    # OBJECT_SCHEMA, oid = 0..n-1 in ts order; None: read from the cache on first use, so a run whose
    # workload is cached never holds the dataset (10M objects are about 1 GB: issue 16)
    _objects: pa.Table | None
    vocab: pa.Table  # term_id int32, term string, df int64
    extent: tuple[float, float, float, float]  # xmin, ymin, xmax, ymax (km)
    origin: tuple[float, float]  # lon0, lat0
    bad_rows: dict[str, int] = field(default_factory=dict)
    n_input_rows: int = 0
    cache_path: str = ""
    # rows with latitude out of range whose lon and lat, swapped, would both be valid
    swapped_lat_lon_rows: int = 0
    # CSV rows whose text held the delimiter, read whole by dataset.text_rest_of_line (else field_count_mismatch)
    rescued_rows: int = 0
    # field_count_mismatch rows dataset.text_rest_of_line=true would read whole (the text is the last
    # field and holds the delimiter); counted while the option is off (issue 52)
    rescuable_rows: int = 0

    @property
    def objects(self) -> pa.Table:
        if self._objects is None:
            self._objects = pq.read_table(pathlib.Path(self.cache_path) / "objects.parquet").cast(OBJECT_SCHEMA)
        return self._objects

    def drop_objects(self) -> None:
        """Forget the objects table (it is read again if asked for): a run needs it only to
        generate its workload."""
        if self.cache_path:
            self._objects = None

    @property
    def swapped_lat_lon_suspected(self) -> bool:
        return swap_hint(self.bad_rows, self.swapped_lat_lon_rows, self.n_input_rows) is not None

    def swap_hint(self) -> str | None:
        """The malformed-rows warning's line about swapped columns, or None."""
        return swap_hint(self.bad_rows, self.swapped_lat_lon_rows, self.n_input_rows)

    def rest_of_line_hint(self) -> str | None:
        """The malformed-rows warning's line naming dataset.text_rest_of_line, or None."""
        return rest_of_line_hint(self.bad_rows, self.rescuable_rows)


def rest_of_line_hint(bad_rows: dict, rescuable: int) -> str | None:
    """When some field_count_mismatch rows would be read whole with dataset.text_rest_of_line=true
    (their text, the last field, holds the delimiter), the option and how many (issue 52)."""
    if not rescuable:
        return None
    return (f"dataset.text_rest_of_line=true would read {rescuable:,} of the "
            f"{int(bad_rows.get('field_count_mismatch', 0)):,} field_count_mismatch rows whole (their text, "
            "the last field, holds the delimiter)")


def swap_hint(bad_rows: dict, swapped: int, n_input: int) -> str | None:
    """A hint when most out-of-range latitudes would fit swapped and they are not a stray one (at least
    2 rows and 1% of the rows): a stray bad value should not be blamed on the column mapping."""
    out = bad_rows.get("latitude_out_of_range", 0)
    if not (swapped * 2 > out and swapped >= max(2, n_input / 100)):
        return None
    return (f"{swapped} of {out} rows with latitude outside [-90, 90] would be valid with lon and lat "
            f"swapped: dataset.lat_col and dataset.lon_col may be swapped")


def _file_fingerprint(path: str) -> list:
    p = pathlib.Path(path)
    items = [p] if p.is_file() else sorted(q for q in p.rglob("*") if q.is_file())
    return [[str(q.relative_to(p)) if q != p else q.name, q.stat().st_size, q.stat().st_mtime_ns] for q in items]


def cache_key(cfg) -> dict:
    """The config fields that determine the prepared dataset (normalised types)."""
    key: dict = {"name": cfg.name, "version": PREP_VERSION,
                 "text": hashlib.sha256((TOKEN_SPLIT + " ".join(STOP_WORDS)).encode()).hexdigest()[:12]}
    source = source_of(cfg.name)
    for f in _KEY_FIELDS[source]:
        v = getattr(cfg, f)
        if v is not None:
            v = float(v) if f in _FLOATS else (int(v) if isinstance(v, (int, np.integer)) else str(v))
        key[f] = v
    if source == "synthetic" and cfg.locations != "places":  # SSTD's Uni/Gau; `places` keeps its old digest
        key["locations"] = str(cfg.locations)
        if cfg.locations == "gaussian":
            key["location_sd_deg"] = float(cfg.location_sd_deg)
        key["space"] = "places_box"  # extent = the global space, not the data's bbox (issue 47)
    if source == "file" and getattr(cfg, "text_rest_of_line", False):  # off: the key of caches made before it
        key["text_rest_of_line"] = True
    if source == "file":
        # issue 52: decodability from the bytes, rows the rest-of-line option would keep, ids.parquet
        key["reading"] = 2
        key["path"] = os.path.abspath(str(cfg.path))
        key["files"] = _file_fingerprint(key["path"])
    return key


def cache_dir(cfg, cache_root: pathlib.Path) -> pathlib.Path:
    digest = hashlib.sha256(json.dumps(cache_key(cfg), sort_keys=True).encode()).hexdigest()[:12]
    return pathlib.Path(cache_root) / f"{cfg.name}-{digest}"


def _load(path: pathlib.Path) -> PreparedDataset:
    meta = json.loads((path / "meta.json").read_text())
    return PreparedDataset(
        name=meta["name"],
        _objects=None,
        vocab=pq.read_table(path / "vocab.parquet").cast(VOCAB_SCHEMA),
        extent=tuple(meta["extent"]), origin=tuple(meta["origin"]),
        # caches written before a reason existed never saw it: 0
        bad_rows={r: int(meta["bad_rows"].get(r, 0)) for r in BAD_ROW_REASONS},
        n_input_rows=meta["n_input_rows"], cache_path=str(path),
        swapped_lat_lon_rows=int(meta.get("swapped_lat_lon_rows", 0)),
        rescued_rows=int(meta.get("rescued_rows", 0)),
        rescuable_rows=int(meta.get("rescuable_rows", 0)),
    )


IDS = "ids.parquet"  # a file dataset's objects by the user's ids: oid, source_id (issue 52)


def _save(ds: PreparedDataset, path: pathlib.Path, key: dict, seconds: float, ids: pa.Table | None = None) -> None:
    """Write to a temporary sibling and rename, so a crashed run never leaves a half cache."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}"
    tmp.mkdir()
    pq.write_table(ds.objects, tmp / "objects.parquet")
    pq.write_table(ds.vocab, tmp / "vocab.parquet")
    if ids is not None:
        pq.write_table(ids, tmp / IDS)
    meta = {"name": ds.name, "extent": list(ds.extent), "origin": list(ds.origin), "bad_rows": ds.bad_rows,
            "n_input_rows": ds.n_input_rows, "swapped_lat_lon_rows": ds.swapped_lat_lon_rows,
            "rescued_rows": ds.rescued_rows, "rescuable_rows": ds.rescuable_rows,
            "n_objects": ds.objects.num_rows, "n_terms": ds.vocab.num_rows, "prepare_seconds": seconds, "config": key}
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
    try:
        os.rename(tmp, path)
    except OSError:  # another process won the race; keep its copy
        shutil.rmtree(tmp, ignore_errors=True)


def _raw(cfg, spark):
    """(raw DataFrame in the files.classify input layout, file format or None, has timestamps)."""
    source = source_of(cfg.name)
    if source == "file":
        return files.raw_dataframe(cfg, spark)
    src = synthetic if source == "synthetic" else geonames
    df = src.raw_dataframe(cfg, spark)
    df = df.select(F.col("lon").alias("lon_raw"), F.col("lat").alias("lat_raw"), "text",
                   F.col("ts").alias("ts_raw"), "ts", F.lit(cfg.name).alias("_file"), "_row",
                   F.lit(False).alias("_rescued"), F.lit(False).alias("_rescuable"))
    return df, None, True


def prepare_dataset(cfg, spark, cache_root: pathlib.Path) -> PreparedDataset:
    """Prepared objects + vocabulary for `cfg`, from the cache when it holds this config."""
    validate_dataset_config(cfg)
    path = cache_dir(cfg, cache_root)
    if (path / "meta.json").exists():
        return _load(path)
    t0 = time.perf_counter()
    raw, fmt, has_ts = _raw(cfg, spark)
    classified = files.classify(raw, has_ts)
    is_file = source_of(cfg.name) == "file"
    slim = classified.select("_row", "ts", "lon", "lat", "tokens", "reason", "swap_fit", "_rescued", "_rescuable",
                             *(() if not is_file else ("_id",) if cfg.id_col is not None else ("_file", "_block"))
                             ).persist()
    ids = None
    try:
        grouped = slim.groupBy("reason", "swap_fit", "_rescued", "_rescuable").count().collect()
        rescued = sum(int(g["count"]) for g in grouped if g["_rescued"])
        rescuable = sum(int(g["count"]) for g in grouped if g["_rescuable"])
        bad_rows = {r: sum(int(g["count"]) for g in grouped if g["reason"] == r) for r in BAD_ROW_REASONS}
        swapped = sum(int(g["count"]) for g in grouped if g["swap_fit"])
        n_input = sum(int(g["count"]) for g in grouped)
        log.info("%s: %d rows read and validated in %.1f s", cfg.name, n_input, time.perf_counter() - t0)
        if cfg.on_bad_rows == "error" and sum(bad_rows.values()):
            raise files.first_bad_error(classified, cfg, fmt)
        good = slim.filter(F.col("reason").isNull())
        good = (_with_source_ids(cfg, fmt, slim, good) if is_file else good).select(
            "_row", "ts", "lon", "lat", "tokens", *(("_source",) if is_file else ()))
        limited = int(cfg.size) > 0 and source_of(cfg.name) != "synthetic"
        if limited:  # keep the first `size` objects in time order; the vocabulary counts only those
            good = good.orderBy("ts", "_row").limit(int(cfg.size)).persist()
        try:
            vocab = build_vocab(good)
            log.info("%s: %d terms ranked at %.1f s", cfg.name, vocab.num_rows, time.perf_counter() - t0)
            table = encode_terms(good, vocab).toArrow()
            log.info("%s: %d objects encoded at %.1f s", cfg.name, table.num_rows, time.perf_counter() - t0)
        finally:
            if limited:
                good.unpersist()
    finally:
        slim.unpersist()
    hint = swap_hint(bad_rows, swapped, n_input)
    if table.num_rows == 0:
        hints = [h for h in (hint, rest_of_line_hint(bad_rows, rescuable)) if h]
        raise ValueError(f"dataset {cfg.name!r} has no valid objects (bad rows: "
                         f"{ {k: v for k, v in bad_rows.items() if v} })" + "".join(f"; {h}" for h in hints))
    if hint:
        log.warning("%s: %s", cfg.name, hint)
    if is_file:  # the user's ids in the objects' order (_finish's)
        order = pc.sort_indices(table, sort_keys=[("ts", "ascending"), ("_row", "ascending")])
        ids = pa.table({"oid": pa.array(np.arange(table.num_rows, dtype=np.int64)),
                        "source_id": table.column("_source").take(order).cast(pa.string())})
    objects, extent, origin = _finish(table, has_ts, global_space(cfg))
    ds = PreparedDataset(cfg.name, objects, vocab, extent, origin, bad_rows, n_input, str(path), swapped, rescued,
                         rescuable)
    _save(ds, path, cache_key(cfg), time.perf_counter() - t0, ids)
    return _load(path) if path.exists() else ds


def _with_source_ids(cfg, fmt: str, rows, good):
    """`good` with `_source`: each row's id in the user's file (issue 52): its dataset.id_col value,
    else where it is: "line N" (CSV: the header is line 1; JSON lines; blank lines and records
    spanning lines aside) or "row index N" (Parquet, 0-based), the file's name first when the
    dataset is a folder of several. A row's record number within its file is its rank among every
    row read (`rows`, bad ones included) from the same file: Spark numbers rows per partition
    (`_row`) and each partition reads whole blocks of a file in order, so the number is the rows of
    the file's earlier blocks plus the row's place in its block: one small aggregate per block, no
    sort of the rows."""
    if cfg.id_col is not None:
        return good.withColumn("_source", F.col("_id"))
    blocks = rows.groupBy("_file", "_block").agg(F.min("_row").alias("_first"), F.count(F.lit(1)).alias("_n"))
    offsets, seen = [], {}
    for b in sorted(blocks.collect(), key=lambda b: (b["_file"], b["_block"])):  # one per block, not per row
        offsets.append((b["_file"], int(b["_block"]), int(b["_first"]), seen.get(b["_file"], 0)))
        seen[b["_file"]] = seen.get(b["_file"], 0) + int(b["_n"])
    table = good.sparkSession.createDataFrame(offsets, "_file string, _block long, _first long, _offset long")
    record = F.col("_offset") + F.col("_row") - F.col("_first")  # 0-based, within its file
    if fmt == "parquet":
        where = F.concat(F.lit("row index "), record.cast("string"))
    else:
        where = F.concat(F.lit("line "), (record + 1 + int(fmt == "csv" and bool(cfg.header))).cast("string"))
    if len(seen) > 1:
        where = F.concat(F.element_at(F.split(F.col("_file"), "/"), -1), F.lit(" "), where)
    return good.join(F.broadcast(table), ["_file", "_block"], "left").withColumn("_source", where)


def events_dataset(workload_cfg, family_code: int, base: PreparedDataset | None = None,
                   formats: dict | None = None) -> PreparedDataset:
    """The dataset an event-file run (workload.source=file) reads, with no data set prepared for it
    (issue 52): its space is the file's objects' bounding box (events_file.file_space), found before
    Spark from the file alone. `base`: the file dataset (dataset=file) whose vocabulary the file's
    term ids are (the words the export shows) and whose projection its lon/lat take; without one,
    the vocabulary is the file's own term ids (events_file.file_vocab) and no objects. `formats`: the
    registered families' (events_file.FileFormat by code), for the names a `family` cell may give."""
    from .workloads.events_file import file_space, file_vocab, read_events

    objects = base.objects if base is not None else OBJECT_SCHEMA.empty_table()
    events = read_events(workload_cfg.path, family_code, objects, base.vocab.num_rows if base is not None else None,
                         formats=formats)
    if base is not None:
        return dataclasses.replace(base, extent=file_space(events))
    return PreparedDataset("events", objects, file_vocab(events), file_space(events), (float("nan"), float("nan")))


def global_space(cfg) -> tuple[float, float, float, float] | None:
    """The (lon, lat) box a synthetic location variant's extent is (SSTD's Uni and Gau), or None:
    the data's own bounding box.

    SSTD sizes query regions as shares of "the global space" (sstd.txt l.320) and centres Gau at
    "the mid-points of the space's axes" (l.338): the space TW14 spans, whatever the variant draws.
    A Gaussian of sd 1 degree spans some 900 km, so the data's own box made a 1% region 1/16 of
    TW14's (fidelity review, cause F). Uni and Gau therefore take the places' box, the space the
    TW14 stand-in's locations come from, as their extent and projection centre."""
    if source_of(cfg.name) != "synthetic" or cfg.locations == "places":
        return None
    return tuple(float(v) for v in synthetic.build_model(cfg)["box"])


def _finish(table: pa.Table, has_ts: bool, space: tuple[float, float, float, float] | None = None):
    """Order by (ts, row), number the objects, fill row-order time, project to km. The extent is the
    objects' bounding box, or the projected `space` (lon0, lat0, lon1, lat1) when one is given."""
    table = table.take(pc.sort_indices(table, sort_keys=[("ts", "ascending"), ("_row", "ascending")]))
    n = table.num_rows
    ts = table.column("ts").to_numpy() if has_ts else np.arange(n, dtype=np.float64)
    lon = table.column("lon").to_numpy()
    lat = table.column("lat").to_numpy()
    box_lon, box_lat = (lon, lat) if space is None else (np.array(space[0::2]), np.array(space[1::2]))
    lon0, lat0 = bbox_centre(box_lon, box_lat)
    x, y = project(lon, lat, lon0, lat0)
    terms = table.column("terms").combine_chunks().cast(pa.list_(pa.int32()))
    objects = pa.table([pa.array(np.arange(n, dtype=np.int64)), pa.array(ts, pa.float64()), pa.array(lon),
                        pa.array(lat), pa.array(x), pa.array(y), terms], schema=OBJECT_SCHEMA)
    if space is None:
        extent = (float(x.min()), float(y.min()), float(x.max()), float(y.max()))
    else:  # the space's projected corners (a box about the centre projects to a rectangle), holding every object
        bx, by = project(box_lon[[0, 1, 0, 1]], box_lat[[0, 0, 1, 1]], lon0, lat0)
        extent = (float(min(bx.min(), x.min())), float(min(by.min(), y.min())),
                  float(max(bx.max(), x.max())), float(max(by.max(), y.max())))
    return objects, extent, (lon0, lat0)
