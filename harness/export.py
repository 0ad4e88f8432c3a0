"""`python -m harness.export RUN_DIR [--family F ...] [--format csv|parquet] [--out DIR]`: a run's
results in plain form, one file per query family (issue 42).

The run must have kept its results (`keep_pairs=true`: `RUN_DIR/pairs/epoch=E/part-*.parquet`,
harness/families/result_rows.py); the stream it read is the one its row names
(`workload_events`, checked against `workload_events_sha256`). Files written:

- `range`, `knn`: qid, object, type (crq/srq, ckq/skq), epoch, seq and ts the result entered at
  (a continuous query's: its object's arrival; a snapshot query's: its own);
- `topk`: qid, object, score, epoch, entered_seq/entered_ts (the trigger: the object's arrival,
  the registration or a refill), left_seq/left_ts (the seq it left the global top-k at, or the
  subscription's deletion; empty if it was still in when the stream ended);
- `terms`: qid, type (stq/ctq), report (0 for an STQ), term, count, epoch, ts (the STQ's, or the
  CTQ report's time).

Each file speaks the user's language (issue 52): beside the internal object id (`object`), the
id the user's file gave the object (`object_id`): an event file's own id; for a workload generated
over a file dataset (dataset=file), the dataset.id_col value of the row the object was taken from,
or where that row is ("line N"); a generated dataset's objects have no other id. Beside a term id
(`term`), its word (`word`) from the vocabulary of the dataset the run read (its row's
`dataset_cache`: vocab.parquet, ids.parquet), when it has words.

Before writing, the rows are re-digested (their keys recomputed from the plain columns with the
mergers' own `keys_of`) and compared with the run's `result_digest`; a mismatch is an error (exit 1).
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

from harness.core.events import DELETE, FAMILY_IDS, FAMILY_NAMES, INSERT, KNN, OBJECT, RANGE, SNAPSHOT, TERMS, TOPK
from harness.families.result_rows import EXIT_SCHEMA, RESULT_SCHEMA, digest_of_rows


class ExportError(ValueError):
    pass


def read_results(pairs: Path) -> tuple[pa.Table, pa.Table]:
    """Every kept result row with its `epoch` (from the folder name), and the top-k exits."""
    parts, exits = [], []
    for d in sorted(pairs.glob("epoch=*")):
        m = re.fullmatch(r"epoch=(-?\d+)", d.name)
        if not m:
            continue
        for f in sorted(d.glob("*.parquet")):
            t = pq.read_table(f)
            if f.name.startswith("exits-"):
                exits.append(t.cast(EXIT_SCHEMA))
                continue
            if t.column_names == ["key"]:
                raise ExportError(f"{f}: a results file of the older layout (keys only); allowed: a run made with "
                                  "this version and keep_pairs=true")
            t = t.select(RESULT_SCHEMA.names).cast(RESULT_SCHEMA)
            parts.append(t.append_column("epoch", pa.array(np.full(t.num_rows, int(m.group(1)), np.int64))))
    empty = RESULT_SCHEMA.append(pa.field("epoch", pa.int64())).empty_table()
    return (pa.concat_tables(parts) if parts else empty), (pa.concat_tables(exits) if exits else EXIT_SCHEMA.empty_table())


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


def _queries(ev: pd.DataFrame, code: int) -> pd.DataFrame:
    """Per query id of the family: the kind it was asked as, its seq and ts, its deletion seq (or -1)."""
    q = ev[(ev.family == code) & ev.kind.isin([INSERT, SNAPSHOT]) & ~((ev.kind == SNAPSHOT) & ev.step.notna()
                                                                      & (code == TERMS))]
    first = q.sort_values("seq").drop_duplicates("id")[["id", "kind", "seq", "ts", "step"]]
    dels = ev[(ev.family == code) & (ev.kind == DELETE)].groupby("id").seq.min().rename("del_seq")
    out = first.set_index("id").join(dels).rename(columns={"seq": "q_seq", "ts": "q_ts", "kind": "q_kind"})
    out["del_seq"] = out.del_seq.fillna(-1).astype(np.int64)
    return out


def _pairs(t: pd.DataFrame, ev: pd.DataFrame, code: int) -> pd.DataFrame:
    q = _queries(ev, code)
    t = t.join(q, on="qid")
    cont = t.q_kind == INSERT
    # a continuous result entered at its object's arrival: the first object of that id after the insert
    objs = ev[ev.kind == OBJECT][["id", "seq", "ts"]].sort_values("seq")
    c = t[cont].sort_values("q_seq")
    hit = pd.merge_asof(c.reset_index(), objs.rename(columns={"id": "item", "seq": "o_seq", "ts": "o_ts"}),
                        left_on="q_seq", right_on="o_seq", by="item", direction="forward",
                        allow_exact_matches=False).set_index("index")
    t["seq"], t["ts"] = t.q_seq, t.q_ts  # a snapshot query's answers: at the query
    t.loc[hit.index, "seq"] = hit.o_seq.to_numpy()
    t.loc[hit.index, "ts"] = hit.o_ts.to_numpy()
    names = {(RANGE, True): "crq", (RANGE, False): "srq", (KNN, True): "ckq", (KNN, False): "skq"}
    t["type"] = np.where(cont, names.get((code, True), "continuous"), names.get((code, False), "snapshot"))
    t = t.rename(columns={"item": "object"})
    return t[["qid", "object", "type", "epoch", "seq", "ts"]].sort_values(["qid", "seq", "object"])


def _topk(t: pd.DataFrame, exits: pd.DataFrame, ev: pd.DataFrame) -> pd.DataFrame:
    q = _queries(ev, TOPK)
    t = t.rename(columns={"seq": "entered_seq"}).sort_values("entered_seq")
    x = exits[exits.family == TOPK].rename(columns={"seq": "left_seq"}).sort_values("left_seq")[["qid", "item",
                                                                                                  "left_seq"]]
    t = pd.merge_asof(t, x, left_on="entered_seq", right_on="left_seq", by=["qid", "item"], direction="forward",
                      allow_exact_matches=False)
    dele = t.qid.map(q.del_seq).fillna(-1).astype(np.int64)
    t["left_seq"] = t.left_seq.fillna(dele.where(dele >= 0)).astype("Int64")
    ts = ev.set_index("seq").ts
    t["entered_ts"] = t.entered_seq.map(ts)
    t["left_ts"] = t.left_seq.map(ts)
    t = t.rename(columns={"item": "object"})
    return t[["qid", "object", "score", "epoch", "entered_seq", "entered_ts", "left_seq", "left_ts"]].sort_values(
        ["qid", "entered_seq", "object"])


def _terms(t: pd.DataFrame, ev: pd.DataFrame) -> pd.DataFrame:
    q = _queries(ev, TERMS)
    t = t.join(q, on="qid")
    ctq = t.q_kind == INSERT
    t["type"] = np.where(ctq, "ctq", "stq")
    t["ts"] = np.where(ctq, t.q_ts + t.report * t.step, t.q_ts)
    t = t.rename(columns={"item": "term"})
    return t[["qid", "type", "report", "term", "count", "epoch", "ts"]].sort_values(
        ["qid", "report", "count", "term"], ascending=[True, True, False, True])


def _language(run_dir: Path, row: dict):
    """(words by term id or None, the user's id of each dataset row or None, whether the stream's
    object ids are the user's own: an event file's)."""
    cfg_path = run_dir / "config.yaml"
    cfg = yaml.safe_load(cfg_path.read_text()) if cfg_path.is_file() else {}
    by_file = ((cfg or {}).get("workload") or {}).get("source") == "file"
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
    (every generator cycles the dataset in time order: datasets/workloads/range.py, knn.py, topk.py,
    snapshot.py; a drift's objects keep that row's time and take another's place), whose id the
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
    for f in families or []:
        if f not in FAMILY_IDS:
            raise ExportError(f"--family={f!r} is invalid; allowed: {', '.join(FAMILY_IDS)}")
    pairs = Path(pairs) if pairs else run_dir / "pairs"
    if not pairs.is_dir():
        raise ExportError(f"{pairs} does not exist; allowed: a run made with keep_pairs=true (its results are kept "
                          "as rows there), or --pairs the folder they were kept in (under state_uri)")
    table, exits = read_results(pairs)
    digest = digest_of_rows(table)
    if digest != row.get("result_digest"):
        raise ExportError(f"the kept rows digest to {digest}, the run's result_digest is {row.get('result_digest')}: "
                          "the rows are not the run's results")
    ev = _stream(row)
    words, ids, by_file = _language(run_dir, row)
    out = Path(out) if out else run_dir / "export"
    out.mkdir(parents=True, exist_ok=True)
    df, ex = table.to_pandas(), exits.to_pandas()
    written = {}
    for code in sorted(set(df.family.unique().tolist())):
        name = FAMILY_NAMES.get(int(code), str(code))
        if families and name not in families:
            continue
        t = df[df.family == code].drop(columns=["family", "key"]).reset_index(drop=True)
        plain = (_topk(t, ex, ev) if code == TOPK else _terms(t, ev) if code == TERMS else _pairs(t, ev, code))
        plain = _in_user_terms(plain.reset_index(drop=True), words, ids, by_file)
        path = out / f"{name}.{fmt}"
        plain.to_csv(path, index=False) if fmt == "csv" else plain.to_parquet(path, index=False)
        written[name] = len(plain)
    return {"written": written, "digest": digest, "out": str(out)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.export", description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", help="a run's folder, results/runs/<run id>")
    ap.add_argument("--family", action="append", help="only this family (repeatable): range, knn, topk, frequent_terms")
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
