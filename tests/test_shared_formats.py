"""Issue 49 part 3: the shared readers and writers of a family's formats name no family (each
family declares its event-file query types, result columns and keys, and plain export in its own
folder), and the plain export digests a run epoch by epoch to the whole run's digest."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest
import pyarrow.parquet as pq

from harness.core.events import FAMILY_NAMES, KNN, RANGE, TERMS, TOPK, digest_of, format_digest, key_hash_sum
from harness.families import registry, result_rows
from harness.report.results import PROJECT_ROOT

SHARED = ("datasets/workloads/events_file.py", "datasets/workloads/file_types.py", "harness/families/result_rows.py",
          "harness/families/plain.py", "harness/export.py")


def test_the_shared_format_modules_name_no_family():
    names = set(registry.names()) | set(FAMILY_NAMES.values()) | {"first_k", "latest_k", "top-k", "kNN"}
    words = [re.compile(r"\b(RANGE|KNN|TOPK|TERMS)\b")]  # the built-in families' codes
    words += [re.compile(rf"\b{re.escape(n)}\b(?!\()", re.I) for n in names]  # `range(` is Python's
    words += [re.compile(rf"\b{t}\b", re.I) for t in ("crq", "srq", "ckq", "skq", "ctq", "stq")]  # their query types
    for path in SHARED:
        text = (PROJECT_ROOT / path).read_text()
        hits = [(path, m.group(0), text[:m.start()].count("\n") + 1) for w in words for m in w.finditer(text)]
        assert not hits, hits


def test_every_built_in_family_declares_its_formats():
    for name in FAMILY_NAMES.values():
        fam = registry.get(name)
        assert isinstance(fam.results, result_rows.ResultFormat)
        assert {"qid", "item"} <= set(fam.results.columns) <= set(result_rows.RESULT_SCHEMA.names)
        assert fam.file_types, f"{name}: no event-file query types"


def test_a_family_without_file_types_is_refused_naming_it(tmp_path):
    """The reader knows a family only by what it declares: a row of one that declares no query
    types is refused naming the row, the family and what it lacks."""
    from datasets.workloads.events_file import read_events
    from datasets.workloads.file_types import FileFormat

    path = tmp_path / "e.csv"
    path.write_text("kind,id,x,y,family,terms\nobject,1,0,0,,1\ninsert,2,0,0,toy,1\n")
    with pytest.raises(ValueError, match=r"column 'kind' has 'insert', row 2; allowed: no toy query: its family "
                                         r"declares no event-file query types"):
        read_events(path, 77, formats={77: FileFormat("toy", 77, {})})
    path.write_text("kind,id,x,y,family,terms\nobject,1,0,0,,1\ninsert,2,0,0,77,1\n")
    assert len(read_events(path, 77)) == 2  # without formats: the columns' own rules alone


def _epochs() -> list[pa.Table]:
    """Kept rows of three epochs of four families, as the mergers write them."""
    rng = np.random.default_rng(4)
    out = []
    for e in range(3):
        n = 50 + 10 * e
        qid, item = rng.integers(0, 40, n), rng.integers(0, 1 << 20, n) + e * (1 << 21)
        out.append(pa.concat_tables([
            result_rows.pair_rows(RANGE, (qid.astype(np.int64) << 32) | item),
            result_rows.pair_rows(KNN, ((qid + 100).astype(np.int64) << 32) | item),
            result_rows.rows(TOPK, qid, item, seq=item + 7, score=rng.random(n)),
            result_rows.rows(TERMS, qid, item, report=np.full(n, e), count=rng.integers(1, 9, n))]))
    return out


def test_the_per_epoch_digest_is_the_whole_runs(tmp_path):
    """key_hash_sum is additive: the export's digest, read one epoch at a time (memory bounded by
    an epoch), equals the digest of every row at once and the digest the run computes of its keys."""
    from harness.export import digest_part, kept_digest

    epochs = _epochs()
    for e, t in enumerate(epochs):
        (tmp_path / f"epoch={e}").mkdir()
        pq.write_table(t, tmp_path / f"epoch={e}" / "part-0.parquet")
    whole = pa.concat_tables(epochs)
    assert np.array_equal(result_rows.rekey(whole), whole.column("key").to_numpy())  # the families' own keys
    digest, codes = kept_digest(tmp_path)
    assert digest == result_rows.digest_of_rows(whole) == digest_of(whole.column("key").to_numpy())
    assert codes == sorted([RANGE, KNN, TOPK, TERMS])
    parts = [digest_part(t) for t in epochs]
    assert digest == format_digest(sum(n for n, _ in parts), sum(h for _, h in parts))
    assert parts[0][1] != key_hash_sum(whole.column("key").to_numpy())  # a part is not the whole
