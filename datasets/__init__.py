"""Datasets of spatio-textual objects: synthetic tweet-like streams, geonames places, user files.

Entry point: prepare_dataset(cfg, spark, cache_root) -> PreparedDataset (objects in
harness.core.events.OBJECT_SCHEMA plus the document-frequency-ranked vocabulary), cached as Parquet.
"""

from .config import BAD_ROW_REASONS, BadInputError, DatasetConfig, validate_dataset_config
from .prepare import PreparedDataset, prepare_dataset

__all__ = ["BAD_ROW_REASONS", "BadInputError", "DatasetConfig", "PreparedDataset", "prepare_dataset",
           "validate_dataset_config"]
