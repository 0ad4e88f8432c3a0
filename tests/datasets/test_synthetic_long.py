"""The long-message synthetic variant (DSkype's YELP stand-in, Table 3: 37 keywords per message),
composed by Hydra and prepared as the runner does, and its cache key beside the short default's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from datasets import prepare_dataset
from datasets.prepare import cache_key
from harness.core.events import list_to_csr
from harness.report.results import PROJECT_ROOT
from harness.run.config import register_configs

register_configs()


def _prepared(spark, cache_root, dataset: str):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        cfg = compose(config_name="config", overrides=[f"dataset={dataset}", "dataset.size=1000"])
    return prepare_dataset(cfg.dataset, spark, cache_root)


def _terms_per_object(ds) -> np.ndarray:
    offsets, _ = list_to_csr(ds.objects.column("terms"))
    return np.diff(offsets)


@pytest.mark.slow  # CI time: make test-cluster runs it
@pytest.mark.spark
def test_long_messages_have_about_37_terms_and_their_own_cache(spark, tmp_path):
    """Prepared as the runner does (the short default's 5-10 terms are other tests' business)."""
    long = _prepared(spark, tmp_path, "synthetic_long")
    n_long = _terms_per_object(long)
    assert long.objects.num_rows == 1000
    assert 30 <= n_long.mean() <= 44 and n_long.min() >= 30 and n_long.max() <= 44
    # a dataset name of its own (the runs table's `dataset` label and the cache folder's prefix)
    assert long.name == "synthetic_long" and Path(long.cache_path).name.startswith("synthetic_long-")


def test_the_long_variants_cache_key_is_the_synthetic_one_under_its_own_name():
    """synthetic_long's cache key holds the synthetic generator's fields and differs from synthetic's
    only in the name and the term counts (no Spark: the key is computed from the config alone)."""
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        long = compose(config_name="config", overrides=["dataset=synthetic_long"]).dataset
        short = compose(config_name="config", overrides=["dataset=synthetic"]).dataset
    k_long, k_short = cache_key(long), cache_key(short)
    assert k_long.keys() == k_short.keys()
    assert {f for f in k_short if k_long[f] != k_short[f]} == {"name", "min_terms", "max_terms"}
    assert k_long["name"] == "synthetic_long" and k_short["name"] == "synthetic"
