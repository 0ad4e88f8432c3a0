"""The workload knobs every family shares, and the generated workload.

`family` picks the generator (harness.families.registry); the other fields are read by the
generators that use them (each validates its own). A knob that only one family's generator reads is
that family's own, declared beside it (`Family.WorkloadKnobs`); the flat `workload.*` schema Hydra
types is these shared knobs plus every family's (harness/families/workload.py: WorkloadConfig).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from harness.core.events import Events

PROFILES = ("q1", "q2", "q3")

DRIFTS = ("none", "q3_switch", "hotspot_objects", "hotspot_queries", "scale")

HOTSPOT_SHAPES = ("ramp", "burst")

DRIFT_FIELDS = ("drift", "drift_start", "drift_end", "hotspot_shape", "drift_every", "drift_fraction",
                "hotspot_fraction", "hotspot_region_km", "hotspot_seed", "scale_factor", "scale_fraction")

# knobs whose null means "off": left out of a workload's cache key while off, so a knob added later
# keeps every cached stream's key (harness/run/workload_cache.py)
OFF_WHEN_NULL = ("keyword_rarity",)

SOURCES = ("generator", "file")
# the event-file knobs; with source=generator they are unused (a cache key may leave them out)
FILE_FIELDS = ("source", "path", "warmup_fraction", "warmup_events")

# the kNN generator's protocols and keyword semantics (datasets/workloads/knn.py)
KNN_PROTOCOLS = ("dkm", "ckq")
KNN_OPS = ("or", "and")
# snapshot queries (datasets/workloads/snapshot.py): protocol srq (family range) or skq (family knn);
# it also reads queries, keywords_min/max, k_min/k_max, op, tau_hours, hour_s
SNAPSHOT_PROTOCOLS = ("srq", "skq", "stq", "ctq", "mix")
SNAPSHOT_FIELDS = ("types", "preload_objects", "sample_queries", "batch", "batch_every_s", "objects_per_s",
                   "area_fraction", "ctq_window_hours", "ctq_step_hours", "ctq_span_s")


@dataclass
class SharedWorkloadConfig:
    """The knobs more than one generator reads, or that every workload's cache key has held (the
    STS generator's: the first family's knobs were the whole schema). A family's own knobs are
    its `WorkloadKnobs`."""

    name: str = "sts_q1"
    family: str = "range"
    profile: str = "q1"  # q1 | q2 | q3
    queries: int = 20_000  # mu: live subscriptions after the warm-up
    updates: int = 8_000  # measured query updates (insertions + deletions)
    objects_per_update: float = 5.0
    warmup_objects_per_query: float = 1.0
    lifetime_sd: float = 0.2  # lifetime ~ N(mu, (lifetime_sd * mu)^2) insertions
    keywords_min: int = 1
    keywords_max: int = 3
    or_fraction: float = 0.5
    # Tornado Fig. 8(c) (tornado.txt l.368): query keywords drawn from one band of the vocabulary
    # ranked by frequency instead of from the query's centre object: 0 = the most frequent terms
    # (the paper's 100%), 1 = the least frequent (its 0%, keywords objects hardly carry); None = off
    keyword_rarity: Optional[float] = None
    q1_side_km_min: float = 1.0
    q1_side_km_max: float = 50.0
    q2_side_km_min: float = 1.0
    q2_side_km_max: float = 100.0
    rare_top_fraction: float = 0.01  # Q2: a keyword outside this top fraction of terms
    regions_per_side: int = 10  # Q3
    q2_region_fraction: float = 0.5  # Q3
    seed_offset: int = 0
    note: Optional[str] = None
    # drift of the measured part (module docstring); the warm-up never drifts
    drift: str = "none"  # none | q3_switch | hotspot_objects | hotspot_queries | scale
    drift_start: float = 0.2  # fraction of the measured events before the drift begins
    drift_end: float = 1.0  # hotspot_*: where the ramp reaches hotspot_fraction, or the burst ends
    # hotspot_*: ramp (0 -> hotspot_fraction at drift_end, held after) | burst (hotspot_fraction until drift_end, 0 after)
    hotspot_shape: str = "ramp"
    drift_every: Optional[int] = None  # q3_switch: query insertions between switches; None = queries (the paper's mu)
    drift_fraction: float = 0.1  # q3_switch: share of the regions switching at each drift point
    hotspot_fraction: float = 0.5  # hotspot_*: share relocated (hotspot_shape says when)
    hotspot_region_km: float = 100.0  # hotspot_*: side of the hot square
    hotspot_seed: Optional[int] = None  # hotspot_*: fixes the hot square across seeds; None = from the seed
    scale_factor: float = 0.5  # scale: sf (Tornado: .4 to .7)
    scale_fraction: float = 1.0  # scale: share of the events after the drift start that move
    # where the stream comes from: the family's generator, or a user's event file (Parquet or CSV,
    # datasets/workloads/events_file.py; the generator knobs above are then unused)
    source: str = "generator"  # generator | file
    path: Optional[str] = None  # source=file: the event file
    warmup_fraction: float = 0.2  # source=file: share of the file's events (seq order) that is the warm-up
    warmup_events: Optional[int] = None  # source=file: the warm-up as an event count (wins over the fraction)
    # the queries' shape, read by the kNN, top-k and snapshot generators (datasets/workloads/knn.py,
    # topk.py, snapshot.py); the kNN generator's own knobs are KnnFamily.WorkloadKnobs
    protocol: str = "dkm"  # knn: dkm (DkM-SKS Sec. 5.1, knn_q) | ckq (SSTD's CKQ with lifetimes, ckq_q); snapshot protocols
    k_min: int = 1  # k uniform in [k_min, k_max] (DkM: [1, k_max]; SSTD: 10..40, default 10)
    k_max: int = 10  # DkM's default k_max
    op: str = "or"  # or (DkM: any keyword) | and (SSTD CKQ: every keyword)
    tau_hours: float = 72.0  # ckq: lifetime in paper hours (SSTD: 24-168, default 72)
    hour_s: Optional[float] = None  # ckq: event seconds (= time-stamps) per paper hour; None = timestamps / 744
    # snapshot queries (protocol srq / skq / stq / ctq, or mix: `types` of SSTD's six at once;
    # datasets/workloads/snapshot.py; SSTD Sec. 7.1)
    types: list = field(default_factory=lambda: ["srq"])  # mix: srq, skq, stq, crq, ckq, ctq
    preload_objects: int = 50_000  # objects before the first batch: the warm-up (SSTD: 50M)
    sample_queries: int = 200  # snapshot queries at the warm-up's end: the fitting sample's queries
    batch: int = 200  # snapshot queries per batch (SSTD: 200)
    batch_every_s: float = 2.0  # event seconds between batches (SSTD: "every other second")
    objects_per_s: float = 1000.0  # objects keep arriving while the batches come
    area_fraction: float = 1e-4  # srq, stq, ctq: the square region's share of the extent's area (SSTD: 1e-6..1e-2)
    ctq_window_hours: float = 24.0  # ctq: the window T each report counts (SSTD gives none; our choice)
    ctq_step_hours: float = 24.0  # ctq: delta between reports (SSTD gives none; our choice)
    ctq_span_s: float = 20.0  # ctq: event seconds of the measured part after the registrations


def invalid(field: str, value, allowed: str):
    """The one error a bad workload value gets: the field, the value and what is allowed."""
    raise ValueError(f"workload.{field}={value!r} is invalid; allowed: {allowed}")


def check_k_and_keywords(cfg) -> None:
    """k uniform in [k_min, k_max] and keyword counts in [keywords_min, keywords_max] (kNN, top-k)."""
    if cfg.k_min < 1:
        invalid("k_min", cfg.k_min, "an integer >= 1")
    if cfg.k_max < cfg.k_min:
        invalid("k_max", cfg.k_max, f"an integer >= k_min ({cfg.k_min})")
    if cfg.keywords_min < 1:
        invalid("keywords_min", cfg.keywords_min, "an integer >= 1")
    if cfg.keywords_max < cfg.keywords_min:
        invalid("keywords_max", cfg.keywords_max, f"an integer >= keywords_min ({cfg.keywords_min})")


@dataclass
class Workload:
    events: Events  # the whole ordered stream
    warmup: int  # the first `warmup` events are the warm-up prefix (the fitting sample)
    drift: Optional[dict] = None  # what the drift did (kind, start event, drift points, regions)
    info: dict = field(default_factory=dict)  # facts about the input a run reports (e.g. objects reused)

    @property
    def sample(self) -> Events:
        return self.events.take(np.arange(self.warmup))
