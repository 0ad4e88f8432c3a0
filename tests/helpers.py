"""Small in-memory datasets for tests that do not need Spark: random objects with Zipf terms
(datasets/tiny.py, which the kernels' warm-up shares)."""

from __future__ import annotations

from datasets.tiny import random_objects  # noqa: F401 - the tests' import path
