"""A user's own event stream as a workload (`workload.source=file`, `workload.path=...`).

Parquet or CSV, one row per event, columns named as the event schema (harness.core.events):

- `id` (required): object id, or query id; `kind` (required): 0-3 or object/insert/delete/snapshot;
- `seq` (optional, distinct integers): the stream order; without it the file order;
- `ts` (optional, seconds, non-decreasing in stream order): without it, the position;
- `family` (optional): a query's family by name or code; without it (or null), the workload's family;
- `x`, `y` in km, or `lon`, `lat` (projected about the dataset's origin, as its objects were);
  a query's rectangle `xmin`, `ymin`, `xmax`, `ymax` in km, or `lon_min`, `lat_min`, `lon_max`, `lat_max`;
- `terms`: a list of term ids or a string of space-separated term ids (the dataset's vocabulary);
- `op` (AND/OR or 0/1, default AND), `k`, `alpha`, `tau`, `win`, `step` (optional).

A delete needs only `kind` and `id`: it takes its insert's payload when normalised. Every bad
value is a ValueError naming the file, column, row and what is allowed; an unknown column too
(a misspelt optional column would otherwise silently fall back to its default). The stream is
then normalised (datasets.workloads.anomalies) like every other, its counts in `Workload.info`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from datasets.projection import EARTH_RADIUS_KM, bbox_centre, project
from datasets.workloads.anomalies import normalise_workload
from datasets.workloads.config import SOURCES, Workload
from datasets.workloads.file_types import RECTANGLE, FileFormat, QueryType, TypeRows  # noqa: F401 (re-exported)
from harness.core.events import (AND, DELETE, FAMILY_IDS, FORMER_FAMILY_NAMES, INSERT, KIND_NAMES, NUMPY_DTYPES, OBJECT,
                                 OR, SNAPSHOT, Events)

LONLAT_RECTANGLE = ("lon_min", "lat_min", "lon_max", "lat_max")
OPTIONAL = ("seq", "ts", "family", "x", "y", *RECTANGLE, "lon", "lat", *LONLAT_RECTANGLE, "terms", "op", "k", "alpha",
            "tau", "win", "step")
COLUMNS = ("id", "kind", *OPTIONAL)
KIND_CODES = {v: k for k, v in KIND_NAMES.items()}
OP_CODES = {"and": AND, "or": OR}
MAX_QUERY_ID = (1 << 31) - 1  # result keys pack (query id << 32) | object id into an int64
MAX_OBJECT_ID = (1 << 32) - 1
_TEXT_COLUMNS = ("kind", "family", "op", "terms")


def validate_file_workload(cfg, family_code: int | None = None, formats: dict | None = None) -> None:
    """Reject event-file settings before anything runs (ValueError naming the field); with the
    workload's `family_code`, also read the file and apply every per-type rule (the families'
    `formats`: code -> FileFormat) that needs no dataset, so a bad row is refused before Spark
    starts, naming the row and the field."""
    def bad(name, value, allowed):
        raise ValueError(f"workload.{name}={value!r} is invalid; allowed: {allowed}")

    source = getattr(cfg, "source", "generator")
    if source not in SOURCES:
        bad("source", source, ", ".join(SOURCES))
    if source != "file":
        return
    if not cfg.path or not Path(cfg.path).is_file():
        bad("path", cfg.path, "an existing Parquet or CSV event file")
    if _format(cfg.path) is None:
        bad("path", cfg.path, "a file ending in .parquet, .pq or .csv")
    if cfg.warmup_events is not None and (not isinstance(cfg.warmup_events, int) or cfg.warmup_events < 1):
        bad("warmup_events", cfg.warmup_events, "an integer >= 1, or null to use warmup_fraction")
    if not 0.0 < cfg.warmup_fraction < 1.0:
        bad("warmup_fraction", cfg.warmup_fraction, "a number in (0, 1)")
    if family_code is not None:
        read_events(cfg.path, family_code, formats=formats)


def measured_events(cfg) -> int:
    """The events of the file after its warm-up (`warmup_events`, or `warmup_fraction` of them), as
    build_file_workload counts them, before derived events: what one epoch holds with epochs.size=0."""
    n = pq.ParquetFile(cfg.path).metadata.num_rows if _format(cfg.path) == "parquet" else _read(cfg.path).num_rows
    warmup = cfg.warmup_events if cfg.warmup_events is not None else int(round(cfg.warmup_fraction * n))
    return max(n - int(warmup), 0)


def build_file_workload(objects: pa.Table | None, term_df: np.ndarray | None, cfg, family_code: int,
                        needs: tuple[str, ...] = (), extent=None, formats: dict | None = None) -> Workload:
    """The workload of `cfg.path`: validated (every row by its type's rules, `formats`: code ->
    FileFormat), warm-up from `cfg.warmup_events` or `cfg.warmup_fraction` of the file's events in
    stream order, what the generators derive derived the same way (`derive`), normalised, then each
    family's `finish`. `needs`: more columns an insert of the workload's family must have finite;
    `extent`: the dataset's space (the routing rectangles of types with a `space`)."""
    validate_file_workload(cfg)
    events = read_events(cfg.path, family_code, objects, None if term_df is None else len(term_df), needs, formats)
    n = len(events)
    warmup = cfg.warmup_events if cfg.warmup_events is not None else int(round(cfg.warmup_fraction * n))
    if not 1 <= warmup <= n:
        raise ValueError(f"workload.warmup_events={warmup} is invalid for {cfg.path} with {n} events; "
                         f"allowed: 1 to {n}")
    events, warmup, info = derive(events, warmup, extent, formats)
    wl = normalise_workload(Workload(events, warmup=warmup, info=info))
    for fmt in (formats or {}).values():
        if fmt.finish is not None and ((wl.events.kind == INSERT) & (wl.events.family == fmt.code)).any():
            wl.events, more = fmt.finish(wl.events, cfg)
            wl.info.update(more)
    return wl


def file_space(events: Events) -> tuple[float, float, float, float]:
    """The space of an event file's workload (issue 52): its objects' bounding box (km), as a
    generated workload's is its dataset's objects'; a file without objects: its queries' points and
    rectangles. Known from the file alone, so every check against it (a snapshot region meeting
    it) runs before Spark starts, and no dataset is prepared for it."""
    obj = events.kind == OBJECT
    if obj.any():
        xs, ys = events.x[obj], events.y[obj]
    else:
        xs = np.r_[events.x, events.xmin, events.xmax]
        ys = np.r_[events.y, events.ymin, events.ymax]
    xs, ys = xs[np.isfinite(xs)], ys[np.isfinite(ys)]
    if not len(xs) or not len(ys):
        return (0.0, 0.0, 1.0, 1.0)
    return (float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max()))


def file_vocab(events: Events) -> pa.Table:
    """The vocabulary of an event file read without a dataset (issue 52): term ids 0 to the
    largest the file names, each with its document frequency over the file's objects (what a
    strategy's fit reads), its text the id itself (the file gives ids, not words)."""
    from datasets.text import VOCAB_SCHEMA

    top = int(events.values.max()) + 1 if len(events.values) else 0
    of_object = np.repeat(events.kind == OBJECT, np.diff(events.offsets))
    df = np.bincount(events.values[of_object].astype(np.int64), minlength=top)[:top]
    ids = np.arange(top, dtype=np.int32)
    return pa.table([pa.array(ids), pa.array(ids.astype(str)), pa.array(df.astype(np.int64))], schema=VOCAB_SCHEMA)


def _rows_of(events: Events, code: int, kind: int) -> np.ndarray:
    """The events a query type's derivations reach: its own rows; an insert's deletes too."""
    of = events.family == code
    if kind == INSERT:
        return of & ((events.kind == INSERT) | (events.kind == DELETE))
    return of & (events.kind == kind)


def derive(events: Events, warmup: int, extent=None, formats: dict | None = None) -> tuple[Events, int, dict]:
    """What a generator derives, derived from a file's events the same way, as each query type
    declares it (`QueryType`, `FileFormat`):

    - a type with `space` routes by the space's extent: its rectangle is the extent ("always"), or
      the extent where the row gives none ("missing"); a type with `op` gets that keyword operator;
    - an insert of a type with `lifetime` and a `tau` (its lifetime, seconds) is deleted at
      ts + tau, ahead of the events of that time (alive on [ts, ts + tau)), unless the stream
      deletes it earlier or ends first (`lifetime_deletes` counts them);
    - each family's own `derive` (a continuous query's report events), when the stream holds an
      insert of it.

    Returns the events, the warm-up's new length (the events before the first measured one) and the counts."""
    info: dict = {}
    formats = formats or {}
    cols = dict(events.cols)
    op = cols["op"]
    lifetime = np.zeros(len(events), bool)
    for fmt in formats.values():
        for kind, qt in fmt.types.items():
            rows = _rows_of(events, fmt.code, kind)
            if extent is not None and qt.space is not None:
                rows_space = rows & np.isnan(events.xmin) if qt.space == "missing" else rows
                for c, v in zip(RECTANGLE, extent):
                    cols[c] = np.where(rows_space, float(v), cols[c])
            if qt.op is not None:
                op = np.where(rows, qt.op, op)
            if qt.lifetime and kind == INSERT:
                lifetime |= (events.family == fmt.code) & (events.kind == INSERT)
    cols["op"] = np.asarray(op).astype(np.int8)
    events = Events(cols, events.offsets, events.values)
    # lifetimes of continuous queries
    ins = np.flatnonzero(lifetime & np.isfinite(events.tau))
    n = len(events)
    if len(ins):
        end = events.ts[ins] + events.tau[ins]
        dels = np.flatnonzero(events.kind == DELETE)
        first_del = np.full(len(ins), np.inf)
        if len(dels):  # the stream's own first deletion of each id after its insert
            order = np.lexsort((events.ts[dels], events.id[dels]))
            d_id, d_ts = events.id[dels][order], events.ts[dels][order]
            at = np.searchsorted(d_id, events.id[ins])
            hit = at < len(d_id)
            hit[hit] &= d_id[at[hit]] == events.id[ins][hit]
            first_del[hit] = d_ts[at[hit]]
        keep = (end <= float(events.ts.max())) & (end < first_del)
        src = ins[keep]
        if len(src):
            dl = events.take(src)
            dl.cols["kind"] = np.full(len(src), DELETE, np.int8)
            dl.cols["ts"] = end[keep]
            merged = Events.concat([events, dl])
            pos = np.r_[np.arange(n), np.full(len(src), -1)]
            order = np.lexsort((pos, np.r_[np.ones(n, np.int8), np.zeros(len(src), np.int8)], merged.ts))
            events = merged.take(order)
            events.cols["seq"] = np.arange(len(events), dtype=np.int64)
            warmup = int(np.flatnonzero(order == warmup)[0]) if warmup < n else len(events)
        info["lifetime_deletes"] = int(len(src))
    for fmt in formats.values():
        if fmt.derive is not None and ((events.kind == INSERT) & (events.family == fmt.code)).any():
            events, warmup, more = fmt.derive(events, warmup)
            info.update(more)
    return events, warmup, info


def read_events(path, family_code: int, objects: pa.Table | None = None, vocab_size: int | None = None,
                needs: tuple[str, ...] = (), formats: dict | None = None) -> Events:
    """The file's events in stream order (seq = position), validated, not yet normalised. `formats`
    (code -> FileFormat, the registered families'): the names a `family` cell may give and each
    query type's rules; None: the built-in families' names, no per-type rules."""
    table = _read(path)
    err = _Errors(path)
    unknown = [c for c in table.column_names if c not in COLUMNS]
    if unknown:
        err.fail(unknown[0], None, None, "one of " + ", ".join(COLUMNS))
    for c in ("id", "kind"):
        if c not in table.column_names:
            err.fail(c, None, None, "a column named so (required)")
    n = table.num_rows
    order = np.arange(n)
    if "seq" in table.column_names:
        seq = _ints(table, "seq", err, order)
        order = np.argsort(seq, kind="stable")
        dup = np.flatnonzero(seq[order][1:] == seq[order][:-1])
        if len(dup):
            err.fail("seq", seq[order][dup[0]], order[dup[0] + 1], "distinct integers (the stream order)")
    table = table.take(pa.array(order))
    rows = order  # the file row of each event, for messages
    cols: dict[str, np.ndarray] = {"seq": np.arange(n, dtype=np.int64)}
    kind = _codes(table, "kind", KIND_CODES, err, rows)
    bad_kind = np.flatnonzero(~np.isin(kind, list(KIND_NAMES)))
    if len(bad_kind):
        err.fail("kind", kind[bad_kind[0]], rows[bad_kind[0]], "object, insert, delete, snapshot or 0-3")
    cols["kind"] = kind.astype(np.int8)
    is_obj, is_query = kind == OBJECT, kind != OBJECT
    ids = _ints(table, "id", err, rows)
    for mask, top, what in ((is_obj, MAX_OBJECT_ID, "an object"), (is_query, MAX_QUERY_ID, "a query")):
        out = np.flatnonzero(mask & ((ids < 0) | (ids > top)))
        if len(out):
            err.fail("id", ids[out[0]], rows[out[0]], f"0 to {top} for {what}")
    cols["id"] = ids
    if "ts" in table.column_names:
        ts = _floats(table, "ts", err, rows, required=True)
        back = np.flatnonzero(ts[1:] < ts[:-1])
        if len(back):
            err.fail("ts", ts[back[0] + 1], rows[back[0] + 1], "non-decreasing in stream order")
        cols["ts"] = ts
    else:
        cols["ts"] = np.arange(n, dtype=np.float64)
    family = np.full(n, family_code, np.int64)
    if "family" in table.column_names:
        names = {f.name: f.code for f in formats.values()} if formats is not None else FAMILY_IDS
        given = _codes(table, "family", names, err, rows, missing=-1, former=FORMER_FAMILY_NAMES)
        bad_family = np.flatnonzero(is_query & ((given < -1) | (given > 127)))
        if len(bad_family):
            err.fail("family", given[bad_family[0]], rows[bad_family[0]], ", ".join(names) + " or a code 0-127")
        family = np.where(given >= 0, given, family)
    cols["family"] = np.where(is_obj, -1, family).astype(np.int8)
    _coordinates(table, cols, objects, err, rows)
    if "op" in table.column_names:
        op = _codes(table, "op", OP_CODES, err, rows, missing=AND)
        bad_op = np.flatnonzero((op != AND) & (op != OR))
        if len(bad_op):
            err.fail("op", op[bad_op[0]], rows[bad_op[0]], "AND, OR, 0 or 1")
        cols["op"] = op.astype(np.int8)
    blank_k = np.ones(n, bool)  # no k given (a blank cell or no column): named so in a refusal
    if "k" in table.column_names:
        cols["k"] = _ints(table, "k", err, rows, missing=0).astype(NUMPY_DTYPES["k"])
        blank_k = _column(table, "k").is_null().to_numpy(zero_copy_only=False)
    for c in ("alpha", "tau", "win", "step"):
        if c in table.column_names:
            cols[c] = _floats(table, c, err, rows).astype(NUMPY_DTYPES[c])
    offsets, values = _terms(table, err, rows, vocab_size)
    events = Events(cols, offsets, values)
    _check_payload(events, is_obj, needs, family_code, err, rows, blank_k, formats)
    return events


class _Errors:
    def __init__(self, path):
        self.path = path

    def fail(self, column, value, row, allowed):
        where = f", row {int(row) + 1}" if row is not None else ""
        value = value.item() if isinstance(value, np.generic) else value
        got = f" has {value!r}" if value is not None else " is missing or unknown"
        raise ValueError(f"events file {self.path}: column {column!r}{got}{where}; allowed: {allowed}")


def _format(path) -> str | None:
    suffix = Path(str(path)).suffix.lower()
    return {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}.get(suffix)


def _read(path) -> pa.Table:
    if _format(path) == "parquet":
        return pq.read_table(path)
    if _format(path) == "csv":  # text columns stay text: "1 2 3" terms, "insert" kinds, "AND"
        opts = pcsv.ConvertOptions(column_types={c: pa.string() for c in _TEXT_COLUMNS})
        return pcsv.read_csv(path, convert_options=opts)
    raise ValueError(f"events file {path}: unknown format; allowed: .parquet, .pq or .csv")


def _column(table: pa.Table, name: str) -> pa.Array:
    col = table.column(name)
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _ints(table, name, err, rows=None, missing=None) -> np.ndarray:
    col = _column(table, name)
    if pa.types.is_null(col.type):  # a CSV column left empty in every row
        col = col.cast(pa.int64())
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = _parse(col, pa.int64(), name, err, rows, "integers")
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        err.fail(name, str(col.type), None, "integers")
    if col.null_count:
        if missing is None:
            at = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
            err.fail(name, None, at if rows is None else rows[at], "an integer in every row")
        col = col.fill_null(missing)
    vals = col.to_numpy(zero_copy_only=False)
    if vals.dtype.kind == "f":
        frac = np.flatnonzero(~np.isfinite(vals) | (vals != np.round(vals)))
        if len(frac):
            err.fail(name, vals[frac[0]], frac[0] if rows is None else rows[frac[0]], "integers")
    return vals.astype(np.int64)


def _floats(table, name, err, rows, required=False) -> np.ndarray:
    col = _column(table, name)
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = _parse(col, pa.float64(), name, err, rows, "numbers")
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_null(col.type)):
        err.fail(name, str(col.type), None, "numbers")
    vals = col.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False).astype(np.float64)
    if required:
        bad = np.flatnonzero(~np.isfinite(vals))
        if len(bad):
            err.fail(name, vals[bad[0]], rows[bad[0]], "a finite number in every row")
    return vals


def _parse(col, to, name, err, rows, allowed) -> pa.Array:
    try:
        return col.cast(to)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pattern = r"^\s*-?\d+\s*$" if pa.types.is_integer(to) else r"^\s*[-+0-9.eE]+\s*$"
        ok = pc.match_substring_regex(col, pattern).fill_null(True).to_numpy(zero_copy_only=False)
        at = int(np.flatnonzero(~ok)[0]) if (~ok).any() else 0
        err.fail(name, col[at].as_py(), rows[at], allowed)


def _codes(table, name, names: dict, err, rows, missing=None, former: dict | None = None) -> np.ndarray:
    """An int column, or names mapped case-insensitively (numeric strings are codes too); a name in
    `former` (a former name -> the name now) is refused with the name to use."""
    col = _column(table, name)
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        return _ints(table, name, err, rows, missing)
    text = pc.utf8_lower(pc.utf8_trim_whitespace(col))
    if text.null_count and missing is None:
        at = int(np.flatnonzero(text.is_null().to_numpy(zero_copy_only=False))[0])
        err.fail(name, None, rows[at], ", ".join(names) + " in every row")
    uniq, inverse = np.unique(text.fill_null("").to_numpy(zero_copy_only=False).astype(str), return_inverse=True)
    codes = np.empty(len(uniq), np.int64)
    for i, u in enumerate(uniq):  # per distinct value, not per event
        if u == "" and missing is not None:
            codes[i] = missing
        elif u in names:
            codes[i] = names[u]
        elif u.lstrip("-").isdigit():
            codes[i] = int(u)
        else:
            at = int(np.flatnonzero(inverse == i)[0])
            renamed = (former or {}).get(u)
            hint = f"{renamed} (the {str(u)!r} family's name since it was renamed), or " if renamed else ""
            err.fail(name, col[at].as_py(), rows[at], hint + ", ".join(names) + " (or a code)")
    return codes[inverse.reshape(-1)]


def _coordinates(table, cols, objects, err, rows) -> None:
    names = table.column_names
    origin = None

    def lonlat_origin(lon, lat):
        nonlocal origin
        if origin is None:
            origin = _dataset_origin(objects)
        if origin is None:  # no dataset objects with lon/lat: the file's own bounding-box centre
            ok = np.isfinite(lon) & np.isfinite(lat)
            origin = bbox_centre(lon[ok], lat[ok]) if ok.any() else (0.0, 0.0)
        return origin

    if "x" in names or "y" in names:
        for c in ("x", "y"):
            cols[c] = _floats(table, c, err, rows) if c in names else np.full(table.num_rows, np.nan)
    elif "lon" in names or "lat" in names:
        lon = _floats(table, "lon", err, rows) if "lon" in names else np.full(table.num_rows, np.nan)
        lat = _floats(table, "lat", err, rows) if "lat" in names else np.full(table.num_rows, np.nan)
        cols["x"], cols["y"] = project(lon, lat, *lonlat_origin(lon, lat))
    if any(c in names for c in RECTANGLE):
        for c in RECTANGLE:
            cols[c] = _floats(table, c, err, rows) if c in names else np.full(table.num_rows, np.nan)
    elif any(c in names for c in LONLAT_RECTANGLE):
        lon_min, lat_min, lon_max, lat_max = (_floats(table, c, err, rows) if c in names
                                              else np.full(table.num_rows, np.nan) for c in LONLAT_RECTANGLE)
        o = lonlat_origin(np.r_[lon_min, lon_max], np.r_[lat_min, lat_max])
        cols["xmin"], cols["ymin"] = project(lon_min, lat_min, *o)
        cols["xmax"], cols["ymax"] = project(lon_max, lat_max, *o)
    if "x" not in cols and "xmin" not in cols:
        err.fail("x/y or lon/lat", None, None, "object locations as x, y (km) or lon, lat (degrees)")
    n = table.num_rows
    for c in ("x", "y", *RECTANGLE):
        cols.setdefault(c, np.full(n, np.nan))
    centre = ~np.isnan(cols["xmin"] + cols["xmax"])  # a query without a point: its rectangle's centre
    cols["x"] = np.where(np.isnan(cols["x"]) & centre, (cols["xmin"] + cols["xmax"]) / 2, cols["x"])
    centre = ~np.isnan(cols["ymin"] + cols["ymax"])
    cols["y"] = np.where(np.isnan(cols["y"]) & centre, (cols["ymin"] + cols["ymax"]) / 2, cols["y"])


def _dataset_origin(objects: pa.Table | None):
    """(lon0, lat0) of the dataset's projection, recovered from one of its objects (datasets.projection)."""
    if objects is None or objects.num_rows == 0 or not {"lon", "lat", "x", "y"} <= set(objects.column_names):
        return None
    lon, lat, x, y = (float(objects.column(c)[0].as_py()) for c in ("lon", "lat", "x", "y"))
    lat0 = lat - np.degrees(y / EARTH_RADIUS_KM)
    return lon - np.degrees(x / (EARTH_RADIUS_KM * np.cos(np.radians(lat0)))), lat0


def _terms(table, err, rows, vocab_size) -> tuple[np.ndarray, np.ndarray]:
    """CSR of each event's terms, sorted and distinct per event."""
    n = table.num_rows
    if "terms" not in table.column_names:
        return np.zeros(n + 1, np.int64), np.zeros(0, np.int32)
    col = _column(table, "terms")
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = pc.utf8_split_whitespace(pc.utf8_trim_whitespace(col))
    elif pa.types.is_integer(col.type):  # one term per event (a CSV column of single ids)
        col = pa.ListArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32)), col)
    if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)):
        err.fail("terms", str(col.type), None, "a list of term ids or a string of space-separated term ids")
    col = col.fill_null(pa.scalar([], type=col.type))
    owner = pc.list_parent_indices(col).to_numpy(zero_copy_only=False)
    flat = pc.list_flatten(col)
    if pa.types.is_string(flat.type) or pa.types.is_large_string(flat.type):
        keep = pc.not_equal(flat, "").to_numpy(zero_copy_only=False)
        owner, flat = owner[keep], flat.filter(pa.array(keep))
        flat = _parse(flat, pa.int64(), "terms", err, rows[owner], "term ids: non-negative integers")
    if not pa.types.is_integer(flat.type):
        err.fail("terms", str(flat.type), None, "a list of term ids")
    vals = flat.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    top = (vocab_size - 1) if vocab_size else np.iinfo(np.int32).max
    bad = np.flatnonzero((vals < 0) | (vals > top))
    if len(bad):
        err.fail("terms", int(vals[bad[0]]), rows[owner[bad[0]]], f"term ids 0 to {top} (the dataset's vocabulary)")
    order = np.lexsort((vals, owner))
    owner, vals = owner[order], vals[order]
    first = np.r_[True, (owner[1:] != owner[:-1]) | (vals[1:] != vals[:-1])] if len(vals) else np.zeros(0, bool)
    owner, vals = owner[first], vals[first]
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(owner, minlength=n), out=offsets[1:])
    return offsets, vals.astype(np.int32)


def _check_payload(events: Events, is_obj, needs, family_code, err, rows, blank_k, formats) -> None:
    """Objects need a finite point; each query type its family's `QueryType` (its needs, a tau > 0
    where given, its own checks); `needs`: more columns finite for inserts and snapshots of
    `family_code`. A delete takes its insert's payload when normalised, so it needs only its id.
    `formats` None: the per-type rules are left to the reading that has them (what a run reads for
    the space and the vocabulary alone, datasets/prepare.py, after validation read the file with them)."""
    for c in ("x", "y"):
        bad = np.flatnonzero(is_obj & ~np.isfinite(events.cols[c]))
        if len(bad):
            err.fail(c, events.cols[c][bad[0]], rows[bad[0]], "a finite coordinate for every object")
    queries = np.isin(events.kind, [INSERT, SNAPSHOT])
    for c in needs:
        bad = np.flatnonzero(queries & (events.family == family_code) & ~np.isfinite(events.cols[c]))
        if len(bad):
            err.fail(c, events.cols[c][bad[0]], rows[bad[0]], "a finite value for every insert and snapshot")
    if formats is None:
        return
    first = TypeRows.first
    for fam in np.unique(events.family[queries]):
        fmt = formats.get(int(fam))
        for kind in (INSERT, SNAPSHOT):
            mine = queries & (events.family == fam) & (events.kind == kind)
            if not mine.any():
                continue
            i = first(mine)
            if fmt is None:
                err.fail("family", str(int(fam)), rows[i], "a query family the harness knows: "
                         + ", ".join(f.name for f in formats.values()))
            qt = fmt.types.get(kind)
            if qt is None or qt.refused:
                kinds = " or ".join(KIND_NAMES[k] for k in fmt.types if not fmt.types[k].refused)
                allowed = (qt.refused if qt is not None else
                           f"{kinds} or delete (a {fmt.name} query has no {KIND_NAMES.get(kind, kind)} form)" if kinds
                           else f"no {fmt.name} query: its family declares no event-file query types (file_types)")
                err.fail("kind", KIND_NAMES.get(kind, kind), rows[i], allowed)
            for c in qt.needs:
                i = first(mine & ~np.isfinite(events.cols[c]))
                if i is not None:
                    err.fail(c, events.cols[c][i], rows[i], f"a finite value for every {qt.label}"
                             + qt.hints.get(c, _HOW.get(c, "")))
            i = first(mine & np.isfinite(events.tau) & ~(events.tau > 0))
            if i is not None:
                err.fail("tau", events.tau[i], rows[i], "a number of seconds > 0 (a look-back or a lifetime)")
            t = TypeRows(events, mine, qt.label, err, rows, blank_k, is_obj)
            for check in qt.checks:
                check(t)


_HOW = {"x": " (the query's point: x, y in km or lon, lat)", "y": " (the query's point: x, y in km or lon, lat)"}


# how a file becomes a stream: 2 = issue 42 (type rules per row, derived report events under any family,
# lifetimes from tau, a family's window). A cached stream read the older way is read again.
READING = 2


def file_identity(path) -> dict:
    """What a cache key needs to notice a changed event file (its resolved path, size and mtime) or a
    changed reading of it (READING)."""
    p = Path(path).resolve()
    st = p.stat()
    return {"path": str(p), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "reading": READING}

