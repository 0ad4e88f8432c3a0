"""The scale oracle (a tiled join on Spark) gives the brute-force oracle's digest: rectangles across
tiles, objects on tile borders and outside the extent, deletions, AND and OR, any tile count."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from harness.core.events import OBJECT, digest_of
from harness.families.range.oracle import oracle_keys
from harness.families.range.tiled_oracle import tiled_oracle_digest
from tests.streams import random_stream


def _frame(spark, ev):
    return spark.createDataFrame(pa.Table.from_batches([ev.to_arrow()]).to_pandas())


@pytest.mark.parametrize("seed,tiles", [(0, 1), (2, 7), (4, 64)])
def test_the_tiled_join_equals_the_brute_force(spark, seed, tiles):
    ev = random_stream(seed, n_objects=300, n_queries=80)
    expected = digest_of(oracle_keys(ev))
    assert not expected.startswith("0:")  # the stream has results
    got, checks = tiled_oracle_digest(spark, _frame(spark, ev), (0.0, 0.0, 100.0, 100.0), tiles)
    assert got == expected
    assert checks > 0


def test_objects_exactly_on_tile_borders_and_rectangle_edges_are_found_once(spark):
    ev = random_stream(5, n_objects=200, n_queries=60)
    obj = ev.kind == OBJECT
    # snap objects to the 10-unit tile lines and put rectangle edges on them too
    ev.cols["x"][obj] = np.round(ev.x[obj] / 10) * 10
    ev.cols["y"][obj] = np.round(ev.y[obj] / 10) * 10
    for c in ("xmin", "ymin", "xmax", "ymax"):
        ev.cols[c][~obj] = np.round(ev.cols[c][~obj] / 10) * 10
    expected = digest_of(oracle_keys(ev))
    got, _ = tiled_oracle_digest(spark, _frame(spark, ev), (0.0, 0.0, 100.0, 100.0), 10)
    assert got == expected


def test_a_bad_tile_count_is_named(spark):
    ev = random_stream(6, n_objects=10, n_queries=5)
    with pytest.raises(ValueError, match="oracle.tiles=0"):
        tiled_oracle_digest(spark, _frame(spark, ev), (0.0, 0.0, 100.0, 100.0), 0)
