"""User files as people bring them: header-less CSV with a BOM and positional columns, unquoted
commas, undecodable bytes, swapped lat/lon, boolean Parquet coordinates, empty files, missing
columns. Every fixture is built here; expected counts are computed from what the fixture holds."""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datasets import BAD_ROW_REASONS, BadInputError, DatasetConfig, prepare_dataset, validate_dataset_config
from datasets.files import check_file

BOM = "\ufeff"

# --- a tweet export: id,timestamp,lat,lon,user_id,text; no header, BOM, commas in text not quoted


def _tweets(n: int = 20, comma_every: int = 5) -> list[tuple[list[str], bool]]:
    """(fields, has an unquoted comma in its text) per row; lat/lon around New York."""
    rows = []
    for i in range(n):
        comma = i % comma_every == comma_every - 1
        text = f"coffee, then pizza number{i}" if comma else f"coffee morning number{i}"
        fields = [str(1000 + i), f"2021-03-01T10:00:{i:02d}Z", f"{40.0 + i / 100:.2f}", f"{-74.0 + i / 100:.2f}",
                  f"user{i % 3}", text]
        rows.append((fields, comma))
    return rows


def _write_tweets(path, rows) -> None:
    path.write_bytes((BOM + "".join(",".join(f) + "\n" for f, _ in rows)).encode("utf-8"))


POSITIONAL = dict(name="file", header=False, id_col="0", ts_col="1", lat_col="2", lon_col="3", text_col="5")


def _counts(**nonzero) -> dict:
    return {r: nonzero.get(r, 0) for r in BAD_ROW_REASONS}


@pytest.mark.spark
def test_headerless_bom_positional_and_unquoted_commas(spark, tmp_path):
    rows = _tweets()
    path = tmp_path / "tweets.csv"
    _write_tweets(path, rows)
    n_comma = sum(c for _, c in rows)
    ds = prepare_dataset(DatasetConfig(path=str(path), **POSITIONAL), spark, tmp_path / "cache")
    assert ds.n_input_rows == len(rows)
    assert ds.bad_rows == _counts(field_count_mismatch=n_comma)
    good = [f for f, c in rows if not c]
    assert ds.objects.num_rows == len(good)
    assert ds.objects.column("lat").to_pylist() == [float(f[2]) for f in good]
    assert ds.objects.column("lon").to_pylist() == [float(f[3]) for f in good]
    assert ds.objects.column("ts").to_pylist()[0] == pytest.approx(1614592800.0)  # 2021-03-01T10:00:00Z
    vocab = dict(zip(ds.vocab.column("term").to_pylist(), ds.vocab.column("df").to_pylist()))
    assert vocab["coffee"] == len(good) and vocab["morning"] == len(good) and "pizza" not in vocab

    # the same file with names for the fields loads the same objects
    named = DatasetConfig(name="file", path=str(path), header=False, columns="id,timestamp,lat,lon,user_id,text",
                          ts_col="timestamp", id_col="id")
    again = prepare_dataset(named, spark, tmp_path / "cache")
    assert again.objects.equals(ds.objects) and again.bad_rows == ds.bad_rows

    # stop at the first mismatch: no header, so data row k is line k + 1; the record and its id are named
    first = next(i for i, (_, c) in enumerate(rows) if c)
    with pytest.raises(BadInputError) as err:
        prepare_dataset(DatasetConfig(path=str(path), on_bad_rows="error", **POSITIONAL), spark, tmp_path / "c2")
    msg = str(err.value)
    assert f"tweets.csv: line {first + 1} (id '{1000 + first}')" in msg
    assert "field_count_mismatch" in msg and "6 fields separated by ','" in msg


@pytest.mark.spark
def test_bom_stripped_from_a_coordinate_in_the_first_column(spark, tmp_path):
    path = tmp_path / "lonfirst.csv"
    lines = ["-73.90,40.70,coffee in brooklyn", "-73.80,40.60,pizza in queens"]
    path.write_bytes((BOM + "\n".join(lines) + "\n").encode("utf-8"))
    cfg = DatasetConfig(name="file", path=str(path), header=False, lon_col="0", lat_col="1", text_col="2")
    ds = prepare_dataset(cfg, spark, tmp_path / "cache")
    assert ds.bad_rows == _counts() and ds.objects.column("lon").to_pylist() == [-73.9, -73.8]


def _latin1_file(path) -> list[bool]:
    """A UTF-8 declared CSV with some rows in latin-1 (é, è as single bytes); which rows are latin-1."""
    rows = [("caf\xe9 cr\xe8me", True) if i % 4 == 1 else (f"plain words{i}", False) for i in range(9)]
    body = b"lon,lat,text\n" + b"".join(f"-73.9,40.{i},".encode() + t.encode("latin-1") + b"\n"
                                         for i, (t, _) in enumerate(rows))
    path.write_bytes(body)
    return [b for _, b in rows]


@pytest.mark.spark
def test_undecodable_bytes_counted_or_named(spark, tmp_path):
    path = tmp_path / "mixed.csv"
    latin = _latin1_file(path)
    ds = prepare_dataset(DatasetConfig(name="file", path=str(path)), spark, tmp_path / "cache")
    assert ds.bad_rows == _counts(undecodable_text=sum(latin))
    assert ds.objects.num_rows == len(latin) - sum(latin)
    # read as latin-1 every byte decodes: nothing is lost and the accents survive
    ds = prepare_dataset(DatasetConfig(name="file", path=str(path), encoding="latin-1"), spark, tmp_path / "cache")
    assert ds.bad_rows == _counts() and "café" in ds.vocab.column("term").to_pylist()
    with pytest.raises(BadInputError) as err:
        prepare_dataset(DatasetConfig(name="file", path=str(path), on_bad_rows="error"), spark, tmp_path / "c2")
    # header is line 1, so data row k is line k + 2
    assert f"mixed.csv: line {latin.index(True) + 2}:" in str(err.value)
    assert "undecodable_text" in str(err.value) and "'text'" in str(err.value)


@pytest.mark.spark
def test_swapped_lat_lon_hint(spark, tmp_path, caplog):
    # 8 rows written as (lat, lon) under a "lon,lat" header: longitudes west of -90 are not latitudes
    swapped = [(35.0 + i, -120.0 + i) for i in range(8)]
    right = [(-73.9, 40.7), (-73.8, 40.6)]
    path = tmp_path / "swapped.csv"
    path.write_text("lon,lat,text\n" + "".join(f"{a},{b},coffee shop\n" for a, b in swapped + right))
    with caplog.at_level(logging.WARNING, logger="datasets.prepare"):
        ds = prepare_dataset(DatasetConfig(name="file", path=str(path)), spark, tmp_path / "cache")
    assert ds.bad_rows == _counts(latitude_out_of_range=len(swapped))
    assert ds.swapped_lat_lon_rows == len(swapped) and ds.swapped_lat_lon_suspected
    hint = ds.swap_hint()
    assert f"{len(swapped)} of {len(swapped)} rows" in hint and "may be swapped" in hint
    assert hint in caplog.text
    # one stray latitude in a file is a bad value, not a swapped mapping
    stray = tmp_path / "stray.csv"
    stray.write_text("lon,lat,text\n" + "".join(f"{a},{b},coffee shop\n" for a, b in right * 5 + [(-73.9, 95.0)]))
    ds = prepare_dataset(DatasetConfig(name="file", path=str(stray)), spark, tmp_path / "cache")
    assert ds.bad_rows["latitude_out_of_range"] == 1 and ds.swapped_lat_lon_rows == 1
    assert not ds.swapped_lat_lon_suspected and ds.swap_hint() is None


# --- checks before Spark starts -----------------------------------------------------------------


def test_boolean_parquet_coordinates_rejected_before_spark(tmp_path):
    path = tmp_path / "flags.parquet"
    pq.write_table(pa.table({"lon": [1.0, 2.0], "lat": [True, False], "text": ["a b", "c d"]}), path)
    with pytest.raises(ValueError) as err:
        validate_dataset_config(DatasetConfig(name="file", path=str(path)))
    msg = str(err.value)
    assert "dataset.lat_col='lat'" in msg and "column 'lat'" in msg and "type bool" in msg
    assert "numeric" in msg and str(path) in msg and "\n" not in msg


@pytest.mark.parametrize("content", [b"", BOM.encode(), b"\n\n  \n"])
def test_empty_file_says_empty(tmp_path, content):
    path = tmp_path / "t.csv"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=f"^dataset.path={path} is empty$"):
        validate_dataset_config(DatasetConfig(name="file", path=str(path)))


def test_missing_column_lists_the_header(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("id,ts,latitude,longitude,text\n1,2,40.7,-73.9,hello\n")
    with pytest.raises(ValueError) as err:
        validate_dataset_config(DatasetConfig(name="file", path=str(path), lon_col="longitude"))
    assert str(err.value) == (f"dataset.lat_col='lat' is not a column of {path} "
                              f"(header: id, ts, latitude, longitude, text); allowed: a name above or a position (0-4)")
    # by position instead: resolves to the header's names
    layout = check_file(DatasetConfig(name="file", path=str(path), lon_col="3", lat_col="2"))
    assert layout.cols == {"lon": "_c3", "lat": "_c2", "text": "_c4", "ts": "_c1"}
    assert layout.labels["lat"] == "latitude"


def test_headerless_file_read_with_header_points_to_positions(tmp_path):
    path = tmp_path / "tweets.csv"
    _write_tweets(path, _tweets(3))
    with pytest.raises(ValueError) as err:
        validate_dataset_config(DatasetConfig(name="file", path=str(path)))
    msg = str(err.value)
    assert msg.startswith(f"dataset.lon_col='lon' is not a column of {path} (header: 1000, 2021-03-01T10:00:00Z")
    assert msg.endswith("set dataset.header=false and name columns by position (0-5) or set dataset.columns")
    with pytest.raises(ValueError) as err:
        validate_dataset_config(DatasetConfig(name="file", path=str(path), header=False))
    assert "(the file has 6 fields a line; first line: 1000, " in str(err.value)
    assert str(err.value).endswith("with dataset.header=false name columns by position (0-5) or set dataset.columns")
    with pytest.raises(ValueError, match=r"dataset.text_col='6' is position 6 but the file has 6 fields"):
        validate_dataset_config(DatasetConfig(path=str(path), **{**POSITIONAL, "text_col": "6"}))
    with pytest.raises(ValueError, match=r"dataset.columns has 5 names but most lines in the first MiB of .* have 6 fields"):
        validate_dataset_config(DatasetConfig(name="file", path=str(path), header=False, columns="a,b,c,d,e"))
    validate_dataset_config(DatasetConfig(path=str(path), **POSITIONAL))
    # a malformed first line (a comma in its text) does not set the field count: most lines do
    _write_tweets(path, _tweets(5, comma_every=1)[:1] + _tweets(5)[1:])
    assert check_file(DatasetConfig(path=str(path), **POSITIONAL)).n_fields == 6


@pytest.mark.parametrize("overrides, words", [
    (dict(delimiter=";;"), ["dataset.delimiter=';;'", "one character"]),
    (dict(encoding="klingon"), ["dataset.encoding='klingon'", "utf-8"]),
    (dict(columns="a,a,b"), ["dataset.columns='a,a,b'", "distinct"]),
])
def test_csv_option_messages(tmp_path, overrides, words):
    path = tmp_path / "t.csv"
    path.write_text("lon,lat,text\n1,2,hello world\n")
    with pytest.raises(ValueError) as err:
        validate_dataset_config(DatasetConfig(name="file", path=str(path), **overrides))
    for w in words:
        assert w in str(err.value)
