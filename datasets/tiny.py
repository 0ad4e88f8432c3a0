"""Small in-memory datasets with no Spark: random clustered objects with Zipf-distributed terms,
for the tests and the kernels' warm-up (harness/engine/warmup.py)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from harness.core.events import OBJECT_SCHEMA


def random_objects(n: int, vocab: int = 200, seed: int = 0, extent=(0.0, 0.0, 400.0, 300.0), clusters: int = 5):
    rng = np.random.default_rng(seed)
    centres = rng.uniform([extent[0], extent[1]], [extent[2], extent[3]], size=(clusters, 2))
    which = rng.integers(0, clusters, n)
    xy = centres[which] + rng.normal(0, 25, size=(n, 2))
    xy[:, 0] = np.clip(xy[:, 0], extent[0], extent[2])
    xy[:, 1] = np.clip(xy[:, 1], extent[1], extent[3])
    p = 1.0 / np.arange(1, vocab + 1)
    p /= p.sum()
    terms = []
    for i in range(n):
        k = rng.integers(2, 7)
        terms.append(np.unique(rng.choice(vocab, size=k, p=p)).astype(np.int32).tolist())
    table = pa.Table.from_pydict(
        {
            "oid": np.arange(n, dtype=np.int64),
            "ts": np.arange(n, dtype=np.float64),
            "lon": xy[:, 0] / 100.0,
            "lat": xy[:, 1] / 100.0,
            "x": xy[:, 0],
            "y": xy[:, 1],
            "terms": terms,
        },
        schema=OBJECT_SCHEMA,
    )
    flat = np.concatenate([np.asarray(t, np.int64) for t in terms])
    df = np.bincount(flat, minlength=vocab).astype(np.int64)
    return table, df, extent
