"""Issue 52, parts 1, 2 and 6 on the data side: a researcher's own file read the way the docs say.

The file is tests/data/tweets_mini.csv (tests/data/README.md): no header, a byte-order mark,
unquoted commas in the text of some rows, a row holding U+FFFD as valid UTF-8, a row with a byte
that is not UTF-8, a row cut short. Expected counts are read from the file's bytes here, not
copied from a run."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from datasets import BadInputError, DatasetConfig, prepare_dataset

ROOT = Path(__file__).resolve().parents[2]
MINI = ROOT / "tests" / "data" / "tweets_mini.csv"


def _lines() -> list[bytes]:
    return MINI.read_bytes().removeprefix(b"\xef\xbb\xbf").splitlines()


def _facts() -> dict:
    """What the file holds, from its bytes: per kind of row, the ids."""
    out = {"comma": [], "short": [], "undecodable": [], "replacement_char": [], "all": []}
    for line in _lines():
        fields = line.split(b",")
        out["all"].append(fields[0].decode())
        if len(fields) < 6:
            out["short"].append(fields[0].decode())
        elif len(fields) > 6:
            out["comma"].append(fields[0].decode())
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            out["undecodable"].append(fields[0].decode())
            continue
        if "\ufffd" in text:
            out["replacement_char"].append(fields[0].decode())
    return out


def _docs_example() -> dict:
    """The dataset.* overrides of docs/configuration.md's header-less example (the one naming
    dataset.header=false), as DatasetConfig fields."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("python -m harness dataset=file")
                and "dataset.header=false" in ln)
    out = {}
    for arg in shlex.split(line)[3:]:
        if arg.startswith("dataset."):
            key, value = arg.removeprefix("dataset.").split("=", 1)
            out[key] = {"true": True, "false": False}.get(value, value)
    out.pop("path")
    return out


def test_the_fixture_is_made_like_the_real_file():
    facts = _facts()
    assert MINI.read_bytes().startswith(b"\xef\xbb\xbf")
    assert len(facts["comma"]) >= 3 and facts["short"] and facts["undecodable"] and facts["replacement_char"]
    assert not set(facts["replacement_char"]) & set(facts["comma"] + facts["short"])


@pytest.mark.spark
def test_the_docs_headerless_example_keeps_every_row_it_can(spark, tmp_path):
    """Part 1: the docs' example is the command that works best: every row with commas in its text
    is read whole, only the short row and the undecodable one are skipped, each by its reason."""
    example = _docs_example()
    assert example.get("text_rest_of_line") is True and example.get("header") is False
    facts = _facts()
    ds = prepare_dataset(DatasetConfig(name="file", path=str(MINI), **example), spark, tmp_path / "cache")
    assert ds.n_input_rows == len(facts["all"])
    assert ds.rescued_rows == len(facts["comma"])
    assert {k: v for k, v in ds.bad_rows.items() if v} == {"field_count_mismatch": len(facts["short"]),
                                                            "undecodable_text": len(facts["undecodable"])}
    assert ds.objects.num_rows == len(facts["all"]) - len(facts["short"]) - len(facts["undecodable"])


@pytest.mark.spark
def test_the_warning_names_the_option_and_how_many_it_would_read(spark, tmp_path):
    """Part 1: without the option the lost rows are counted under field_count_mismatch, and the
    warning's hint names dataset.text_rest_of_line=true with the rows it would read whole; the
    error of on_bad_rows=error names it too."""
    example = {k: v for k, v in _docs_example().items() if k != "text_rest_of_line"}
    facts = _facts()
    ds = prepare_dataset(DatasetConfig(name="file", path=str(MINI), **example), spark, tmp_path / "cache")
    lost = len(facts["comma"]) + len(facts["short"])
    assert ds.bad_rows["field_count_mismatch"] == lost
    assert ds.rescuable_rows == len(facts["comma"])
    assert ds.rest_of_line_hint() == (f"dataset.text_rest_of_line=true would read {len(facts['comma'])} of the "
                                      f"{lost} field_count_mismatch rows whole (their text, the last field, holds "
                                      "the delimiter)")
    from harness.report.table import input_line
    from harness.run.record import input_metrics

    assert f"dataset.text_rest_of_line=true would read {len(facts['comma'])} of the" in input_line(
        input_metrics(ds, None))
    # with the option on, nothing is left to suggest
    on = prepare_dataset(DatasetConfig(name="file", path=str(MINI), **example, text_rest_of_line=True), spark,
                         tmp_path / "cache")
    assert on.rescuable_rows == 0 and on.rest_of_line_hint() is None
    with pytest.raises(BadInputError, match=r"field_count_mismatch.*or dataset.text_rest_of_line=true"):
        prepare_dataset(DatasetConfig(name="file", path=str(MINI), **example, on_bad_rows="error"), spark,
                        tmp_path / "c2")


@pytest.mark.spark
@pytest.mark.parametrize("rest_of_line", [False, True])
def test_a_valid_replacement_character_is_text_and_bad_bytes_are_not(spark, tmp_path, rest_of_line):
    """Part 2: decodability is decided from the bytes, in both readers: the row holding U+FFFD as
    valid UTF-8 is an object, the row with a byte that is not UTF-8 is undecodable_text."""
    facts = _facts()
    example = {**_docs_example(), "text_rest_of_line": rest_of_line}
    ds = prepare_dataset(DatasetConfig(name="file", path=str(MINI), **example), spark, tmp_path / "cache")
    assert ds.bad_rows["undecodable_text"] == len(facts["undecodable"])
    ids = pq.read_table(Path(ds.cache_path) / "ids.parquet").column("source_id").to_pylist()
    assert set(facts["replacement_char"]) <= set(ids)
    assert not set(facts["undecodable"]) & set(ids)
    assert "sign" in ds.vocab.column("term").to_pylist()  # the U+FFFD row's words are counted
    # on_bad_rows=error names the undecodable row, not the U+FFFD one
    with pytest.raises(BadInputError) as err:
        prepare_dataset(DatasetConfig(name="file", path=str(MINI), **{**example, "on_bad_rows": "error"}), spark,
                        tmp_path / "c2")
    if rest_of_line:
        assert f"(id '{facts['undecodable'][0]}')" in str(err.value) and "undecodable_text" in str(err.value)


@pytest.mark.spark
def test_objects_keep_the_ids_the_file_gave_them(spark, tmp_path):
    """Part 6, data side: ids.parquet gives each object (oid, in time order) the id of the file row
    it came from (dataset.id_col), or its line ("line N", the byte-order mark's line is line 1):
    the object's location is that row's."""
    rows = {}
    for n, line in enumerate(_lines(), start=1):
        f = line.decode("utf-8", errors="replace").split(",")
        if len(f) >= 6:
            rows[f[0]] = (n, float(f[2]), float(f[3]))
    example = _docs_example()
    for with_id in (True, False):
        cfg = {**example} if with_id else {k: v for k, v in example.items() if k != "id_col"}
        ds = prepare_dataset(DatasetConfig(name="file", path=str(MINI), **cfg), spark, tmp_path / f"c{with_id}")
        ids = pq.read_table(Path(ds.cache_path) / "ids.parquet")
        assert ids.column("oid").to_pylist() == list(range(ds.objects.num_rows))
        lon, lat = ds.objects.column("lon").to_pylist(), ds.objects.column("lat").to_pylist()
        by_line = {n: key for key, (n, _, _) in rows.items()}
        for oid, source in enumerate(ids.column("source_id").to_pylist()):
            key = source if with_id else by_line[int(re.fullmatch(r"line (\d+)", source).group(1))]
            assert (lat[oid], lon[oid]) == rows[key][1:], (oid, source)
