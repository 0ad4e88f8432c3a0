"""`python -m harness.export RUN_DIR [--family F ...] [--format csv|parquet] [--out DIR]`: a run's
results in plain form, one file per query family (issue 42).

The run must have kept its results (`keep_pairs=true`: `RUN_DIR/pairs/epoch=E/part-*.parquet`,
harness/families/result_rows.py); the stream it read is the one its row names
(`workload_events`, checked against `workload_events_sha256`). Each family's file is what its
`results.plain` makes of its rows (declared in its folder, `harness/families/<family>/formats.py`;
a family of (query, object) pairs: qid, object, type, epoch, seq and ts the result entered at), so
this module names no family; a plugin family's run (its config's `families`) is exported the same
way once its module is imported.

Each file speaks the user's language (issue 52): beside the internal object id (`object`), the
id the user's file gave the object (`object_id`): an event file's own id; for a workload generated
over a file dataset (dataset=file), the dataset.id_col value of the row the object was taken from,
or where that row is ("line N"); a generated dataset's objects have no other id. Beside a term id
(`term`), its word (`word`) from the vocabulary of the dataset the run read (its row's
`dataset_cache`: vocab.parquet, ids.parquet), when it has words.

Memory stays bounded by one epoch's rows (a run of 40.9M kept results did not fit whole): the rows
are re-digested epoch by epoch (their keys recomputed from the plain columns with the family's own
`keys`; the digest's hash sum is additive, so the epochs' parts add up to the whole run's) and
compared with the run's `result_digest` before anything is written (a mismatch is an error, exit
1); then each epoch's rows are appended to the family's file, sorted within the epoch. The exits
(a result leaving its family's answer, possibly epochs later) and the stream are read whole.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from harness.core.events import format_digest, key_hash_sum
from harness.families import registry
from harness.families.result_rows import EXIT_SCHEMA, RESULT_SCHEMA, rekey


class ExportError(ValueError):
    pass


def epoch_dirs(pairs: Path) -> list[tuple[int, Path]]:
    """The kept results' epoch folders (`epoch=E`), in epoch order."""
    out = []
    for d in pairs.glob("epoch=*"):
        m = re.fullmatch(r"epoch=(-?\d+)", d.name)
        if m:
            out.append((int(m.group(1)), d))
    return sorted(out)


def read_epoch(epoch: int, folder: Path) -> pa.Table:
    """One epoch's kept result rows with their `epoch`."""
    parts = []
    for f in sorted(folder.glob("*.parquet")):
        if f.name.startswith("exits-"):
            continue
        t = pq.read_table(f)
        if t.column_names == ["key"]:
            raise ExportError(f"{f}: a results file of the older layout (keys only); allowed: a run made with "
                              "this version and keep_pairs=true")
        t = t.select(RESULT_SCHEMA.names).cast(RESULT_SCHEMA)
        parts.append(t.append_column("epoch", pa.array(np.full(t.num_rows, epoch, np.int64))))
    return pa.concat_tables(parts) if parts else RESULT_SCHEMA.append(pa.field("epoch", pa.int64())).empty_table()


def read_exits(pairs: Path) -> pa.Table:
    """Every epoch's exit rows (a result that left its family's answer)."""
    exits = [pq.read_table(f).cast(EXIT_SCHEMA) for _, d in epoch_dirs(pairs)
             for f in sorted(d.glob("exits-*.parquet"))]
    return pa.concat_tables(exits) if exits else EXIT_SCHEMA.empty_table()


def read_results(pairs: Path) -> tuple[pa.Table, pa.Table]:
    """Every kept result row with its `epoch`, and the exits (whole: for tests and small runs)."""
    tables = [read_epoch(e, d) for e, d in epoch_dirs(pairs)]
    empty = RESULT_SCHEMA.append(pa.field("epoch", pa.int64())).empty_table()
    return (pa.concat_tables(tables) if tables else empty), read_exits(pairs)


def digest_part(table: pa.Table) -> tuple[int, int]:
    """(count, hash sum) of result rows, their keys recomputed from the plain columns (`rekey`):
    the parts of disjoint sets of rows (the epochs) add up to the whole's (`format_digest`)."""
    return table.num_rows, key_hash_sum(rekey(table))


def kept_digest(pairs: Path) -> tuple[str, list[int]]:
    """The digest of every kept row, computed epoch by epoch; and the family codes the rows hold."""
    n, total, codes = 0, 0, set()
    for e, d in epoch_dirs(pairs):
        t = read_epoch(e, d)
        c, h = digest_part(t)
        n, total = n + c, (total + h) % (1 << 64)
        codes |= set(np.unique(t.column("family").to_numpy()).tolist())
    return format_digest(n, total), sorted(codes)


def _stream(row: dict) -> pd.DataFrame:
    path = row.get("workload_events")
    if not path or not Path(path).is_file():
        raise ExportError(f"the run's stream workload_events={path!r} is missing; allowed: the cached stream the "
                          "run read (its row names it: runs made with this version)")
    want = row.get("workload_events_sha256")
    if want:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        if h.hexdigest() != want:
            raise ExportError(f"the cached stream {path} changed since the run (sha256 {h.hexdigest()[:12]}, the run "
                              f"read {want[:12]}); allowed: the stream the run read")
    return pq.read_table(path, columns=["seq", "ts", "kind", "family", "id", "step"]).to_pandas()


def _run_config(run_dir: Path) -> dict:
    cfg_path = run_dir / "config.yaml"
    return (yaml.safe_load(cfg_path.read_text()) if cfg_path.is_file() else None) or {}


def _language(run_dir: Path, row: dict):
    """(words by term id or None, the user's id of each dataset row or None, whether the stream's
    object ids are the user's own: an event file's)."""
    by_file = (_run_config(run_dir).get("workload") or {}).get("source") == "file"
    cache = Path(row["dataset_cache"]) if row.get("dataset_cache") else None
    words = ids = None
    if cache is not None and (cache / "vocab.parquet").is_file():
        vocab = pq.read_table(cache / "vocab.parquet")
        term_id = vocab.column("term_id").to_numpy().astype(np.int64)
        words = np.full(int(term_id.max()) + 1 if len(term_id) else 0, None, dtype=object)
        words[term_id] = vocab.column("term").to_numpy(zero_copy_only=False)
    if cache is not None and (cache / "ids.parquet").is_file():
        t = pq.read_table(cache / "ids.parquet")
        ids = np.empty(t.num_rows, dtype=object)
        ids[t.column("oid").to_numpy()] = t.column("source_id").to_numpy(zero_copy_only=False)
    return words, ids, by_file


def _object_ids(objects: pd.Series, ids, by_file: bool) -> pd.Series:
    """The user's id of each object: an event file's objects carry theirs (the stream's own id); a
    workload generated over a file dataset takes object k from the dataset's row k mod its size
    (every generator under datasets/workloads/ cycles the dataset in time order; a drift's objects
    keep that row's time and take another's place), whose id the
    dataset kept (ids.parquet); a generated dataset's objects have none but their own."""
    if by_file or ids is None or not len(ids):
        return objects.astype(str)
    return pd.Series(ids[objects.to_numpy(np.int64) % len(ids)], index=objects.index)


def _in_user_terms(plain: pd.DataFrame, words, ids, by_file: bool) -> pd.DataFrame:
    """`object_id` beside `object`, `word` beside `term` (when the vocabulary has words)."""
    if "object" in plain.columns:
        plain.insert(plain.columns.get_loc("object") + 1, "object_id", _object_ids(plain["object"], ids, by_file))
    if "term" in plain.columns and words is not None:
        term = plain["term"].to_numpy(np.int64)
        known = (term >= 0) & (term < len(words))
        word = np.full(len(term), None, dtype=object)
        word[known] = words[term[known]]
        plain.insert(plain.columns.get_loc("term") + 1, "word", word)
    return plain


def export(run_dir, families: list[str] | None = None, fmt: str = "csv", out=None, pairs=None) -> dict:
    """Writes the files (module docstring); returns {family: rows written} and the digests."""
    run_dir = Path(run_dir)
    metrics = run_dir / "metrics.json"
    if not metrics.is_file():
        raise ExportError(f"RUN_DIR={str(run_dir)!r} has no metrics.json; allowed: a run's folder (results/runs/<id>)")
    row = json.loads(metrics.read_text())
    if fmt not in ("csv", "parquet"):
        raise ExportError(f"--format={fmt!r} is invalid; allowed: csv, parquet")
    try:  # the run's plugin families (its config's `families`), whose formats export their rows
        known = registry.load_plugins(list(_run_config(run_dir).get("families") or []))
    except ValueError as exc:
        raise ExportError(str(exc)) from None
    for f in families or []:
        if f not in known:
            raise ExportError(f"--family={f!r} is invalid; allowed: {', '.join(known)}")
    pairs = Path(pairs) if pairs else run_dir / "pairs"
    if not pairs.is_dir():
        raise ExportError(f"{pairs} does not exist; allowed: a run made with keep_pairs=true (its results are kept "
                          "as rows there), or --pairs the folder they were kept in (under state_uri)")
    digest, codes = kept_digest(pairs)
    if digest != row.get("result_digest"):
        raise ExportError(f"the kept rows digest to {digest}, the run's result_digest is {row.get('result_digest')}: "
                          "the rows are not the run's results")
    ev = _stream(row)
    words, ids, by_file = _language(run_dir, row)
    out = Path(out) if out else run_dir / "export"
    out.mkdir(parents=True, exist_ok=True)
    chosen = [registry.by_code(c) for c in codes]
    chosen = [f for f in chosen if not families or f.name in families]
    ex = read_exits(pairs).to_pandas() if chosen else None
    files = {f.code: _FamilyFile(out / f"{f.name}.{fmt}", fmt) for f in chosen}
    for epoch, folder in epoch_dirs(pairs):
        df = read_epoch(epoch, folder).to_pandas()
        for fam in chosen:
            t = df[df.family == fam.code]
            if not len(t):
                continue
            t = t[[*fam.results.columns, "epoch"]].reset_index(drop=True)
            plain = fam.results.plain(t, ex, ev, fam.code)
            files[fam.code].append(_in_user_terms(plain.reset_index(drop=True), words, ids, by_file))
    written = {f.name: files[f.code].close() for f in chosen}
    return {"written": written, "digest": digest, "out": str(out)}


class _FamilyFile:
    """One family's export file, written an epoch at a time (CSV: appended under one header;
    Parquet: row groups of one schema, a column empty in the first epoch's rows typed as text)."""

    def __init__(self, path: Path, fmt: str):
        self.path, self.fmt, self.rows, self.writer = path, fmt, 0, None

    def append(self, plain: pd.DataFrame) -> None:
        if self.fmt == "csv":
            plain.to_csv(self.path, index=False, mode="w" if self.rows == 0 else "a", header=self.rows == 0)
        else:
            t = pa.Table.from_pandas(plain, preserve_index=False)
            if self.writer is None:
                schema = pa.schema([pa.field(f.name, pa.string()) if pa.types.is_null(f.type) else f for f in t.schema])
                self.writer = pq.ParquetWriter(self.path, schema.remove_metadata())
            self.writer.write_table(t.cast(self.writer.schema))
        self.rows += len(plain)

    def close(self) -> int:
        if self.writer is not None:
            self.writer.close()
        return self.rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.export", description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", help="a run's folder, results/runs/<run id>")
    ap.add_argument("--family", action="append", help="only this family (repeatable): a query family's name")
    ap.add_argument("--format", default="csv", help="csv (default) or parquet")
    ap.add_argument("--out", default=None, help="where to write (default RUN_DIR/export)")
    ap.add_argument("--pairs", default=None, help="the kept results' folder, when not RUN_DIR/pairs")
    a = ap.parse_args(argv)
    try:
        res = export(a.run_dir, a.family, a.format, a.out, a.pairs)
    except ExportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for name, n in res["written"].items():
        print(f"{name}: {n} rows -> {res['out']}/{name}.{a.format}")
    print(f"digest {res['digest']} = the run's result_digest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
