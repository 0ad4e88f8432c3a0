"""User files (CSV with header, Parquet, JSON lines) read with Spark, and row validation.

Validation is one Spark SQL expression per row (no UDFs). A row is bad for its first failing check,
in the order of BAD_ROW_REASONS: a missing lon/lat, a non-numeric one (NaN counts as non-numeric),
latitude outside [-90, 90], longitude outside [-180, 180], no tokens left after tokenisation, or a
present-but-unparseable timestamp (numeric seconds or a timestamp string; naive strings are read in
the session time zone). Line numbers are only needed in the error case, so they are computed then:
the bad row's record index within its file (Spark count of earlier rows), mapped on the driver to
the physical line (CSV: header is line 1; JSON lines: blank lines count; Parquet: 0-based row index).
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlparse

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .config import BadInputError
from .text import add_tokens

_EXTENSIONS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl",
               ".json": "jsonl", ".ndjson": "jsonl"}

ALLOWED = {
    "missing_coordinate": "a value (empty or null found)",
    "non_numeric_coordinate": "a decimal number of degrees",
    "latitude_out_of_range": "a latitude in [-90, 90]",
    "longitude_out_of_range": "a longitude in [-180, 180]",
    "empty_text": "text with at least one token (letters/digits, length >= 2, not a stop word)",
    "invalid_timestamp": "numeric seconds or an ISO timestamp",
}


def detect_format(path: str, fmt: str) -> str:
    if fmt != "auto":
        return fmt
    candidates = [path]
    if os.path.isdir(path):
        candidates = sorted(f for f in os.listdir(path) if not f.startswith((".", "_")))
    for name in candidates:
        ext = os.path.splitext(name.lower())[1]
        if ext in _EXTENSIONS:
            return _EXTENSIONS[ext]
    raise ValueError(f"dataset.format='auto' cannot tell the format of {path!r}; "
                     f"set dataset.format to one of csv | parquet | jsonl")


def raw_dataframe(cfg, spark) -> tuple[DataFrame, str, bool]:
    """(DataFrame with lon_raw, lat_raw, text, ts_raw, _file, _row; format; has timestamp column)."""
    path = os.path.abspath(str(cfg.path))
    fmt = detect_format(path, cfg.format)
    if fmt == "csv":
        df = spark.read.option("header", True).option("inferSchema", False).csv(path)
    elif fmt == "jsonl":
        df = spark.read.json(path)
    else:
        df = spark.read.parquet(path)
    for field in ("lon_col", "lat_col", "text_col"):
        if getattr(cfg, field) not in df.columns:
            raise ValueError(f"dataset.{field}={getattr(cfg, field)!r} is not a column of {path}; "
                             f"allowed: {', '.join(df.columns)}")
    has_ts = cfg.ts_col is not None and cfg.ts_col in df.columns
    ts = parse_timestamp(df, cfg.ts_col) if has_ts else F.lit(None).cast("double")
    out = df.select(
        F.col(f"`{cfg.lon_col}`").alias("lon_raw"),
        F.col(f"`{cfg.lat_col}`").alias("lat_raw"),
        F.col(f"`{cfg.text_col}`").cast("string").alias("text"),
        (F.col(f"`{cfg.ts_col}`") if has_ts else F.lit(None)).alias("ts_raw"),
        ts.alias("ts"),
        F.input_file_name().alias("_file"),
        F.monotonically_increasing_id().alias("_row"),
    )
    return out, fmt, has_ts


def parse_timestamp(df: DataFrame, name: str):
    """Seconds as double from a numeric, timestamp/date or string column (null when unparseable)."""
    col = F.col(f"`{name}`")
    dtype = df.schema[name].dataType
    if isinstance(dtype, T.NumericType):
        return col.cast("double")
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType, T.DateType)):
        return F.unix_micros(col.cast("timestamp")) / 1e6
    s = F.trim(col.cast("string"))
    return F.coalesce(s.try_cast("double"), F.unix_micros(F.try_to_timestamp(s)) / 1e6)


def classify(df: DataFrame, has_ts: bool) -> DataFrame:
    """Add lon, lat (double), tokens, reason (null = good), bad_field, bad_value."""
    lon_s, lat_s = F.col("lon_raw").cast("string"), F.col("lat_raw").cast("string")
    lon_d, lat_d = F.col("lon_raw").try_cast("double"), F.col("lat_raw").try_cast("double")
    lon_missing = lon_s.isNull() | (F.trim(lon_s) == "")
    lat_missing = lat_s.isNull() | (F.trim(lat_s) == "")
    lon_nonnum = lon_d.isNull() | F.isnan(lon_d)
    lat_nonnum = lat_d.isNull() | F.isnan(lat_d)
    ts_bad = F.col("ts").isNull() if has_ts else F.lit(False)
    checks = [
        (lon_missing, "missing_coordinate", "lon", lon_s),
        (lat_missing, "missing_coordinate", "lat", lat_s),
        (lon_nonnum, "non_numeric_coordinate", "lon", lon_s),
        (lat_nonnum, "non_numeric_coordinate", "lat", lat_s),
        (~lat_d.between(-90.0, 90.0), "latitude_out_of_range", "lat", lat_s),
        (~lon_d.between(-180.0, 180.0), "longitude_out_of_range", "lon", lon_s),
        (F.size(F.col("tokens")) == 0, "empty_text", "text", F.col("text")),
        (ts_bad, "invalid_timestamp", "ts", F.col("ts_raw").cast("string")),
    ]
    reason = field = value = None
    for cond, r, f, v in checks:
        reason = (F.when(cond, r) if reason is None else reason.when(cond, r))
        field = (F.when(cond, f) if field is None else field.when(cond, f))
        value = (F.when(cond, v) if value is None else value.when(cond, v))
    return (add_tokens(df, "text", "tokens")
              .withColumn("reason", reason)
              .withColumn("bad_field", field)
              .withColumn("bad_value", value)
              .withColumn("lon", lon_d)
              .withColumn("lat", lat_d))


def _local_path(uri: str) -> str:
    if uri.startswith("file:"):
        return unquote(urlparse(uri).path)
    return uri


def _physical_line(path: str, fmt: str, record: int) -> str:
    """Where the record-th (0-based) data record of a file is, for a human."""
    if fmt == "parquet":
        return f"row index {record} (0-based)"
    skip = 1 if fmt == "csv" else 0  # the header is the first non-blank line
    seen = -skip
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                if seen == record:
                    return f"line {lineno}"
                seen += 1
    except OSError:
        pass
    return f"data record {record + 1}"


def first_bad_error(classified: DataFrame, cfg, fmt: str | None) -> BadInputError:
    """The error for the first bad row in file order (only called when there is one)."""
    row = classified.filter(F.col("reason").isNotNull()).orderBy("_file", "_row").first()
    where = "row"
    path = str(cfg.path) if getattr(cfg, "path", None) else str(cfg.name)
    if fmt is not None:
        path = _local_path(row["_file"])
        record = classified.filter((F.col("_file") == row["_file"]) & (F.col("_row") < row["_row"])).count()
        where = _physical_line(path, fmt, record)
    column = {"lon": cfg.lon_col, "lat": cfg.lat_col, "text": cfg.text_col, "ts": cfg.ts_col}.get(
        row["bad_field"], row["bad_field"]) if fmt is not None else row["bad_field"]
    return BadInputError(
        f"{path}: {where}: field {column!r} value {row['bad_value']!r} is invalid "
        f"({row['reason']}); allowed: {ALLOWED[row['reason']]} (dataset.on_bad_rows=error; "
        f"use on_bad_rows=count to skip and count bad rows)"
    )
