"""Results in plain form, one table for every family (issue 42): what `keep_pairs=true` writes under
the run's `pairs/epoch=E/part-*.parquet` and what `python -m harness.export` reads.

A row is one result of the digest: `family` (its code), `qid`, `item` (an object id, or what the
family's results are made of), `seq`, `report`, `count` (-1 where the family gives none), `score`
(NaN where it gives none) and `key`, the int64 the run's digest hashes. Which columns a family
fills, how its key is computed from them and how its rows read in plain form is the family's
`results` (a `ResultFormat`, declared in its folder), so this module names no family. The key is
computed from the plain columns by `keys_of`, the family's own function, which its merger uses
too, so a re-digest of the rows (`digest_of_rows`) cannot disagree with the run's `result_digest`.

A family whose keys pack (qid, object id) losslessly hands over keys alone and its rows are
decoded from them (`pair_rows`); one whose keys are hashes hands over the rows it hashed
(MergeOutput.rows). A result that leaves a family's answer is an exit row (`EXIT_SCHEMA`: qid,
item, seq = the seq it left at), kept beside the entries (`exits-*.parquet`), outside the digest.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

import numpy as np
import pyarrow as pa

from harness.core.events import format_digest, key_hash_sum, pair_keys
from harness.families import plain, registry

RESULT_SCHEMA = pa.schema([("family", pa.int8()), ("qid", pa.int64()), ("item", pa.int64()), ("seq", pa.int64()),
                           ("report", pa.int64()), ("count", pa.int64()), ("score", pa.float64()),
                           ("key", pa.int64())])
EXIT_SCHEMA = pa.schema([("family", pa.int8()), ("qid", pa.int64()), ("item", pa.int64()), ("seq", pa.int64())])


def _pair_keys(qid, item, seq=None, report=None, count=None) -> np.ndarray:
    return pair_keys(qid, item)


@dataclass(frozen=True)
class ResultFormat:
    """A family's results in plain form: `keys(qid, item, seq, report, count)` -> the int64 digest
    keys of its rows (what its merger hashes); `columns`, the RESULT_SCHEMA columns its rows fill;
    `plain(rows, exits, stream, code)` -> its export file's rows (harness/families/plain.py)."""

    keys: Callable = _pair_keys
    columns: tuple[str, ...] = ("qid", "item")
    plain: Callable = plain.pair_plain


def pair_results(continuous: str = "continuous", snapshot: str = "snapshot") -> ResultFormat:
    """The results of a family whose results are (query, object) pairs: keys packed losslessly,
    exported with the names of its continuous and snapshot query types."""
    return ResultFormat(plain=partial(plain.pair_plain, names=(continuous, snapshot)))


def keys_of(family, qid, item, seq=None, report=None, count=None) -> np.ndarray:
    """The digest keys of plain result rows of one family (its `ResultFormat.keys`)."""
    return registry.by_code(int(family)).results.keys(qid, item, seq, report, count)


def rows(family: int, qid, item, seq=None, report=None, count=None, score=None,
         keys: Callable | None = None) -> pa.Table:
    """A RESULT_SCHEMA table of one family's rows, its keys computed by `keys` (the family's
    `ResultFormat.keys`: a merger passes its own, so a merge on an executor never asks the
    registry), or by `keys_of`."""
    qid = np.asarray(qid, np.int64)
    n = len(qid)
    fill = lambda v, blank, dt: np.full(n, blank, dt) if v is None else np.asarray(v, dt)  # noqa: E731
    seq, report, count = fill(seq, -1, np.int64), fill(report, -1, np.int64), fill(count, -1, np.int64)
    item = np.asarray(item, np.int64)
    return pa.table({"family": np.full(n, family, np.int8), "qid": qid, "item": item, "seq": seq, "report": report,
                     "count": count, "score": fill(score, np.nan, np.float64),
                     "key": (keys(qid, item, seq, report, count) if keys is not None
                             else keys_of(family, qid, item, seq, report, count))}, schema=RESULT_SCHEMA)


def pair_rows(family: int, keys: np.ndarray) -> pa.Table:
    """The rows of (query << 32 | object) keys (a family of pairs)."""
    keys = np.asarray(keys, np.int64)
    return rows(family, keys >> np.int64(32), keys & np.int64(0xFFFFFFFF), keys=_pair_keys)


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
