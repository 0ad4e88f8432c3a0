"""Workloads: PS2Stream's STS query sets and event mix over a prepared dataset.

STS-Q1: square ranges with sides uniform in [1, 50] km, keywords drawn by term frequency.
STS-Q2: sides in [1, 100] km and at least one keyword outside the top 1% most frequent terms.
STS-Q3: the extent cut into 10 x 10 equal regions, each region using Q1 or Q2 (a seeded coin).
A query is centred on a random object of the dataset and draws its 1-3 keywords from that
object's terms (frequency-weighted), so queries follow the data's spatio-textual correlation;
AND or OR with equal odds.

Event mix: a warm-up inserts mu queries (interleaved with objects, no deletions) and is the
strategies' fitting sample; then inserts and deletes alternate with about `objects_per_update`
objects per update. A query lives N(mu, (0.2 mu)^2) subsequent insertions, so about mu stay live
(warm-up queries keep a proportional share of their lifetime, as if the stream had been running).
Everything is vectorised numpy, deterministic for a seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import pyarrow as pa

from harness.events import AND, DELETE, INSERT, OBJECT, OR, RANGE, Events, csr_take, list_to_csr

PROFILES = ("q1", "q2", "q3")


@dataclass
class WorkloadConfig:
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
    q1_side_km_min: float = 1.0
    q1_side_km_max: float = 50.0
    q2_side_km_min: float = 1.0
    q2_side_km_max: float = 100.0
    rare_top_fraction: float = 0.01  # Q2: a keyword outside this top fraction of terms
    regions_per_side: int = 10  # Q3
    q2_region_fraction: float = 0.5  # Q3
    seed_offset: int = 0
    note: Optional[str] = None


def validate_workload_config(cfg) -> None:
    def bad(field, value, allowed):
        raise ValueError(f"workload.{field}={value!r} is invalid; allowed: {allowed}")

    if cfg.profile not in PROFILES:
        bad("profile", cfg.profile, ", ".join(PROFILES))
    if cfg.family != "range":
        bad("family", cfg.family, "range (kNN, top-k and snapshot workloads arrive with their families)")
    for f in ("queries", "updates"):
        if getattr(cfg, f) < 0:
            bad(f, getattr(cfg, f), "an integer >= 0")
    if cfg.queries < 1:
        bad("queries", cfg.queries, "an integer >= 1")
    if not 1 <= cfg.keywords_min <= cfg.keywords_max:
        bad("keywords_min/keywords_max", (cfg.keywords_min, cfg.keywords_max), "1 <= min <= max")
    if not 0.0 <= cfg.or_fraction <= 1.0:
        bad("or_fraction", cfg.or_fraction, "a number in [0, 1]")
    if cfg.objects_per_update < 0 or cfg.warmup_objects_per_query < 0:
        bad("objects_per_update", cfg.objects_per_update, "a number >= 0")
    for p in ("q1", "q2"):
        lo, hi = getattr(cfg, f"{p}_side_km_min"), getattr(cfg, f"{p}_side_km_max")
        if not 0 < lo <= hi:
            bad(f"{p}_side_km_min/max", (lo, hi), "0 < min <= max")


@dataclass
class Workload:
    events: Events  # the whole ordered stream
    warmup: int  # the first `warmup` events are the warm-up prefix (the fitting sample)

    @property
    def sample(self) -> Events:
        return self.events.take(np.arange(self.warmup))


def _pick_keywords(rng, src_off, src_val, df, k, rare_needed, rare_cut):
    """k distinct terms per query from its source object's terms, frequency-weighted, via an
    exponential race (the k smallest Exp(1)/weight); a rare term is forced where required."""
    n = len(k)
    lengths = np.diff(src_off)
    owner = np.repeat(np.arange(n), lengths)
    weight = np.log1p(df[src_val].astype(np.float64)) + 1e-9
    race = rng.exponential(size=len(src_val)) / weight
    is_rare = src_val >= rare_cut
    # Q2: the first-finishing rare term of a query wins outright.
    race_rare = np.where(is_rare, race, np.inf)
    best_rare = np.full(n, np.inf)
    np.minimum.at(best_rare, owner, race_rare)
    force = rare_needed[owner] & is_rare & (race_rare == best_rare[owner])
    race = np.where(force, -1.0, race)
    order = np.lexsort((race, owner))
    rank = np.arange(len(order)) - np.repeat(src_off[:-1], lengths)
    chosen = order[rank < np.repeat(np.minimum(k, lengths), lengths)]
    q_of = owner[chosen]
    terms = src_val[chosen].astype(np.int64)
    # Q2 queries whose source object has no rare term get one rare term from the corpus.
    has_rare = np.zeros(n, bool)
    np.logical_or.at(has_rare, owner, is_rare)
    lacking = np.flatnonzero(rare_needed & ~has_rare)
    if len(lacking) and rare_cut < len(df):
        p = df[rare_cut:].astype(np.float64) + 1.0
        extra = rare_cut + rng.choice(len(p), size=len(lacking), p=p / p.sum())
        # replace the query's most frequent chosen term (or add when it has room)
        q_of = np.concatenate([q_of, lacking])
        terms = np.concatenate([terms, extra])
    # sort (query, term), drop duplicates, keep at most k (dropping the most frequent extras)
    order = np.lexsort((-terms, q_of))
    q_of, terms = q_of[order], terms[order]
    keep = np.ones(len(terms), bool)
    keep[1:] = (q_of[1:] != q_of[:-1]) | (terms[1:] != terms[:-1])
    q_of, terms = q_of[keep], terms[keep]
    first = np.searchsorted(q_of, np.arange(n))
    rank = np.arange(len(q_of)) - first[q_of]
    keep = rank < k[q_of]
    q_of, terms = q_of[keep], terms[keep]
    order = np.lexsort((terms, q_of))
    q_of, terms = q_of[order], terms[order]
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(q_of, minlength=n), out=offsets[1:])
    return offsets, terms.astype(np.int32)


def _queries(cfg, rng, objects: pa.Table, df: np.ndarray, extent, n: int):
    """n query payloads: centre, square rectangle, keywords (CSR), operator."""
    ox = objects.column("x").to_numpy()
    oy = objects.column("y").to_numpy()
    o_off, o_val = list_to_csr(objects.column("terms"))
    src = rng.integers(0, len(ox), size=n)
    cx, cy = ox[src], oy[src]
    if cfg.profile == "q3":
        side = cfg.regions_per_side
        xmin, ymin, xmax, ymax = extent
        rx = np.clip(((cx - xmin) / max(xmax - xmin, 1e-9) * side).astype(np.int64), 0, side - 1)
        ry = np.clip(((cy - ymin) / max(ymax - ymin, 1e-9) * side).astype(np.int64), 0, side - 1)
        region_q2 = np.random.default_rng(rng.integers(1 << 62)).random(side * side) < cfg.q2_region_fraction
        is_q2 = region_q2[ry * side + rx]
    else:
        is_q2 = np.full(n, cfg.profile == "q2")
    lo = np.where(is_q2, cfg.q2_side_km_min, cfg.q1_side_km_min)
    hi = np.where(is_q2, cfg.q2_side_km_max, cfg.q1_side_km_max)
    half = (lo + rng.random(n) * (hi - lo)) / 2.0
    k = rng.integers(cfg.keywords_min, cfg.keywords_max + 1, size=n)
    src_off, src_val = csr_take(o_off, o_val, src)
    rare_cut = max(1, int(np.ceil(cfg.rare_top_fraction * len(df))))
    t_off, t_val = _pick_keywords(rng, src_off, src_val, df, k, is_q2, rare_cut)
    op = np.where((rng.random(n) < cfg.or_fraction) & (np.diff(t_off) > 1), OR, AND).astype(np.int8)
    return dict(x=cx, y=cy, xmin=cx - half, ymin=cy - half, xmax=cx + half, ymax=cy + half, op=op), t_off, t_val


def build_workload(objects: pa.Table, term_df: np.ndarray, extent, cfg, seed: int) -> Workload:
    """The ordered event stream of a range-subscription workload (warm-up first)."""
    validate_workload_config(cfg)
    rng = np.random.default_rng([int(seed), int(cfg.seed_offset), 0x5757])
    mu = int(cfg.queries)
    n_new = int(cfg.updates) // 2  # measured insertions; about as many deletions
    n_q = mu + n_new
    life = np.maximum(1, np.rint(rng.normal(mu, cfg.lifetime_sd * mu, size=n_q))).astype(np.int64)
    expiry = np.arange(n_q) + life
    # The warm-up stands in for a stream that has been running: warm-up query i keeps the share
    # (i + 1) / mu of its lifetime after the warm-up, so deletions start at once and spread over
    # the next ~mu insertions, as in steady state (no bunch of expired queries at the first slot).
    warm = np.arange(min(mu, n_q))
    expiry[warm] = mu + np.maximum(0, np.rint(life[warm] * (warm + 1) / mu)).astype(np.int64)
    # update timeline as (slot, sub-order, query): deletions due at slot j come before insertion j
    dead = np.flatnonzero(expiry < n_q)
    slot = np.concatenate([np.arange(n_q), expiry[dead]])
    sub = np.concatenate([np.ones(n_q, np.int8), np.zeros(len(dead), np.int8)])
    qref = np.concatenate([np.arange(n_q), dead])
    kind = np.concatenate([np.full(n_q, INSERT, np.int8), np.full(len(dead), DELETE, np.int8)])
    order = np.lexsort((qref, sub, slot))
    slot, qref, kind = slot[order], qref[order], kind[order]
    n_warm_updates = mu
    n_meas_updates = len(slot) - mu
    n_warm_obj = int(round(mu * cfg.warmup_objects_per_query))
    n_meas_obj = int(round(n_meas_updates * cfg.objects_per_update))

    def interleave(n_upd, n_obj):
        is_upd = np.zeros(n_upd + n_obj, bool)
        is_upd[rng.choice(n_upd + n_obj, size=n_upd, replace=False)] = True
        return is_upd

    is_upd = np.concatenate([interleave(n_warm_updates, n_warm_obj), interleave(n_meas_updates, n_meas_obj)])
    n_events = len(is_upd)
    upd_pos = np.flatnonzero(is_upd)
    obj_pos = np.flatnonzero(~is_upd)
    n_obj = len(obj_pos)

    payload, q_off, q_val = _queries(cfg, rng, objects, term_df, extent, n_q)
    src_rows = np.arange(n_obj) % objects.num_rows  # objects in time order, cycled if needed
    o_off, o_val = list_to_csr(objects.column("terms"))
    ob_off, ob_val = csr_take(o_off, o_val, src_rows)
    qb_off, qb_val = csr_take(q_off, q_val, qref)

    cols = {
        "seq": np.arange(n_events, dtype=np.int64),
        "kind": np.empty(n_events, np.int8),
        "family": np.full(n_events, -1, np.int8),
        "id": np.empty(n_events, np.int64),
        "x": np.empty(n_events), "y": np.empty(n_events),
        "xmin": np.full(n_events, np.nan), "ymin": np.full(n_events, np.nan),
        "xmax": np.full(n_events, np.nan), "ymax": np.full(n_events, np.nan),
        "op": np.zeros(n_events, np.int8),
        "k": np.zeros(n_events, np.int32),
        "alpha": np.zeros(n_events, np.float32),
    }
    cols["kind"][obj_pos] = OBJECT
    cols["id"][obj_pos] = np.arange(n_obj)
    cols["x"][obj_pos] = objects.column("x").to_numpy()[src_rows]
    cols["y"][obj_pos] = objects.column("y").to_numpy()[src_rows]
    cols["kind"][upd_pos] = kind
    cols["family"][upd_pos] = RANGE
    cols["id"][upd_pos] = qref
    for name in ("x", "y", "xmin", "ymin", "xmax", "ymax", "op"):
        cols[name][upd_pos] = payload[name][qref]
    ts_obj = objects.column("ts").to_numpy()[src_rows]
    if objects.num_rows and n_obj > objects.num_rows:  # cycled: keep time increasing
        span = float(objects.column("ts").to_numpy()[-1] - objects.column("ts").to_numpy()[0]) + 1.0
        ts_obj = ts_obj + span * (np.arange(n_obj) // objects.num_rows)
    ts = np.full(n_events, -np.inf)
    ts[obj_pos] = ts_obj
    ts = np.maximum.accumulate(ts)
    cols["ts"] = np.where(np.isfinite(ts), ts, ts_obj[0] if n_obj else 0.0)

    lengths = np.zeros(n_events, np.int64)
    lengths[obj_pos] = np.diff(ob_off)
    lengths[upd_pos] = np.diff(qb_off)
    offsets = np.zeros(n_events + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = np.empty(offsets[-1], np.int32)
    for pos, off, val in ((obj_pos, ob_off, ob_val), (upd_pos, qb_off, qb_val)):
        dest = np.repeat(offsets[pos], np.diff(off)) + (np.arange(len(val)) - np.repeat(off[:-1], np.diff(off)))
        values[dest] = val
    return Workload(Events(cols, offsets, values), warmup=n_warm_updates + n_warm_obj)
