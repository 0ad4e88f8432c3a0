"""Results in plain form, one table for every family (issue 42): what `keep_pairs=true` writes under
the run's `pairs/epoch=E/part-*.parquet` and what `python -m harness.export` reads.

A row is one result of the digest: `family` (its code), `qid`, `item` (an object id; a term id for
the frequent_terms family), `seq` (top-k: the trigger seq of the entry; -1 otherwise), `report`
(frequent_terms: the CTQ report's number, 0 for an STQ; -1 otherwise), `count` (frequent_terms: the
term's count; -1 otherwise),
`score` (top-k: the entry's score; NaN otherwise) and `key`, the int64 the run's digest hashes.
The key is computed from the plain columns by `keys_of`, the one function the mergers use too, so
a re-digest of the rows (`digest_of_rows`) cannot disagree with the run's `result_digest`.

Range and kNN keys pack (qid, object id) losslessly, so their rows are decoded from the keys;
top-k and terms keys are hashes, so their mergers hand over the rows they hashed (MergeOutput.rows).
A top-k entry that leaves the global top-k is an exit row (`EXIT_SCHEMA`: qid, item, seq = the
seq it left at), kept beside the entries (`exits-*.parquet`), outside the digest.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from harness.core.events import KNN, RANGE, TERMS, TOPK, format_digest, key_hash_sum, pair_keys, term_keys
from harness.families.topk.keys import entry_keys

RESULT_SCHEMA = pa.schema([("family", pa.int8()), ("qid", pa.int64()), ("item", pa.int64()), ("seq", pa.int64()),
                           ("report", pa.int64()), ("count", pa.int64()), ("score", pa.float64()),
                           ("key", pa.int64())])
EXIT_SCHEMA = pa.schema([("family", pa.int8()), ("qid", pa.int64()), ("item", pa.int64()), ("seq", pa.int64())])


def keys_of(family, qid, item, seq=None, report=None, count=None) -> np.ndarray:
    """The digest keys of plain result rows of one family."""
    family = int(family)
    if family == TOPK:
        return entry_keys(qid, item, seq)
    if family == TERMS:
        return term_keys(qid, report, item, count)
    return pair_keys(qid, item)  # range, knn and any family whose results are (query, object) pairs


def rows(family: int, qid, item, seq=None, report=None, count=None, score=None) -> pa.Table:
    """A RESULT_SCHEMA table of one family's rows, its keys computed by `keys_of`."""
    qid = np.asarray(qid, np.int64)
    n = len(qid)
    fill = lambda v, blank, dt: np.full(n, blank, dt) if v is None else np.asarray(v, dt)  # noqa: E731
    seq, report, count = fill(seq, -1, np.int64), fill(report, -1, np.int64), fill(count, -1, np.int64)
    item = np.asarray(item, np.int64)
    return pa.table({"family": np.full(n, family, np.int8), "qid": qid, "item": item, "seq": seq, "report": report,
                     "count": count, "score": fill(score, np.nan, np.float64),
                     "key": keys_of(family, qid, item, seq, report, count)}, schema=RESULT_SCHEMA)


def pair_rows(family: int, keys: np.ndarray) -> pa.Table:
    """The rows of (query << 32 | object) keys (range, kNN)."""
    keys = np.asarray(keys, np.int64)
    return rows(family, keys >> np.int64(32), keys & np.int64(0xFFFFFFFF))


def exits(family: int, qid, item, seq) -> pa.Table:
    return pa.table({"family": np.full(len(qid), family, np.int8), "qid": np.asarray(qid, np.int64),
                     "item": np.asarray(item, np.int64), "seq": np.asarray(seq, np.int64)}, schema=EXIT_SCHEMA)


def rekey(table: pa.Table) -> np.ndarray:
    """The keys of a RESULT_SCHEMA table recomputed from its plain columns, family by family."""
    fam = table.column("family").to_numpy()
    out = np.empty(table.num_rows, np.int64)
    col = {c: table.column(c).to_numpy() for c in ("qid", "item", "seq", "report", "count")}
    for f in np.unique(fam):
        m = fam == f
        out[m] = keys_of(int(f), col["qid"][m], col["item"][m], col["seq"][m], col["report"][m], col["count"][m])
    return out


def digest_of_rows(table: pa.Table) -> str:
    """The digest of result rows (`format_digest` of their recomputed keys), as the run computes its own."""
    keys = rekey(table)
    return format_digest(len(keys), key_hash_sum(keys))


FAMILY_CODES = (RANGE, KNN, TOPK, TERMS)
