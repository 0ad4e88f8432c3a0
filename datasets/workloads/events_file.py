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
from harness.core.events import (AND, DELETE, FAMILY_IDS, FAMILY_NAMES, FORMER_FAMILY_NAMES, INSERT, KIND_NAMES, KNN,
                                 NUMPY_DTYPES, OBJECT, OR, RANGE, SNAPSHOT, TERMS, TOPK, Events)

RECTANGLE = ("xmin", "ymin", "xmax", "ymax")
LONLAT_RECTANGLE = ("lon_min", "lat_min", "lon_max", "lat_max")
OPTIONAL = ("seq", "ts", "family", "x", "y", *RECTANGLE, "lon", "lat", *LONLAT_RECTANGLE, "terms", "op", "k", "alpha",
            "tau", "win", "step")
COLUMNS = ("id", "kind", *OPTIONAL)
KIND_CODES = {v: k for k, v in KIND_NAMES.items()}
OP_CODES = {"and": AND, "or": OR}
MAX_QUERY_ID = (1 << 31) - 1  # result keys pack (query id << 32) | object id into an int64
MAX_OBJECT_ID = (1 << 32) - 1
_TEXT_COLUMNS = ("kind", "family", "op", "terms")


def validate_file_workload(cfg, family_code: int | None = None) -> None:
    """Reject event-file settings before anything runs (ValueError naming the field); with the
    workload's `family_code`, also read the file and apply every per-type rule (TYPE_RULES) that
    needs no dataset, so a bad row is refused before Spark starts, naming the row and the field."""
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
        read_events(cfg.path, family_code)


def measured_events(cfg) -> int:
    """The events of the file after its warm-up (`warmup_events`, or `warmup_fraction` of them), as
    build_file_workload counts them, before derived events: what one epoch holds with epochs.size=0."""
    n = pq.ParquetFile(cfg.path).metadata.num_rows if _format(cfg.path) == "parquet" else _read(cfg.path).num_rows
    warmup = cfg.warmup_events if cfg.warmup_events is not None else int(round(cfg.warmup_fraction * n))
    return max(n - int(warmup), 0)


def build_file_workload(objects: pa.Table | None, term_df: np.ndarray | None, cfg, family_code: int,
                        needs: tuple[str, ...] = (), extent=None) -> Workload:
    """The workload of `cfg.path`: validated (every row by its type's rules), warm-up from
    `cfg.warmup_events` or `cfg.warmup_fraction` of the file's events in stream order, what the
    generators derive derived the same way (`derive`), normalised. `needs`: more columns an insert
    of the workload's family must have finite; `extent`: the dataset's space (kNN and top-k routing
    rectangles, an SKQ without one)."""
    validate_file_workload(cfg)
    events = read_events(cfg.path, family_code, objects, None if term_df is None else len(term_df), needs)
    n = len(events)
    warmup = cfg.warmup_events if cfg.warmup_events is not None else int(round(cfg.warmup_fraction * n))
    if not 1 <= warmup <= n:
        raise ValueError(f"workload.warmup_events={warmup} is invalid for {cfg.path} with {n} events; "
                         f"allowed: 1 to {n}")
    events, warmup, info = derive(events, warmup, extent)
    wl = normalise_workload(Workload(events, warmup=warmup, info=info))
    if ((wl.events.kind == INSERT) & (wl.events.family == TOPK)).any():
        wl.events, wl.info["window"] = with_topk_window(wl.events, cfg)
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


def derive(events: Events, warmup: int, extent=None) -> tuple[Events, int, dict]:
    """What a generator derives, derived from a file's events the same way:

    - kNN and top-k subscriptions route by the space's extent (an unbounded ball), an SKQ without a
      rectangle gets the space (SSTD's SKQ has no region); a top-k subscription's op is OR;
    - a continuous range or kNN insert with `tau` (its lifetime, seconds) is deleted at ts + tau,
      ahead of the events of that time (as the CKQ generator's deletions: alive on [ts, ts + tau)),
      unless the stream deletes it earlier or ends first (`lifetime_deletes` counts them);
    - every CTQ's report events (datasets.workloads.snapshot.with_ctq_reports, `ctq_reports`).

    Returns the events, the warm-up's new length (the events before the first measured one) and the counts."""
    from datasets.workloads.snapshot import with_ctq_reports

    info: dict = {}
    cols = dict(events.cols)
    q = events.kind != OBJECT
    if extent is not None:
        route = q & np.isin(events.family, [KNN, TOPK])
        skq = q & (events.family == KNN) & (events.kind == SNAPSHOT) & np.isnan(events.xmin)
        for c, v in zip(RECTANGLE, extent):
            cols[c] = np.where(route & ((events.kind != SNAPSHOT) | skq), float(v), cols[c])
    cols["op"] = np.where(q & (events.family == TOPK), OR, cols["op"]).astype(np.int8)
    events = Events(cols, events.offsets, events.values)
    # lifetimes of continuous range and kNN subscriptions
    ins = np.flatnonzero((events.kind == INSERT) & np.isin(events.family, [RANGE, KNN]) & np.isfinite(events.tau))
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
    if ((events.kind == INSERT) & (events.family == TERMS)).any():
        events, warmup = with_ctq_reports(events, warmup)
        info["ctq_reports"] = int(((events.kind == SNAPSHOT) & (events.family == TERMS) & np.isfinite(events.step)).sum())
    return events, warmup, info


def with_topk_window(events: Events, cfg) -> tuple[Events, int]:
    """The top-k generator's window columns (datasets/workloads/topk.py) on a file's stream: a
    subscription's `win` is |W| = `workload.window` (count window), an object's `win` the seq at
    which it leaves: that of the |W|-th object after it (window_by=count), or of the first object
    at least `window_s` seconds younger (window_by=time, the file's own ts; a subscription's `tau`
    is then T). Returns the events and |W| (time windows: the objects of the first T seconds)."""
    cols = dict(events.cols)
    n = len(events)
    obj = np.flatnonzero(events.kind == OBJECT)
    q = (events.kind != OBJECT) & (events.family == TOPK)
    win = np.where(events.kind == OBJECT, np.nan, cols["win"])
    if getattr(cfg, "window_by", "count") == "time":
        T = float(cfg.window_s)
        o_ts = events.ts[obj]
        leave = np.searchsorted(o_ts, o_ts + T, side="left")
        inside = leave < len(obj)
        win[obj[inside]] = obj[leave[inside]].astype(np.float64)
        cols["tau"] = np.where(q, T, cols["tau"])
        W = int(np.searchsorted(o_ts, o_ts[0] + T, side="left")) if len(obj) else 0
    else:
        W = int(cfg.window)
        win[obj[:max(len(obj) - W, 0)]] = obj[W:].astype(np.float64)
    win[q] = float(W)
    cols["win"] = win
    assert len(win) == n
    return Events(cols, events.offsets, events.values), W


def read_events(path, family_code: int, objects: pa.Table | None = None, vocab_size: int | None = None,
                needs: tuple[str, ...] = ()) -> Events:
    """The file's events in stream order (seq = position), validated, not yet normalised."""
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
        given = _codes(table, "family", FAMILY_IDS, err, rows, missing=-1, former=FORMER_FAMILY_NAMES)
        bad_family = np.flatnonzero(is_query & ((given < -1) | (given > 127)))
        if len(bad_family):
            err.fail("family", given[bad_family[0]], rows[bad_family[0]], ", ".join(FAMILY_IDS) + " or a code 0-127")
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
    _check_payload(events, is_obj, needs, family_code, err, rows, blank_k)
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


# One rule set per query type (family x kind), applied to every file row of that type whatever the
# workload's family is (a mixed file holds several): the columns it must have, and what it must not
# carry. What a generator derives is derived from the file the same way (build_file_workload): a
# kNN or top-k subscription's routing rectangle (the space), an SKQ's rectangle when it has none,
# each CTQ's report events, a delete at insert + tau for a continuous range or kNN insert, the
# top-k window's expiries.
TYPE_NAMES = {(RANGE, INSERT): "range insert (CRQ)", (RANGE, SNAPSHOT): "range snapshot (SRQ)",
              (KNN, INSERT): "kNN insert (CKQ)", (KNN, SNAPSHOT): "kNN snapshot (SKQ)",
              (TERMS, INSERT): "frequent_terms insert (CTQ)", (TERMS, SNAPSHOT): "frequent_terms snapshot (STQ)",
              (TOPK, INSERT): "top-k insert"}
# (family, kind) -> columns that must be finite
TYPE_NEEDS = {(RANGE, INSERT): RECTANGLE, (RANGE, SNAPSHOT): (*RECTANGLE, "tau"),
              (KNN, INSERT): ("x", "y"), (KNN, SNAPSHOT): ("x", "y", "tau"),
              (TERMS, INSERT): (*RECTANGLE, "win", "step", "tau"), (TERMS, SNAPSHOT): (*RECTANGLE, "tau"),
              (TOPK, INSERT): ("x", "y", "alpha")}


def _check_payload(events: Events, is_obj, needs, family_code, err, rows, blank_k) -> None:
    """Objects need a finite point; each query type its TYPE_NEEDS and rules (k >= 1, a keyword for
    kNN and top-k subscriptions, none for terms queries, tau > 0, a CTQ's step within its window,
    alpha in (0, 1)); `needs`: more columns finite for inserts and snapshots of `family_code`. A
    delete takes its insert's payload when normalised, so it needs only its id."""
    for c in ("x", "y"):
        bad = np.flatnonzero(is_obj & ~np.isfinite(events.cols[c]))
        if len(bad):
            err.fail(c, events.cols[c][bad[0]], rows[bad[0]], "a finite coordinate for every object")
    n_terms = np.diff(events.offsets)
    queries = np.isin(events.kind, [INSERT, SNAPSHOT])
    for c in needs:
        bad = np.flatnonzero(queries & (events.family == family_code) & ~np.isfinite(events.cols[c]))
        if len(bad):
            err.fail(c, events.cols[c][bad[0]], rows[bad[0]], "a finite value for every insert and snapshot")

    def first(mask):
        at = np.flatnonzero(mask)
        return int(at[0]) if len(at) else None

    for fam in np.unique(events.family[queries]):
        for kind in (INSERT, SNAPSHOT):
            mine = queries & (events.family == fam) & (events.kind == kind)
            if not mine.any():
                continue
            what = TYPE_NAMES.get((int(fam), kind))
            if what is None:
                i = first(mine)
                name = FAMILY_NAMES.get(int(fam), str(int(fam)))
                allowed = "insert or delete (top-k subscriptions have no snapshot form)" if fam == TOPK else \
                    "a query family the harness knows: " + ", ".join(FAMILY_IDS)
                err.fail("kind" if fam == TOPK else "family", KIND_NAMES.get(kind, kind) if fam == TOPK else name,
                         rows[i], allowed)
            for c in TYPE_NEEDS[(int(fam), kind)]:
                i = first(mine & ~np.isfinite(events.cols[c]))
                if i is not None:
                    err.fail(c, events.cols[c][i], rows[i], f"a finite value for every {what}" + _HOW.get(c, ""))
            if (int(fam), kind) in ((RANGE, INSERT), (RANGE, SNAPSHOT), (TERMS, INSERT), (TERMS, SNAPSHOT)):
                i = first(mine & ((events.xmin > events.xmax) | (events.ymin > events.ymax)))
                if i is not None:
                    err.fail("xmin/xmax, ymin/ymax", (float(events.xmin[i]), float(events.xmax[i]),
                                                      float(events.ymin[i]), float(events.ymax[i])), rows[i], "min <= max")
            if fam in (KNN, TERMS, TOPK):
                i = first(mine & (events.k < 1))
                if i is not None:
                    err.fail("k", None if blank_k[i] else events.k[i], rows[i], f"an integer >= 1 for every {what}")
            if fam in (KNN, TOPK) and kind == INSERT:
                i = first(mine & (n_terms == 0))
                if i is not None:
                    err.fail("terms", [], rows[i], f"at least one keyword for every {what}")
            if fam == TERMS:
                i = first(mine & (n_terms > 0))
                if i is not None:
                    err.fail("terms", events.values[events.offsets[i]:events.offsets[i + 1]].tolist(),
                             rows[i], f"none: a {what} counts every term of the objects in its region (SSTD)")
            i = first(mine & np.isfinite(events.tau) & ~(events.tau > 0))
            if i is not None:
                err.fail("tau", events.tau[i], rows[i], "a number of seconds > 0 (a look-back or a lifetime)")
            if fam == TERMS and kind == INSERT:
                for c in ("win", "step"):
                    i = first(mine & ~(events.cols[c] > 0))
                    if i is not None:
                        err.fail(c, events.cols[c][i], rows[i], f"a number of seconds > 0 for every {what}")
                i = first(mine & (events.step > events.win))
                if i is not None:
                    err.fail("step", events.step[i], rows[i], f"at most the CTQ's window win={float(events.win[i])!r}")
            if fam == TERMS and kind == SNAPSHOT:
                i = first(mine & np.isfinite(events.step))
                if i is not None:
                    err.fail("step", events.step[i], rows[i], "empty on a frequent_terms snapshot (STQ): a CTQ's reports are "
                             "derived from its insert (win, step, tau), not written in the file")
            if fam not in (TERMS,):
                for c in ("win", "step"):
                    i = first(mine & np.isfinite(events.cols[c]))
                    if i is not None:
                        err.fail(c, events.cols[c][i], rows[i], f"empty for a {what} (only a CTQ insert has one)")
            if fam == TOPK:
                i = first(mine & ~((events.alpha > 0) & (events.alpha < 1)))
                if i is not None:
                    err.fail("alpha", events.alpha[i], rows[i], "a number strictly between 0 and 1 for every top-k insert")
                i = first(mine & np.isfinite(events.tau))
                if i is not None:
                    err.fail("tau", events.tau[i], rows[i], "empty for a top-k insert: its window is workload.window "
                             "(or window_by=time, window_s); a delete ends a subscription")
            if fam == KNN and kind == SNAPSHOT:
                rect = np.isfinite(events.xmin) & np.isfinite(events.ymin) & np.isfinite(events.xmax) \
                    & np.isfinite(events.ymax)
                if is_obj.any():
                    x0, y0 = float(events.x[is_obj].min()), float(events.y[is_obj].min())
                    x1, y1 = float(events.x[is_obj].max()), float(events.y[is_obj].max())
                    i = first(mine & rect & ((events.xmin > x0) | (events.ymin > y0) | (events.xmax < x1)
                                             | (events.ymax < y1)))
                    if i is not None:
                        err.fail("xmin/ymin/xmax/ymax", tuple(float(events.cols[c][i]) for c in RECTANGLE), rows[i],
                                 f"a rectangle covering every object of the file {(x0, y0, x1, y1)}, or none (the "
                                 "space, as the generator gives an SKQ)")


_HOW = {"tau": " (seconds: a snapshot's look-back, a CTQ's lifetime)", "win": " (seconds: the CTQ's window T)",
        "step": " (seconds: the CTQ's step between reports)", "alpha": " (Score = alpha SSim + (1 - alpha) TSim)",
        "x": " (the query's point: x, y in km or lon, lat)", "y": " (the query's point: x, y in km or lon, lat)"}


# how a file becomes a stream: 2 = issue 42 (type rules per row, CTQ reports under any family,
# lifetimes from tau, the top-k window). A cached stream read the older way is read again.
READING = 2


def file_identity(path) -> dict:
    """What a cache key needs to notice a changed event file (its resolved path, size and mtime) or a
    changed reading of it (READING)."""
    p = Path(path).resolve()
    st = p.stat()
    return {"path": str(p), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "reading": READING}

