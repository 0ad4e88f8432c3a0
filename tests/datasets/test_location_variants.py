"""SSTD Fig. 7's location variants of the synthetic generator (datasets/synthetic.py `locations`):
Uni (uniform over the places' bbox) and Gau (a 2-D Gaussian about the bbox's midpoints, sd in
degrees) move every object and keep its text and time; bad values are refused before Spark; the
prepared-data cache tells the variants apart."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from scipy import stats

from datasets import DatasetConfig, prepare_dataset, validate_dataset_config
from datasets.prepare import cache_dir, cache_key
from datasets.synthetic import build_model, generate_chunk
from harness.core.events import list_to_csr
from harness.report.results import PROJECT_ROOT
from harness.run.config import register_configs

register_configs()
N = 20_000
SMALL = dict(n_places=200, vocab_size=500)


def _chunk(**fields):
    """One generated chunk (N objects) of partition 0, chunk 0, as (lon, lat, text, ts, row) arrays."""
    m = build_model(DatasetConfig(**SMALL, **fields))
    b = generate_chunk(m, np.random.default_rng([7, 0, 0]), 0, N)
    return m, {name: b.column(i).to_numpy(zero_copy_only=False) for i, name in enumerate(b.schema.names)}


def _composed(*overrides):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        return compose(config_name="config", overrides=list(overrides)).dataset


@pytest.mark.parametrize("fields", [dict(locations="uniform"), dict(locations="gaussian", location_sd_deg=2.0)])
def test_a_variant_moves_the_objects_and_keeps_their_text_and_time(fields):
    _, base = _chunk()
    _, moved = _chunk(**fields)
    for col in ("text", "ts", "_row"):
        assert (moved[col] == base[col]).all(), col
    assert np.mean(moved["lon"] != base["lon"]) > 0.99 and np.mean(moved["lat"] != base["lat"]) > 0.99


def _uniformity_p(lon, lat, box, cells: int = 10) -> tuple[float, float, float]:
    """KS p-values of lon and lat against U(box) and a chi-square p over a cells x cells grid."""
    x0, y0, x1, y1 = box
    p_lon = stats.kstest(lon, stats.uniform(loc=x0, scale=x1 - x0).cdf).pvalue
    p_lat = stats.kstest(lat, stats.uniform(loc=y0, scale=y1 - y0).cdf).pvalue
    counts, _, _ = np.histogram2d(lon, lat, bins=cells, range=[[x0, x1], [y0, y1]])
    return p_lon, p_lat, stats.chisquare(counts.ravel()).pvalue


def test_uniform_locations_are_uniform_over_the_places_bbox_and_the_places_ones_are_not():
    m, uni = _chunk(locations="uniform")
    x0, y0, x1, y1 = m["box"]
    assert uni["lon"].min() >= x0 and uni["lon"].max() <= x1 and uni["lat"].min() >= y0 and uni["lat"].max() <= y1
    assert min(_uniformity_p(uni["lon"], uni["lat"], m["box"])) > 1e-3
    _, places = _chunk()  # the same tests reject the clustered default: they can fail
    assert max(_uniformity_p(places["lon"], places["lat"], m["box"])) < 1e-12


@pytest.mark.parametrize("sd", [1.0, 3.0])
def test_gaussian_locations_are_centred_on_the_bbox_midpoints_with_the_configured_sd(sd):
    m, gau = _chunk(locations="gaussian", location_sd_deg=sd)
    x0, y0, x1, y1 = m["box"]
    mid = ((x0 + x1) / 2, (y0 + y1) / 2)
    se = sd / np.sqrt(N)
    for values, mu in ((gau["lon"], mid[0]), (gau["lat"], mid[1])):
        assert abs(values.mean() - mu) < 5 * se
        assert abs(values.std() / sd - 1) < 0.03
        assert stats.kstest(values, stats.norm(loc=mu, scale=sd).cdf).pvalue > 1e-3
    assert abs(np.corrcoef(gau["lon"], gau["lat"])[0, 1]) < 0.03  # rho = 0


def test_a_wide_gaussian_stays_in_the_bbox_without_piling_up_at_its_edges():
    m, gau = _chunk(locations="gaussian", location_sd_deg=40.0)
    x0, y0, x1, y1 = m["box"]
    assert gau["lon"].min() >= x0 and gau["lon"].max() <= x1 and gau["lat"].min() >= y0 and gau["lat"].max() <= y1
    for values, lo, hi in ((gau["lon"], x0, x1), (gau["lat"], y0, y1)):
        edge = (values - lo < (hi - lo) / 1000) | (hi - values < (hi - lo) / 1000)
        assert edge.mean() < 0.01  # clipping a N(mid, 40) would put a third or more there


@pytest.mark.parametrize(
    "overrides, words",
    [
        (dict(locations="random"), ["dataset.locations", "'random'", "places | uniform | gaussian"]),
        (dict(locations="Uniform"), ["dataset.locations", "'Uniform'", "places | uniform | gaussian"]),
        (dict(locations="gaussian", location_sd_deg=0.0), ["dataset.location_sd_deg", "0.0", "degrees > 0"]),
        (dict(location_sd_deg=-1.0), ["dataset.location_sd_deg", "-1.0", "degrees > 0"]),
        (dict(name="geonames", locations="uniform"), ["dataset.locations", "'uniform'", "places for the geonames"]),
    ],
)
def test_bad_location_settings_are_refused_with_the_field_value_and_allowed(overrides, words):
    with pytest.raises(ValueError) as err:
        validate_dataset_config(DatasetConfig(**overrides))
    for w in words:
        assert w in str(err.value)


def test_the_fig7_configs_compose_and_their_cache_keys_differ():
    named = {d: _composed(f"dataset={d}") for d in
             ("synthetic", "synthetic_tw15", "synthetic_uniform", "synthetic_gauss")}
    for name, cfg in named.items():
        assert cfg.name == name
        validate_dataset_config(cfg)
    assert named["synthetic_uniform"].locations == "uniform" and named["synthetic_gauss"].locations == "gaussian"
    assert named["synthetic_gauss"].location_sd_deg == 1.0 and named["synthetic_tw15"].seed != named["synthetic"].seed
    dirs = {cache_dir(c, Path("/c")).name for c in named.values()}
    assert len(dirs) == 4
    # the key itself (not only the name) tells the variants apart; the default keeps its old key
    base = cache_key(named["synthetic"])
    assert "locations" not in base and "location_sd_deg" not in base
    renamed = {d: cache_key(_composed("dataset=synthetic", f"dataset.locations={loc}"))
               for d, loc in (("uni", "uniform"), ("gau", "gaussian"))}
    assert renamed["uni"] != base and renamed["gau"] != base and renamed["uni"] != renamed["gau"]
    wider = cache_key(_composed("dataset=synthetic_gauss", "dataset.location_sd_deg=2.0"))
    assert wider != cache_key(named["synthetic_gauss"])


@pytest.mark.spark
def test_prepared_gau_holds_the_tw14_generators_text_and_times_in_tw14s_space(spark, tmp_path):
    """Through Hydra and prepare_dataset as the runner calls them (one Spark preparation each: TW14's
    objects are regenerated directly, partition by partition, as the Spark job seeds them). Gau's
    extent is the global space TW14 spans, centred on its axes' mid-points (sstd.txt l.320, l.338),
    so a query region of a given share has TW14's area, not a share of Gau's own ~900 km box."""
    cfg = _composed("dataset=synthetic_gauss", "dataset.size=2000", "dataset.partitions=2")
    gau = prepare_dataset(cfg, spark, tmp_path)
    assert Path(gau.cache_path).name.startswith("synthetic_gauss-") and gau.objects.num_rows == 2000
    tw14 = build_model(_composed("dataset=synthetic", "dataset.size=2000", "dataset.partitions=2"))
    parts = [generate_chunk(tw14, np.random.default_rng([tw14["seed"], p, 0]), p * 1000, 1000) for p in (0, 1)]
    ts = np.concatenate([b.column(3).to_numpy() for b in parts])  # rising with the row id
    text = [t for b in parts for t in b.column(2).to_pylist()]
    assert np.array_equal(gau.objects.column("ts").to_numpy(), ts)
    words = np.array(gau.vocab.column("term").to_pylist(), dtype=object)
    offsets, ids = list_to_csr(gau.objects.column("terms"))
    assert all(set(words[ids[offsets[i]:offsets[i + 1]]]) == set(text[i].split()) for i in range(len(text)))
    x = gau.objects.column("x").to_numpy()
    y = gau.objects.column("y").to_numpy()
    assert np.ptp(x) < 1000 and np.ptp(y) < 1000  # +-4 sd of 1 degree: the objects stay in a hot spot
    x0, y0, x1, y1 = gau.extent
    assert x0 <= x.min() and x.max() <= x1 and y0 <= y.min() and y.max() <= y1
    assert abs((x0 + x1) / 2) < 1 and abs((y0 + y1) / 2) < 1  # centred on the space's mid-points
    tw = prepare_dataset(_composed("dataset=synthetic", "dataset.size=2000", "dataset.partitions=2"), spark, tmp_path)
    tx0, ty0, tx1, ty1 = tw.extent
    area_gau, area_tw = (x1 - x0) * (y1 - y0), (tx1 - tx0) * (ty1 - ty0)
    assert area_gau > 4000 * 2000 and abs(area_gau / area_tw - 1) < 0.1  # the same share, the same area
