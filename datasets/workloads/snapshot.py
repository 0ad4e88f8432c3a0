"""SSTD's snapshot queries over a preloaded object stream, SRQ (family range), SKQ (family knn) and
STQ (family frequent_terms), and its continuous top-k-terms queries, CTQ (family frequent_terms).

SSTD's latency protocol (Sec. 7.1): "send 50M objects to the system, then submit a batch of 200
queries every other second". Here the warm-up is `preload_objects` objects (the store the queries
look back into, and the strategies' fitting sample); the measured part is `queries` snapshot
queries in batches of `batch`, one batch every `batch_every_s` seconds of event time, while objects
keep arriving at `objects_per_s` (a decision: SSTD's stream does not stop for its queries).

The warm-up ends with `sample_queries` queries (answered, and the strategies' fitting sample of
queries, which SSTD's QT-tree builds its cost model from). A query (protocol `srq` or `skq`)
takes the location and keywords of a uniformly random dataset object with at least `keywords_min` terms (min(keywords_max, |terms|) of them, drawn uniformly, as
the kNN generator does; SSTD: "we sample a small set of tweets and for each tweet, we utilize its
textual content and geo-location to generate one query"); `op` joins them (SSTD: and). An SRQ's
region is a square of `area_fraction` of the dataset extent's area centred there (SSTD: 0.0001% to
1%, default 0.01%), not clipped; an SKQ has k uniform in [k_min, k_max] and the extent as its
rectangle (no radius known), so space partitioners send it everywhere. Look-back tau =
`tau_hours` x `hour_s` seconds; `hour_s` = None maps the whole stream's span to TW14's 31 days
(744 h), so tau = 72 h is 9.7% of the span.

An STQ (protocol `stq`) is an SRQ's square and look-back without keywords, and k uniform in
[k_min, k_max]. A CTQ (protocol `ctq`) is registered (INSERT) at the preload's end with that square,
k, window T = `ctq_window_hours`, step delta = `ctq_step_hours` and lifetime `tau_hours` (all in paper
hours, times `hour_s`); the measured part is `ctq_span_s` seconds of objects. Each report of a CTQ is
an event of its own (`with_ctq_reports`): kind SNAPSHOT, the CTQ's id, `step` = the report's number
j, `tau` = T, at t_j = registration + j x delta, after every event of time <= t_j, while t_j is
within the lifetime, the stream, and before a deletion of the CTQ. SSTD gives neither T nor delta;
reports anchored at the registration are our choice (spec 4.1).

Drift `hotspot_objects` (SSTD Fig. 14: "inserting a very large number of objects" into a random
region) relocates a ramping share of the measured objects into a hot square, as the range
workload's drift does (datasets/workloads/drift.py; `drift_start`, `hotspot_fraction`,
`hotspot_region_km`); the queries stay as drawn (SSTD's Fig. 14(c): new snapshot queries after the
adjustment). No other drift applies to this workload.

Event time: object i (stream order) at i / objects_per_s; batch j at the preload's end + (j + 1) x
batch_every_s, its queries ahead of the objects of that instant. Ids: objects 0..n-1 in stream
order (the dataset's objects, cycled), queries 0..queries-1. Deterministic for a seed.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from datasets.workloads.config import SNAPSHOT_PROTOCOLS, Workload, check_k_and_keywords, invalid
from datasets.workloads.drift import drift_objects, validate_hot_spot
from datasets.workloads.knn import SPAN_HOURS, sampled_queries
from datasets.workloads.range import object_reuse
from harness.core.events import (AND, DELETE, FAMILY_NAMES, INSERT, KNN, OBJECT, OR, RANGE, SNAPSHOT, TERMS, Events,
                                 csr_take, list_to_csr)

# SSTD's six query types: their family, which are continuous, and (mix) the base of each one's ids,
# so that result keys (query id << 32 | object id) of two families never meet
TYPE_FAMILY = {"srq": RANGE, "skq": KNN, "stq": TERMS, "crq": RANGE, "ckq": KNN, "ctq": TERMS}
CONTINUOUS = ("crq", "ckq", "ctq")
TYPE_IDS = {t: i * 100_000_000 for i, t in enumerate(TYPE_FAMILY)}
SNAPSHOT_DRIFTS = ("none", "hotspot_objects")


def validate_snapshot_workload(cfg, protocols: tuple[str, ...] = SNAPSHOT_PROTOCOLS) -> None:
    """`protocols`: those the workload's family generates."""
    if cfg.protocol not in protocols:
        invalid("protocol", cfg.protocol, ", ".join(protocols))
    for name in ("preload_objects", "queries", "batch"):
        if int(getattr(cfg, name)) < 1:
            invalid(name, getattr(cfg, name), "an integer >= 1")
    if int(cfg.sample_queries) < 0:
        invalid("sample_queries", cfg.sample_queries, "an integer >= 0")
    for name in ("batch_every_s", "objects_per_s", "tau_hours", "ctq_window_hours", "ctq_step_hours", "ctq_span_s"):
        v = getattr(cfg, name)
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            invalid(name, v, "a number > 0")
    if cfg.hour_s is not None and not (math.isfinite(cfg.hour_s) and cfg.hour_s > 0):
        invalid("hour_s", cfg.hour_s, "a number > 0, or null (the stream's span is 744 h)")
    if cfg.protocol == "mix":
        types = list(cfg.types)
        bad = [t for t in types if t not in TYPE_FAMILY]
        if bad or not types or len(set(types)) < len(types):
            invalid("types", types, f"distinct SSTD query types among {', '.join(TYPE_FAMILY)}")
    if "ctq" in workload_types(cfg) and cfg.ctq_step_hours > cfg.ctq_window_hours:
        invalid("ctq_step_hours", cfg.ctq_step_hours, f"at most ctq_window_hours ({cfg.ctq_window_hours})")
    if not 0 < cfg.area_fraction <= 1:
        invalid("area_fraction", cfg.area_fraction, "a share of the extent's area in (0, 1]")
    if cfg.op not in ("and", "or"):
        invalid("op", cfg.op, "and, or")
    if cfg.drift not in SNAPSHOT_DRIFTS:
        invalid("drift", cfg.drift, f"{', '.join(SNAPSHOT_DRIFTS)} (protocol {cfg.protocol})")
    validate_hot_spot(cfg)
    check_k_and_keywords(cfg)


def workload_types(cfg) -> list[str]:
    """SSTD's query types a snapshot-protocol workload holds: its protocol's, or `types` (mix)."""
    return list(cfg.types) if cfg.protocol == "mix" else [cfg.protocol]


def workload_families(cfg) -> list[str]:
    """The query families of a snapshot-protocol workload, by name."""
    return sorted({FAMILY_NAMES[TYPE_FAMILY[t]] for t in workload_types(cfg)})


def build_snapshot_workload(objects: pa.Table, term_df: np.ndarray, extent, cfg, seed: int) -> Workload:
    """The ordered stream of a snapshot-query, CTQ or mixed workload (module docstring)."""
    validate_snapshot_workload(cfg)
    if objects.num_rows == 0:
        raise ValueError("the snapshot workload needs a dataset with objects; this one has none")
    types = workload_types(cfg)
    mix = cfg.protocol == "mix"
    snap = [t for t in types if t not in CONTINUOUS]
    rng = np.random.default_rng(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, int(cfg.seed_offset) & 0xFFFFFFFF,
                                                        0x534E4150]))
    n_meas, per_batch = int(cfg.queries), int(cfg.batch)
    every, rate = float(cfg.batch_every_s), float(cfg.objects_per_s)
    n_sample = int(cfg.sample_queries)
    n_batches = -(-n_meas * len(snap) // per_batch)
    preload = int(cfg.preload_objects)
    t0 = preload / rate  # the warm-up ends: sample queries and registrations come right after the preload
    measured_s = max(n_batches * every, float(cfg.ctq_span_s) if len(snap) < len(types) else 0.0)
    span = t0 + measured_s
    n_obj = preload + int(math.floor(measured_s * rate))
    hour_s = span / SPAN_HOURS if cfg.hour_s is None else float(cfg.hour_s)
    o_off, o_val = list_to_csr(objects.column("terms"))
    xmin, ymin, xmax, ymax = (float(v) for v in extent)
    half = math.sqrt(float(cfg.area_fraction) * (xmax - xmin) * (ymax - ymin)) / 2

    # the measured snapshot queries of every type, mixed and cut into batches
    slot = rng.permutation(n_meas * len(snap))
    blocks = []  # per type: (rank, ts, payload arrays)
    for rank, t in enumerate(types):
        n = n_meas + n_sample if t not in CONTINUOUS else n_meas
        x, y, k, q_off, q_val = sampled_queries(rng, objects, o_off, o_val, n, cfg)
        if TYPE_FAMILY[t] == TERMS:  # no keywords
            q_off, q_val = np.zeros(n + 1, np.int64), np.zeros(0, np.int32)
        if t in CONTINUOUS:
            ts = np.full(n, t0)
        else:
            i = snap.index(t)
            batch = slot[i * n_meas:(i + 1) * n_meas] // per_batch
            ts = np.r_[np.full(n_sample, t0), t0 + (batch + 1) * every]
        spatial = t not in ("skq", "ckq")
        rect = ((x - half, y - half, x + half, y + half) if spatial
                else tuple(np.full(n, v) for v in (xmin, ymin, xmax, ymax)))
        tau = (np.full(n, float(cfg.tau_hours) * hour_s) if t not in ("crq", "ckq") else np.full(n, np.nan))
        ids = np.arange(n, dtype=np.int64) + (TYPE_IDS[t] if mix else 0)
        blocks.append(dict(rank=np.full(n, rank), ts=ts, kind=np.full(n, INSERT if t in CONTINUOUS else SNAPSHOT),
                           family=np.full(n, TYPE_FAMILY[t]), id=ids, x=x, y=y, rect=rect,
                           k=k if TYPE_FAMILY[t] != RANGE else np.zeros(n, np.int32), tau=tau,
                           win=np.full(n, float(cfg.ctq_window_hours) * hour_s if t == "ctq" else np.nan),
                           step=np.full(n, float(cfg.ctq_step_hours) * hour_s if t == "ctq" else np.nan),
                           off=q_off, val=q_val))

    # stream order: time, then queries ahead of the objects of the same instant, then type, then id
    cat = lambda name: np.concatenate([b[name] for b in blocks])  # noqa: E731
    n_q = sum(len(b["ts"]) for b in blocks)
    ts = np.r_[cat("ts"), np.arange(n_obj, dtype=np.float64) / rate]
    is_obj = np.r_[np.zeros(n_q, np.bool_), np.ones(n_obj, np.bool_)]
    rank = np.r_[cat("rank"), np.zeros(n_obj, np.int64)]
    ids = np.r_[cat("id"), np.arange(n_obj, dtype=np.int64)]
    src = np.r_[np.arange(n_q), np.arange(n_obj)]  # a query's position among the blocks, an object's id
    order = np.lexsort((ids, rank, is_obj, ts))
    ts, is_obj, ids, src = ts[order], is_obj[order], ids[order], src[order]
    n = len(order)
    is_q = ~is_obj
    q = src[is_q]
    src_rows = src[is_obj] % objects.num_rows
    n_warm = preload + sum(n_sample if t not in CONTINUOUS else n_meas for t in types)
    obj_x, obj_y, drift = objects.column("x").to_numpy()[src_rows], objects.column("y").to_numpy()[src_rows], None
    if cfg.drift != "none":  # the measured objects (ids from `preload` on), at their stream positions
        pos = np.flatnonzero(is_obj)
        meas = np.arange(preload, n_obj)
        start = n_warm + int(cfg.drift_start * (n - n_warm))
        src_rows, obj_x, obj_y, drift = drift_objects(cfg, seed, objects, extent, src_rows, obj_x, obj_y, meas,
                                                      pos[meas], start, (pos[meas] - n_warm) / max(n - n_warm, 1))
        drift = {"kind": cfg.drift, "start_event": start, **drift}
    cols = {"seq": np.arange(n, dtype=np.int64), "ts": ts, "id": ids,
            "kind": np.where(is_obj, OBJECT, 0).astype(np.int8), "family": np.full(n, -1, np.int8),
            "x": np.empty(n), "y": np.empty(n), "op": np.zeros(n, np.int8), "k": np.zeros(n, np.int32),
            "alpha": np.zeros(n, np.float32)}
    for name in ("xmin", "ymin", "xmax", "ymax", "tau", "win", "step"):
        cols[name] = np.full(n, np.nan)
    cols["kind"][is_q] = cat("kind")[q]
    cols["family"][is_q] = cat("family")[q]
    cols["x"][is_obj], cols["y"][is_obj] = obj_x, obj_y
    cols["x"][is_q], cols["y"][is_q] = cat("x")[q], cat("y")[q]
    for j, name in enumerate(("xmin", "ymin", "xmax", "ymax")):
        cols[name][is_q] = np.concatenate([b["rect"][j] for b in blocks])[q]
    for name in ("k", "tau", "win", "step"):
        cols[name][is_q] = cat(name)[q]
    cols["op"][is_q] = AND if cfg.op == "and" else OR

    # terms: the dataset's rows, then every block's queries, gathered per event
    n_rows = objects.num_rows
    offs, vals, base = [o_off], [o_val], o_off[-1]
    for b in blocks:
        offs.append(base + b["off"][1:])
        vals.append(b["val"].astype(np.int32))
        base += b["off"][-1]
    row = np.empty(n, np.int64)
    row[is_obj] = src_rows
    row[is_q] = n_rows + q
    offsets, values = csr_take(np.concatenate(offs), np.concatenate(vals), row)
    info = object_reuse(n_obj, n_rows)
    lengths = np.concatenate([np.diff(b["off"]) for b in blocks])
    info["query_keywords_mean"] = float(lengths.mean()) if n_q else float("nan")
    events, warmup = Events(cols, offsets, values), n_warm
    if "ctq" in types:
        events, warmup = with_ctq_reports(events, warmup)
        info["ctq_reports"] = int(((events.kind == SNAPSHOT) & np.isfinite(events.step)).sum())
    return Workload(events, warmup=warmup, info=info, drift=drift)


def with_ctq_reports(events: Events, warmup: int | None = None):
    """The stream with each CTQ's report events added (module docstring), seqs renumbered; with
    `warmup`, also the warm-up's new length (the events before the first measured one)."""
    regs = np.flatnonzero((events.kind == INSERT) & (events.family == TERMS))
    if len(regs) == 0:
        return events if warmup is None else (events, warmup)
    last_ts = float(events.ts.max())
    dels = np.flatnonzero((events.kind == DELETE) & (events.family == TERMS))
    first_del: dict[int, float] = {}
    for i in dels[::-1]:
        first_del[int(events.id[i])] = float(events.ts[i])
    src, num, at = [], [], []
    for i in regs:
        t_reg, step, life = float(events.ts[i]), float(events.step[i]), float(events.tau[i])
        end = min(t_reg + life, last_ts)
        stop = first_del.get(int(events.id[i]), np.inf)
        j = 1
        while t_reg + j * step <= end and t_reg + j * step < stop:
            src.append(i), num.append(j), at.append(t_reg + j * step)
            j += 1
    reports = events.take(np.asarray(src, np.int64))
    reports.cols["kind"] = np.full(len(src), SNAPSHOT, np.int8)
    reports.cols["step"] = np.asarray(num, np.float64)
    reports.cols["tau"] = reports.win.copy()
    reports.cols["ts"] = np.asarray(at, np.float64)
    # a report goes after every event of its time or earlier: order by (time, reports last, position)
    merged = Events.concat([events, reports])
    n = len(events)
    pos = np.r_[np.arange(n), np.full(len(src), n)]
    order = np.lexsort((pos, np.r_[np.zeros(n, np.int8), np.ones(len(src), np.int8)], merged.ts))
    merged = merged.take(order)
    merged.cols["seq"] = np.arange(len(merged), dtype=np.int64)
    if warmup is None:
        return merged
    new_warmup = int(np.flatnonzero(order == warmup)[0]) if warmup < n else len(merged)
    return merged, new_warmup
