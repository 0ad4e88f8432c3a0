"""User files (CSV, Parquet, JSON lines) read with Spark, checked before Spark starts, and row validation.

check_file runs before Spark (from validate_dataset_config): the path has data, the format is known,
the mapped columns exist (CSV header or field count via pyarrow.csv on the file's first MiB;
Parquet schema; JSON lines only after Spark infers the schema) and Parquet coordinates are numbers.
CSV is then read by Spark with every field as a string under its position (_c0, _c1, ...) plus a
corrupt-record column, so a line with more or fewer fields than expected is counted
(field_count_mismatch), never cut. Decodability is decided from the bytes (issue 52): a UTF-8 file
is read as ISO-8859-1 (one character per byte, nothing lost) and each mapped field is turned back
into its bytes and checked and decoded as UTF-8 in Spark SQL (`is_valid_utf8`, `make_valid_utf8`),
so a field whose bytes do not decode is counted (undecodable_text) and a valid U+FFFD character in
the text is not. Single-byte encodings cannot encode U+FFFD, so there a U+FFFD after decoding is
an undecodable byte; JSON lines (decoded by Spark's JSON reader) keep that test too.

Validation is one Spark SQL expression per row (no UDFs). A row is bad for its first failing check,
in the order of BAD_ROW_REASONS: a field count that differs from the header, undecodable bytes, a
missing lon/lat, a non-numeric one (NaN and booleans count as non-numeric), latitude outside
[-90, 90], longitude outside [-180, 180], no tokens left after tokenisation, or a
present-but-unparseable timestamp (numeric seconds or a timestamp string; naive strings are read in
the session time zone). Line numbers are only needed in the error case, so they are computed then:
the bad row's record index within its file (Spark count of earlier rows), mapped on the driver to
the physical line (CSV: the header is line 1; JSON lines: blank lines count; Parquet: 0-based row index).
"""

from __future__ import annotations

import io
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .config import BadInputError, column_list, csv_char
from .text import add_tokens

_EXTENSIONS = {".csv": "csv", ".tsv": "csv", ".txt": "csv", ".parquet": "parquet", ".pq": "parquet",
               ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl"}
MALFORMED = "_malformed_record"  # Spark's corrupt-record column for CSV
BOM = "\ufeff"
LATIN1 = "ISO-8859-1"  # the byte view: one character per byte, every byte sequence decodes
LATIN1_BOM = "\u00ef\u00bb\u00bf"  # the UTF-8 byte-order mark's three bytes, in the byte view
REPLACEMENT = "\ufffd"  # what a decoder puts for bytes it cannot decode
HEAD_BYTES = 1 << 20  # how much of a CSV file check_file parses

# role -> config field; lon, lat, text required; ts and id optional
ROLES = {"lon": "lon_col", "lat": "lat_col", "text": "text_col", "ts": "ts_col", "id": "id_col"}

ALLOWED = {
    "field_count_mismatch": "as many fields as the header or dataset.columns (quote a field that "
                            "contains the delimiter, or set dataset.delimiter/quote/escape)",
    "undecodable_text": "text valid in dataset.encoding (or set dataset.encoding, e.g. latin-1 or cp1252)",
    "missing_coordinate": "a value (empty or null found)",
    "non_numeric_coordinate": "a decimal number of degrees",
    "latitude_out_of_range": "a latitude in [-90, 90]",
    "longitude_out_of_range": "a longitude in [-180, 180]",
    "empty_text": "text with at least one token (letters/digits, length >= 2, not a stop word)",
    "invalid_timestamp": "numeric seconds or an ISO timestamp",
}


@dataclass(frozen=True)
class FileLayout:
    """What check_file learnt: the data files, the format and where each mapped role is read from."""

    path: str  # absolute dataset.path
    fmt: str  # csv | parquet | jsonl
    files: tuple[str, ...]  # non-empty data files
    n_fields: int = 0  # CSV: fields per record; 0 = not known before Spark (JSON lines)
    cols: dict = field(default_factory=dict)  # role -> column read by Spark (_c3 for CSV), absent = unused
    labels: dict = field(default_factory=dict)  # role -> how the user names it (header name or position)


def _fail(msg: str) -> None:
    raise ValueError(msg)


def _position(value) -> Optional[int]:
    text = str(value).strip()
    return int(text) if text.isdigit() else None


def _data_files(path: str) -> list[str]:
    if os.path.isfile(path):
        return [path]
    out = []
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        out += [os.path.join(root, n) for n in sorted(names) if not n.startswith((".", "_"))]
    return out


def detect_format(path: str, fmt: str, files: Optional[list[str]] = None) -> str:
    if fmt != "auto":
        return fmt
    for name in files if files is not None else _data_files(path):
        ext = os.path.splitext(name.lower())[1]
        if ext in _EXTENSIONS:
            return _EXTENSIONS[ext]
    _fail(f"dataset.format='auto' cannot tell the format of {path!r}; "
          f"set dataset.format to one of csv | parquet | jsonl")


def _is_blank(file: str, encoding: str) -> bool:
    """Empty, or only a BOM and white space (decided on the first MiB; larger files are not blank)."""
    size = os.path.getsize(file)
    if size == 0:
        return True
    if size > HEAD_BYTES:
        return False
    with open(file, "rb") as fh:
        return not fh.read().decode(encoding, errors="replace").replace(BOM, "").strip()


def _csv_head(file: str, cfg) -> tuple[list[str], list[str], int]:
    """(header names or [], first data row, fields per record) of a CSV file, parsed by pyarrow with the
    config's options on its first MiB. Without a header the field count is the most common one there,
    so a malformed first line does not make every other line a mismatch."""
    with open(file, "rb") as fh:
        head = fh.read(HEAD_BYTES)
    if len(head) == HEAD_BYTES and b"\n" in head:
        head = head[: head.rfind(b"\n") + 1]
    text = head.decode(str(cfg.encoding), errors="replace").lstrip(BOM)
    quote, escape = str(cfg.quote), csv_char(cfg.escape)
    others: Counter = Counter()

    def other(row) -> str:
        others[row.actual_columns] += 1
        return "skip"

    parse = pacsv.ParseOptions(delimiter=csv_char(cfg.delimiter), quote_char=quote or False,
                               double_quote=bool(quote) and escape == quote,
                               escape_char=escape if escape != quote else False, invalid_row_handler=other)
    read = pacsv.ReadOptions(use_threads=False, autogenerate_column_names=not cfg.header)
    try:
        table = pacsv.read_csv(io.BytesIO(text.encode("utf-8")), read_options=read, parse_options=parse,
                               convert_options=pacsv.ConvertOptions(strings_can_be_null=False))
    except pa.ArrowInvalid as exc:
        _fail(f"dataset.path={file} cannot be read as CSV with dataset.delimiter={cfg.delimiter!r} "
              f"quote={cfg.quote!r} escape={cfg.escape!r}: {str(exc).splitlines()[0]}")
    first = [str(v) for v in table.slice(0, 1).to_pylist()[0].values()] if table.num_rows else []
    n = table.num_columns
    if not cfg.header and others and max(others.values()) > table.num_rows:
        n = others.most_common(1)[0][0]
    return (table.column_names if cfg.header else []), first, n


def _shown(names: list[str], limit: int = 12) -> str:
    return ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _resolve(cfg, file: str, names: Optional[list[str]], n: int, where: str,
             sample: Optional[list[str]] = None) -> tuple[dict, dict]:
    """role -> (index, label) for each mapped role; raises a one-line error for a role not found."""
    found: dict = {}
    for role, cfg_field in ROLES.items():
        value = getattr(cfg, cfg_field, None)
        if value is None:
            continue
        pos = _position(value)
        if pos is not None:
            if pos >= n:
                _fail(f"dataset.{cfg_field}={str(value)!r} is position {pos} but {where} has {n} fields; "
                      f"allowed: 0-{n - 1}")
            found[role] = (pos, names[pos] if names else f"position {pos}")
        elif names is not None and names.count(str(value)) == 1:
            found[role] = (names.index(str(value)), str(value))
        elif role == "ts" and cfg_field == "ts_col" and pos is None:
            continue  # documented: a time column absent from the file means row order
        elif names is not None and names.count(str(value)) > 1:
            _fail(f"dataset.{cfg_field}={str(value)!r} names {names.count(str(value))} columns of {file}; "
                  f"give its position instead (0-{n - 1})")
        else:
            known = (f"({where}: {_shown(names)})" if names else
                     f"({where} has {n} fields a line; first line: {_shown(sample or [])})")
            if names and cfg.columns is None and any(_numeric(x) for x in names):
                hint = (f"; if the first line is data, set dataset.header=false and name columns by "
                        f"position (0-{n - 1}) or set dataset.columns")
            elif not names:
                hint = f"; with dataset.header=false name columns by position (0-{n - 1}) or set dataset.columns"
            else:
                hint = f"; allowed: a name above or a position (0-{n - 1})"
            _fail(f"dataset.{cfg_field}={str(value)!r} is not a column of {file} {known}{hint}")
    return {r: i for r, (i, _) in found.items()}, {r: lab for r, (_, lab) in found.items()}


_COORD_TYPES = "a numeric column (integer, floating point or decimal) or strings of numbers"


def _coordinate_type_ok(dtype: pa.DataType) -> bool:
    return (pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_decimal(dtype)
            or pa.types.is_string(dtype) or pa.types.is_large_string(dtype))


def check_file(cfg) -> FileLayout:
    """Check a file dataset before Spark starts; raise ValueError with one line naming file, column and
    what is allowed. Returns where each role is read from (raw_dataframe uses it)."""
    path = os.path.abspath(str(cfg.path))
    try:
        files = _data_files(path)
        if not files:
            _fail(f"dataset.path={path} holds no data files (names starting with '.' or '_' are ignored)")
        fmt = detect_format(path, cfg.format, files)
        data = [f for f in files if not (fmt != "parquet" and _is_blank(f, str(cfg.encoding)))
                and os.path.getsize(f) > 0]
        if not data:
            _fail(f"dataset.path={path} is empty" if files == [path] else
                  f"dataset.path={path} is empty (all {len(files)} files are empty)")
        first = data[0]
        if fmt == "jsonl":
            for role, cfg_field in ROLES.items():
                value = getattr(cfg, cfg_field, None)
                if value is not None and _position(value) is not None:
                    _fail(f"dataset.{cfg_field}={str(value)!r} is a position, but JSON lines keys have "
                          f"no order; allowed: a key name")
            cols = {r: str(getattr(cfg, f)) for r, f in ROLES.items() if getattr(cfg, f, None) is not None}
            return FileLayout(path, fmt, tuple(data), 0, cols, dict(cols))
        if fmt == "parquet":
            try:
                schema = pq.read_schema(first)
            except pa.ArrowException as exc:
                _fail(f"dataset.path={first} is not a readable Parquet file: {str(exc).splitlines()[0]}")
            names = list(schema.names)
            idx, labels = _resolve(cfg, first, names, len(names), "columns")
            for role in ("lon", "lat"):
                dtype = schema.field(idx[role]).type
                if not _coordinate_type_ok(dtype):
                    _fail(f"dataset.{ROLES[role]}={str(getattr(cfg, ROLES[role]))!r}: column "
                          f"{names[idx[role]]!r} of {first} has type {dtype}; allowed: {_COORD_TYPES}")
            return FileLayout(path, fmt, tuple(data), len(names), {r: names[i] for r, i in idx.items()}, labels)
        header, row, n = _csv_head(first, cfg)
        declared = column_list(cfg)
        if declared is not None and n and len(declared) != n:
            line = "the header of {} has" if cfg.header else "most lines in the first MiB of {} have"
            _fail(f"dataset.columns has {len(declared)} names but {line.format(first)} {n} fields; "
                  f"allowed: {n} names")
        if declared is not None:
            names, where = declared, "dataset.columns"
        elif cfg.header:
            names, where = header, "header"
        else:
            names, where = None, "the file"
        if n == 0:
            _fail(f"dataset.path={first} is empty")
        idx, labels = _resolve(cfg, first, names, n, where, row)
        if getattr(cfg, "text_rest_of_line", False) and idx["text"] != n - 1:
            _fail(f"dataset.text_col={str(cfg.text_col)!r} is field {idx['text']} of {n} in {first}; allowed with "
                  f"dataset.text_rest_of_line=true: the last field ({n - 1}), the only one that can take the rest "
                  "of the line")
        return FileLayout(path, fmt, tuple(data), n, {r: f"_c{i}" for r, i in idx.items()}, labels)
    except OSError as exc:
        _fail(f"dataset.path={path} cannot be read: {exc.strerror or exc}")


def spark_charset(encoding: str) -> str:
    """The Java charset name for a Python codec name (Spark decodes, Python checks the config)."""
    import codecs

    name = codecs.lookup(encoding).name
    if name in ("utf-8", "utf-8-sig"):
        return "UTF-8"  # the BOM is stripped from the first field
    if name.startswith("iso8859-"):
        return "ISO-8859-" + name.split("-", 1)[1]
    if name.startswith("cp125"):
        return "windows-" + name[2:]
    return {"ascii": "US-ASCII", "utf-16": "UTF-16", "utf-16-le": "UTF-16LE", "utf-16-be": "UTF-16BE",
            "latin-1": "ISO-8859-1"}.get(name, encoding)


def byte_view(cfg) -> bool:
    """Whether a CSV file is read in the byte view (module docstring): its encoding is UTF-8 and its
    delimiter, quote and escape are ASCII (one byte, the same character in both readings).
    `dataset.text_rest_of_line` always reads lines in it (it allows UTF-8 and ASCII only)."""
    import codecs

    if getattr(cfg, "text_rest_of_line", False):
        return True
    chars = csv_char(cfg.delimiter) + str(cfg.quote) + csv_char(cfg.escape)
    return codecs.lookup(str(cfg.encoding)).name in ("utf-8", "utf-8-sig") and all(ord(c) < 128 for c in chars)


def utf8_of_bytes(col):
    """(the UTF-8 text, whether its bytes are not valid UTF-8) of a byte-view string column: the
    field's own bytes (ISO-8859-1 encodes each character back to its byte) are checked as UTF-8 and
    decoded with U+FFFD for each invalid sequence, in Spark SQL (no per-row Python)."""
    raw = F.encode(col, LATIN1).cast("string")  # the bytes as a string, not validated
    return F.make_valid_utf8(raw), F.coalesce(~F.is_valid_utf8(raw), F.lit(False))


def _read_csv(cfg, spark, layout: FileLayout) -> DataFrame:
    charset = LATIN1 if byte_view(cfg) else spark_charset(str(cfg.encoding))
    if not spark._jvm.java.nio.charset.Charset.isSupported(charset):
        _fail(f"dataset.encoding={cfg.encoding!r} is not a charset Spark knows; allowed: e.g. utf-8, latin-1")
    schema = T.StructType([T.StructField(f"_c{i}", T.StringType()) for i in range(layout.n_fields)]
                          + [T.StructField(MALFORMED, T.StringType())])
    quote = str(cfg.quote) or "\u0000"  # Spark's way of turning quoting off
    df = (spark.read.schema(schema)
          .option("header", bool(cfg.header)).option("enforceSchema", True)
          .option("sep", csv_char(cfg.delimiter)).option("quote", quote).option("escape", csv_char(cfg.escape))
          .option("encoding", charset).option("mode", "PERMISSIVE")
          .option("columnNameOfCorruptRecord", MALFORMED)
          # a pruned read tokenises only the selected fields and never sees a wrong field count
          .option("columnPruning", False)
          .csv(layout.path))
    if byte_view(cfg):  # the BOM is stripped once _c0 is decoded (raw_dataframe)
        return df
    # Spark keeps a UTF-8 byte-order mark: without a header it starts the first field of each file
    return df if cfg.header else df.withColumn("_c0", F.regexp_replace("_c0", "^" + BOM, ""))


def _split_rest(value, cfg, n: int):
    """A line split at the delimiter into at most n fields, the last taking the rest of the line
    (Spark's own `split(str, regex, limit)`): (the n fields, unquoted, NULL on a short line; short:
    fewer than n fields; broken: a field before the last opens a quote it does not close there, so
    the split cannot place the fields; the last field is wholly quoted; the last field as split)."""
    import re

    delim = csv_char(cfg.delimiter)
    quote = str(cfg.quote)
    parts = F.split(value, re.escape(delim), n)

    def unquoted(c):
        if not quote:
            return c
        q = re.escape(quote)
        esc = re.escape(csv_char(cfg.escape))
        inner = F.regexp_extract(c, f"^{q}(.*){q}$", 1)
        return F.when(c.rlike(f"^{q}.*{q}$"), F.regexp_replace(inner, esc + q, quote)).otherwise(c)

    fields = [F.get(parts, F.lit(i)) for i in range(n)]  # NULL past the end (ANSI mode: getItem would raise)
    broken = F.lit(False)
    if quote:
        q = re.escape(quote)
        for f in fields[:-1]:  # a quoted field cut at a delimiter inside it
            broken = broken | (f.rlike(f"^{q}") & ~f.rlike(f"^{q}.*{q}$"))
    text = fields[-1]
    is_quoted = text.rlike(f"^{re.escape(quote)}.*{re.escape(quote)}$") if quote else F.lit(False)
    short = F.size(parts) < n
    return [F.when(short, None).otherwise(unquoted(f)) for f in fields], short, broken, is_quoted, text


def _read_csv_rest_of_line(cfg, spark, layout: FileLayout) -> DataFrame:
    """`dataset.text_rest_of_line`: the CSV's lines split at the delimiter into at most n_fields
    fields, the last (the text) taking the rest of the line, delimiters included. Spark's and
    pyarrow's CSV readers have no such mode (a line with more fields is malformed to both), so the
    lines are read by Spark's text reader, in the byte view (module docstring), and split by
    `_split_rest`: no per-row Python. A field wholly in quotes loses them (a doubled quote inside is
    one); a line with fewer fields is `_malformed` (field_count_mismatch), as is a line whose field
    before the text opens a quote it does not close there (it held the delimiter, so the split
    cannot place the fields). `_rescued`: the text, unquoted, held the delimiter (the CSV reader
    would have counted the line malformed)."""
    n = layout.n_fields
    delim = csv_char(cfg.delimiter)
    # the text reader keeps each line's bytes; ISO-8859-1 makes them characters one for one
    lines = spark.read.text(layout.path).select(F.decode(F.col("value").cast("binary"), LATIN1).alias("value"))
    lines = lines.withColumn("value", F.regexp_replace("value", "^" + LATIN1_BOM, ""))
    lines = lines.withColumn("value", F.regexp_replace("value", "\r$", "")).filter(F.trim("value") != "")
    if cfg.header:  # each file's header line (the same text as the first one's)
        with open(layout.files[0], "rb") as fh:
            head = next((ln for ln in fh if ln.strip()), b"").decode("latin-1")
        lines = lines.filter(F.col("value") != F.lit(head.removeprefix(LATIN1_BOM).rstrip("\r\n")))
    fields, short, broken, is_quoted, text = _split_rest(F.col("value"), cfg, n)
    return lines.select(*(f.alias(f"_c{i}") for i, f in enumerate(fields)),
                        F.when(short | broken, F.col("value")).alias(MALFORMED),
                        (~short & ~broken & ~is_quoted & text.contains(delim)).alias("_rescued"))


def _rescuable(cfg, layout: FileLayout, malformed):
    """Whether `dataset.text_rest_of_line=true` would read this field_count_mismatch line whole: the
    text is the last field and the line, split as that option splits it, has its fields with more
    delimiters in the text (issue 52: the warning counts them and names the option)."""
    import re

    n = layout.n_fields
    if layout.fmt != "csv" or getattr(cfg, "text_rest_of_line", False) or layout.cols.get("text") != f"_c{n - 1}":
        return F.lit(False)
    _, short, broken, _, _ = _split_rest(malformed, cfg, n)
    more = F.size(F.split(malformed, re.escape(csv_char(cfg.delimiter)))) > n
    return F.coalesce(malformed.isNotNull() & ~short & ~broken & more, F.lit(False))


def raw_dataframe(cfg, spark) -> tuple[DataFrame, str, bool]:
    """(DataFrame with lon_raw, lat_raw, text, ts_raw, ts, _id, _malformed, _file, _row, _block,
    _rescued, _rescuable and, where the bytes are known, _undecodable_<role> per mapped field;
    format; has timestamp column)."""
    layout = check_file(cfg)
    path, fmt = layout.path, layout.fmt
    if fmt == "csv" and getattr(cfg, "text_rest_of_line", False):
        df = _read_csv_rest_of_line(cfg, spark, layout)
    elif fmt == "csv":
        df = _read_csv(cfg, spark, layout)
    elif fmt == "jsonl":
        df = spark.read.option("encoding", spark_charset(str(cfg.encoding))).json(path)
    else:
        df = spark.read.parquet(path)
    cols = dict(layout.cols)
    for role in ("lon", "lat", "text", "id"):
        if role in cols and cols[role] not in df.columns:
            _fail(f"dataset.{ROLES[role]}={cols[role]!r} is not a column of {path}; "
                  f"allowed: {_shown(sorted(c for c in df.columns if c != '_corrupt_record'))}")
    if cols.get("ts") not in df.columns:
        cols.pop("ts", None)
    for role in ("lon", "lat"):  # a boolean column would cast to 1.0/0.0 without a word
        dtype = df.schema[cols[role]].dataType
        if not isinstance(dtype, (T.NumericType, T.StringType)):
            _fail(f"dataset.{ROLES[role]}={str(getattr(cfg, ROLES[role]))!r}: column {cols[role]!r} of "
                  f"{path} has type {dtype.simpleString()}; allowed: {_COORD_TYPES}")
    undecodable = {}
    if fmt == "csv":
        df = df.withColumn("_rescuable", _rescuable(cfg, layout, F.col(MALFORMED)))
    if fmt == "csv" and byte_view(cfg):  # each mapped field's bytes decide (module docstring)
        for c in dict.fromkeys(cols.values()):  # each column once (two roles may read one)
            text, bad = utf8_of_bytes(F.col(c))
            df = df.withColumn(f"_undecodable{c}", bad).withColumn(c, text)
        undecodable = {role: f"_undecodable{c}" for role, c in cols.items()}
        df = df.withColumn(MALFORMED, utf8_of_bytes(F.col(MALFORMED))[0])
        if not cfg.header and "_c0" in cols.values():  # a UTF-8 BOM starts the first field of each file
            df = df.withColumn("_c0", F.regexp_replace("_c0", "^" + BOM, ""))
    elif fmt == "parquet":  # Parquet strings are UTF-8 bytes, read as they are
        strings = [c for c in dict.fromkeys(cols.values()) if isinstance(df.schema[c].dataType, T.StringType)]
        for i, c in enumerate(strings):
            df = df.withColumn(f"_undecodable{i}", F.coalesce(~F.is_valid_utf8(F.col(f"`{c}`")), F.lit(False)))
            df = df.withColumn(c, F.make_valid_utf8(F.col(f"`{c}`")))
        undecodable = {role: f"_undecodable{strings.index(c)}" for role, c in cols.items() if c in strings}
    has_ts = "ts" in cols
    col = {r: F.col(f"`{c}`") for r, c in cols.items()}
    ts = parse_timestamp(df, cols["ts"]) if has_ts else F.lit(None).cast("double")
    out = df.select(
        col["lon"].alias("lon_raw"),
        col["lat"].alias("lat_raw"),
        col["text"].cast("string").alias("text"),
        (col["ts"] if has_ts else F.lit(None)).alias("ts_raw"),
        ts.alias("ts"),
        (col["id"].cast("string") if "id" in col else F.lit(None).cast("string")).alias("_id"),
        (F.col(MALFORMED) if fmt == "csv" else F.lit(None).cast("string")).alias("_malformed"),
        F.input_file_name().alias("_file"),
        F.monotonically_increasing_id().alias("_row"),
        F.input_file_block_start().alias("_block"),
        (F.col("_rescued") if "_rescued" in df.columns else F.lit(False)).alias("_rescued"),
        (F.col("_rescuable") if "_rescuable" in df.columns else F.lit(False)).alias("_rescuable"),
        *(F.col(c).alias(f"_undecodable_{role}") for role, c in undecodable.items()),
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
    """Add lon, lat (double), tokens, reason (null = good), bad_field, bad_value and swap_fit (the row's
    latitude is out of range but lon and lat swapped would be valid: a hint the columns are swapped)."""
    malformed = F.col("_malformed") if "_malformed" in df.columns else F.lit(None).cast("string")
    lon_s, lat_s = F.col("lon_raw").cast("string"), F.col("lat_raw").cast("string")
    text_s, ts_s = F.col("text"), F.col("ts_raw").cast("string")
    lon_d, lat_d = F.col("lon_raw").try_cast("double"), F.col("lat_raw").try_cast("double")
    lon_missing = lon_s.isNull() | (F.trim(lon_s) == "")
    lat_missing = lat_s.isNull() | (F.trim(lat_s) == "")
    lon_nonnum = lon_d.isNull() | F.isnan(lon_d)
    lat_nonnum = lat_d.isNull() | F.isnan(lat_d)
    ts_bad = F.col("ts").isNull() if has_ts else F.lit(False)
    checks = [
        (malformed.isNotNull(), "field_count_mismatch", "record", malformed),
        *((F.col(f"_undecodable_{f}") if f"_undecodable_{f}" in df.columns else v.contains(REPLACEMENT),
           "undecodable_text", f, v)
          for f, v in (("lon", lon_s), ("lat", lat_s), ("text", text_s), ("ts", ts_s))),
        (lon_missing, "missing_coordinate", "lon", lon_s),
        (lat_missing, "missing_coordinate", "lat", lat_s),
        (lon_nonnum, "non_numeric_coordinate", "lon", lon_s),
        (lat_nonnum, "non_numeric_coordinate", "lat", lat_s),
        (~lat_d.between(-90.0, 90.0), "latitude_out_of_range", "lat", lat_s),
        (~lon_d.between(-180.0, 180.0), "longitude_out_of_range", "lon", lon_s),
        (F.size(F.col("tokens")) == 0, "empty_text", "text", text_s),
        (ts_bad, "invalid_timestamp", "ts", ts_s),
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
              .withColumn("lat", lat_d)
              .withColumn("swap_fit", (F.col("reason") == "latitude_out_of_range")
                          & (F.abs(lon_d) <= 90.0) & (F.abs(lat_d) <= 180.0)))


def _local_path(uri: str) -> str:
    if uri.startswith("file:"):
        return unquote(urlparse(uri).path)
    return uri


def _physical_line(path: str, fmt: str, record: int, header: bool = True, encoding: str = "utf-8") -> str:
    """Where the record-th (0-based) data record of a file is, for a human."""
    if fmt == "parquet":
        return f"row index {record} (0-based)"
    skip = 1 if fmt == "csv" and header else 0  # the header is the first non-blank line
    seen = -skip
    try:
        with open(path, encoding=encoding, errors="replace") as fh:
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
    where, column, allowed = "row", row["bad_field"], ALLOWED[row["reason"]]
    path = str(cfg.path) if getattr(cfg, "path", None) else str(cfg.name)
    if fmt is not None:
        path = _local_path(row["_file"])
        record = classified.filter((F.col("_file") == row["_file"]) & (F.col("_row") < row["_row"])).count()
        where = _physical_line(path, fmt, record, bool(cfg.header), str(cfg.encoding))
        if "_id" in classified.columns and row["_id"] is not None:
            where += f" (id {row['_id']!r})"
        layout = check_file(cfg)
        column = layout.labels.get(column, column)  # the user's header name, dataset.columns name or position
        if row["reason"] == "field_count_mismatch":
            allowed = (f"{layout.n_fields} fields separated by {csv_char(cfg.delimiter)!r} "
                       f"(quote a field that contains it with {cfg.quote!r}, or set dataset.delimiter"
                       + (", or dataset.text_rest_of_line=true: the text, the last field, then takes the rest of "
                          "the line" if layout.cols.get("text") == f"_c{layout.n_fields - 1}"
                          and not getattr(cfg, "text_rest_of_line", False) else "") + ")")
    value = row["bad_value"]
    if isinstance(value, str) and len(value) > 200:
        value = value[:200] + "..."
    return BadInputError(
        f"{path}: {where}: field {column!r} value {value!r} is invalid "
        f"({row['reason']}); allowed: {allowed} (dataset.on_bad_rows=error; "
        f"use on_bad_rows=count to skip and count bad rows)"
    )
