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

Drift (`drift`, issue 4): the measured part of the stream can drift away from the warm-up that
the strategies were fitted on. The warm-up, the event timeline (which event is an object, an
insert or a delete, ids, times) and, with drift=none, every byte of the stream are those of the
undrifted workload; a drift only rewrites payloads (locations, rectangles, keywords) of measured
objects and of queries inserted in the measured part, so a delete still carries its insert's
payload. The drift begins at `drift_start` (a fraction of the measured events).
- q3_switch (PS2Stream Sec. 7, Fig. 16, STS-US-Q3): from the drift start and then every
  `drift_every` query insertions, another `drift_fraction` of the Q3 regions switch between Q1
  and Q2 (regions taken in a seeded random order, wrapping round, so they switch back later);
  a switched query keeps its source object, k, its side's uniform draw and its AND/OR coin.
- hotspot_objects / hotspot_queries (SSTD Sec. 7.6, object- and continuous-query-insertion
  imbalance): a square of side `hotspot_region_km` around a random object; the share of measured
  objects (or query insertions) replaced by objects of that square (queries: re-centred on them,
  keywords re-drawn from their terms) ramps linearly from 0 at the drift start to
  `hotspot_fraction` at the end of the stream.
- scale (Tornado Sec. 6.4): after the drift start a `scale_fraction` of the objects and query
  insertions get every coordinate scaled by `scale_factor` about the extent's min corner, i.e.
  the workload crowds into a corner area and onto fewer workers of a static partitioning.
Drift draws use their own seeded generators, never the base one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import pyarrow as pa

from harness.core.events import AND, DELETE, INSERT, OBJECT, OR, RANGE, Events, csr_take, list_to_csr

PROFILES = ("q1", "q2", "q3")
DRIFTS = ("none", "q3_switch", "hotspot_objects", "hotspot_queries", "scale")
DRIFT_FIELDS = ("drift", "drift_start", "drift_every", "drift_fraction", "hotspot_fraction", "hotspot_region_km",
                "hotspot_seed", "scale_factor", "scale_fraction")


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
    # drift of the measured part (module docstring); the warm-up never drifts
    drift: str = "none"  # none | q3_switch | hotspot_objects | hotspot_queries | scale
    drift_start: float = 0.2  # fraction of the measured events before the drift begins
    drift_every: Optional[int] = None  # q3_switch: query insertions between switches; None = queries // 4
    drift_fraction: float = 0.1  # q3_switch: share of the regions switching at each drift point
    hotspot_fraction: float = 0.5  # hotspot_*: share relocated at the end of the stream (linear ramp)
    hotspot_region_km: float = 100.0  # hotspot_*: side of the hot square
    hotspot_seed: Optional[int] = None  # hotspot_*: fixes the hot square across seeds; None = from the seed
    scale_factor: float = 0.5  # scale: sf (Tornado: .4 to .7)
    scale_fraction: float = 1.0  # scale: share of the events after the drift start that move


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
    if cfg.drift not in DRIFTS:
        bad("drift", cfg.drift, ", ".join(DRIFTS))
    if cfg.drift == "q3_switch" and cfg.profile != "q3":
        bad("drift", cfg.drift, f"q3_switch only with profile q3 (profile is {cfg.profile!r}); or none, hotspot_objects, hotspot_queries, scale")
    if not 0.0 <= cfg.drift_start < 1.0:
        bad("drift_start", cfg.drift_start, "a number in [0, 1)")
    if cfg.drift_every is not None and cfg.drift_every < 1:
        bad("drift_every", cfg.drift_every, "an integer >= 1, or null for queries // 4")
    if not 0.0 < cfg.drift_fraction <= 1.0:
        bad("drift_fraction", cfg.drift_fraction, "a number in (0, 1]")
    if not 0.0 <= cfg.hotspot_fraction <= 1.0:
        bad("hotspot_fraction", cfg.hotspot_fraction, "a number in [0, 1]")
    if not cfg.hotspot_region_km > 0:
        bad("hotspot_region_km", cfg.hotspot_region_km, "a number > 0 (km)")
    if not 0.0 < cfg.scale_factor <= 1.0:
        bad("scale_factor", cfg.scale_factor, "a number in (0, 1] (Tornado: .4 to .7)")
    if not 0.0 <= cfg.scale_fraction <= 1.0:
        bad("scale_fraction", cfg.scale_fraction, "a number in [0, 1]")


@dataclass
class Workload:
    events: Events  # the whole ordered stream
    warmup: int  # the first `warmup` events are the warm-up prefix (the fitting sample)
    drift: Optional[dict] = None  # what the drift did (kind, start event, drift points, regions)

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


def _q3_region(cfg, extent, x, y):
    """The Q3 region (row-major index on the regions_per_side^2 grid) of each point."""
    side = cfg.regions_per_side
    xmin, ymin, xmax, ymax = extent
    rx = np.clip(((x - xmin) / max(xmax - xmin, 1e-9) * side).astype(np.int64), 0, side - 1)
    ry = np.clip(((y - ymin) / max(ymax - ymin, 1e-9) * side).astype(np.int64), 0, side - 1)
    return ry * side + rx


def _query_payload(cfg, rng, objects, df, src, is_q2, u, k, coin=None):
    """Payloads of queries centred on objects `src` given their draws (side uniform u, keyword count
    k, AND/OR coin); keywords are picked with `rng`, and the coin is drawn after them when None (the
    base workload's draw order, which must not change)."""
    ox = objects.column("x").to_numpy()
    oy = objects.column("y").to_numpy()
    o_off, o_val = list_to_csr(objects.column("terms"))
    cx, cy = ox[src], oy[src]
    lo = np.where(is_q2, cfg.q2_side_km_min, cfg.q1_side_km_min)
    hi = np.where(is_q2, cfg.q2_side_km_max, cfg.q1_side_km_max)
    half = (lo + u * (hi - lo)) / 2.0
    src_off, src_val = csr_take(o_off, o_val, src)
    rare_cut = max(1, int(np.ceil(cfg.rare_top_fraction * len(df))))
    t_off, t_val = _pick_keywords(rng, src_off, src_val, df, k, is_q2, rare_cut)
    if coin is None:
        coin = rng.random(len(src)) < cfg.or_fraction
    op = np.where(coin & (np.diff(t_off) > 1), OR, AND).astype(np.int8)
    payload = dict(x=cx, y=cy, xmin=cx - half, ymin=cy - half, xmax=cx + half, ymax=cy + half, op=op)
    return payload, t_off, t_val, coin


def _queries(cfg, rng, objects: pa.Table, df: np.ndarray, extent, n: int):
    """n query payloads: centre, square rectangle, keywords (CSR), operator; and the draws behind
    them (`info`), so that a drift can re-make a query with another type or centre."""
    src = rng.integers(0, objects.num_rows, size=n)
    region_q2 = None
    if cfg.profile == "q3":
        ox = objects.column("x").to_numpy()
        oy = objects.column("y").to_numpy()
        region = _q3_region(cfg, extent, ox[src], oy[src])
        side = cfg.regions_per_side
        region_q2 = np.random.default_rng(rng.integers(1 << 62)).random(side * side) < cfg.q2_region_fraction
        is_q2 = region_q2[region]
    else:
        is_q2 = np.full(n, cfg.profile == "q2")
    u = rng.random(n)
    k = rng.integers(cfg.keywords_min, cfg.keywords_max + 1, size=n)
    payload, t_off, t_val, coin = _query_payload(cfg, rng, objects, df, src, is_q2, u, k)
    info = dict(src=src, is_q2=is_q2, u=u, k=k, coin=coin, region_q2=region_q2)
    return payload, t_off, t_val, info


def _csr_replace(offsets, values, rows, new_offsets, new_values):
    """The CSR array with `rows` replaced by the rows of (new_offsets, new_values)."""
    n = len(offsets) - 1
    both_off = np.concatenate([offsets, offsets[-1] + new_offsets[1:]])
    both_val = np.concatenate([values, new_values]).astype(values.dtype, copy=False)
    pick = np.arange(n, dtype=np.int64)
    pick[rows] = n + np.arange(len(rows))
    return csr_take(both_off, both_val, pick)


def _hot_square(cfg, objects, extent, seed: int):
    """SSTD's random hot region: a square of side hotspot_region_km around a random object (so it
    is populated), shifted inside the extent; returns its bounds and the objects inside it."""
    rng = np.random.default_rng([int(cfg.hotspot_seed), 0x4075] if cfg.hotspot_seed is not None
                                else [int(seed), int(cfg.seed_offset), 0x4075])
    ox = objects.column("x").to_numpy()
    oy = objects.column("y").to_numpy()
    c = int(rng.integers(objects.num_rows))
    xmin, ymin, xmax, ymax = extent
    side = float(cfg.hotspot_region_km)
    x0 = min(max(ox[c] - side / 2, xmin), max(xmin, xmax - side))
    y0 = min(max(oy[c] - side / 2, ymin), max(ymin, ymax - side))
    rect = (float(x0), float(y0), float(x0 + side), float(y0 + side))
    inside = np.flatnonzero((ox >= rect[0]) & (ox <= rect[2]) & (oy >= rect[1]) & (oy <= rect[3]))
    return rect, inside


def _ramp(cfg, t):
    """Hot share at measured-stream position t in [0, 1): 0 before drift_start, then linear up to
    hotspot_fraction at the end."""
    s = cfg.drift_start
    return cfg.hotspot_fraction * np.clip((t - s) / (1.0 - s), 0.0, None) * (t >= s)


def _drift_rng(cfg, seed: int, tag: int):
    """A generator of its own per drift part, so the base workload's draws never shift."""
    return np.random.default_rng([int(seed), int(cfg.seed_offset), 0xD21F7, tag])


def _drift_queries(cfg, seed, objects, df, extent, payload, q_off, q_val, qinfo, meas, pos, start_event, frac):
    """Apply the query side of the drift to the measured insertions `meas` (query ids, inserted at
    event positions `pos`, at measured-stream fraction `frac`). Payloads are per query, so a delete
    keeps its insert's payload. Returns the new keyword CSR and what was done."""
    info = {}
    after = pos >= start_event

    def remake(rows, src, is_q2, rng):
        nonlocal q_off, q_val
        new, t_off, t_val, _ = _query_payload(cfg, rng, objects, df, src, is_q2, qinfo["u"][rows], qinfo["k"][rows],
                                              coin=qinfo["coin"][rows])
        for name, col in new.items():
            payload[name][rows] = col
        q_off, q_val = _csr_replace(q_off, q_val, rows, t_off, t_val)

    if cfg.drift == "q3_switch":
        rng = _drift_rng(cfg, seed, 1)
        n_reg = cfg.regions_per_side ** 2
        m = max(1, int(round(cfg.drift_fraction * n_reg)))
        every = int(cfg.drift_every) if cfg.drift_every is not None else max(1, int(cfg.queries) // 4)
        order = rng.permutation(n_reg)  # regions switch in this order, m at a time, wrapping round
        rank = np.empty(n_reg, np.int64)
        rank[order] = np.arange(n_reg)
        n_switches = np.where(after, 1 + (np.cumsum(after) - 1) // every, 0)
        r = rank[_q3_region(cfg, extent, payload["x"][meas], payload["y"][meas])]
        # switches so far cover rank positions 0 .. n_switches*m - 1 (mod n_reg): times r was hit
        hits = np.maximum(0, (n_switches * m - r + n_reg - 1) // n_reg)
        rows = meas[hits % 2 == 1]
        remake(rows, qinfo["src"][rows], ~qinfo["is_q2"][rows], rng)
        n_points = int(n_switches.max()) if len(n_switches) else 0
        first = np.flatnonzero(after)[np.arange(n_points) * every] if n_points else np.zeros(0, np.int64)
        info.update(every=every, points=pos[first].tolist(),
                    regions=[np.sort(order[(i * m + np.arange(m)) % n_reg]).tolist() for i in range(n_points)],
                    base_q2=np.flatnonzero(qinfo["region_q2"]).tolist(), switched_queries=int(len(rows)))
    elif cfg.drift == "hotspot_queries":
        rng = _drift_rng(cfg, seed, 2)
        rect, inside = _hot_square(cfg, objects, extent, seed)
        rows = meas[rng.random(len(meas)) < _ramp(cfg, frac)]
        src = inside[rng.integers(len(inside), size=len(rows))]
        if cfg.profile == "q3":  # the new centre's region decides the type
            ox, oy = objects.column("x").to_numpy(), objects.column("y").to_numpy()
            is_q2 = qinfo["region_q2"][_q3_region(cfg, extent, ox[src], oy[src])]
        else:
            is_q2 = qinfo["is_q2"][rows]
        remake(rows, src, is_q2, rng)
        info.update(rect=list(rect), hot_sources=int(len(inside)), moved_queries=int(len(rows)))
    elif cfg.drift == "scale":
        rng = _drift_rng(cfg, seed, 3)
        rows = meas[after & (rng.random(len(meas)) < cfg.scale_fraction)]
        _scale(payload, rows, extent, cfg.scale_factor, ("x", "xmin", "xmax"), ("y", "ymin", "ymax"))
        info.update(moved_queries=int(len(rows)))
    return q_off, q_val, info


def _drift_objects(cfg, seed, objects, extent, src_rows, obj_x, obj_y, meas, pos, start_event, frac):
    """Apply the object side of the drift to the measured objects `meas` (object indices, at event
    positions `pos`, measured-stream fraction `frac`): the rows they take location and terms from,
    their coordinates, and what was done."""
    info = {}
    if cfg.drift == "hotspot_objects":
        rect, inside = _hot_square(cfg, objects, extent, seed)
        rng = _drift_rng(cfg, seed, 4)
        hot = meas[rng.random(len(meas)) < _ramp(cfg, frac)]
        src_rows = src_rows.copy()
        src_rows[hot] = inside[rng.integers(len(inside), size=len(hot))]
        obj_x = objects.column("x").to_numpy()[src_rows]
        obj_y = objects.column("y").to_numpy()[src_rows]
        info.update(rect=list(rect), hot_sources=int(len(inside)), moved_objects=int(len(hot)))
    elif cfg.drift == "scale":
        rng = _drift_rng(cfg, seed, 5)
        moved = meas[(pos >= start_event) & (rng.random(len(meas)) < cfg.scale_fraction)]
        xy = {"x": obj_x, "y": obj_y}
        _scale(xy, moved, extent, cfg.scale_factor, ("x",), ("y",))
        xmin, ymin, xmax, ymax = extent
        sf = cfg.scale_factor
        info.update(moved_objects=int(len(moved)), factor=sf,
                    rect=[float(v) for v in (xmin, ymin, xmin + sf * (xmax - xmin), ymin + sf * (ymax - ymin))])
    return src_rows, obj_x, obj_y, info


def _scale(cols, rows, extent, sf, xs, ys):
    """Tornado's scale-factor drift: coordinates scaled by sf about the extent's min corner."""
    for names, lo in ((xs, extent[0]), (ys, extent[1])):
        for name in names:
            cols[name][rows] = lo + sf * (cols[name][rows] - lo)


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

    payload, q_off, q_val, qinfo = _queries(cfg, rng, objects, term_df, extent, n_q)
    src_rows = np.arange(n_obj) % objects.num_rows  # objects in time order, cycled if needed
    loc_rows = src_rows  # where an object event takes its location and terms from (its time: src_rows)
    obj_x = objects.column("x").to_numpy()[src_rows]
    obj_y = objects.column("y").to_numpy()[src_rows]
    warmup = n_warm_updates + n_warm_obj
    drift = None
    if cfg.drift != "none":
        n_meas = max(n_events - warmup, 1)
        start_event = warmup + int(np.ceil(cfg.drift_start * (n_events - warmup)))
        drift = dict(kind=cfg.drift, start_event=start_event)
        ins = kind == INSERT
        ins_pos = np.empty(n_q, np.int64)
        ins_pos[qref[ins]] = upd_pos[ins]
        meas_q = np.arange(mu, n_q)  # queries inserted after the warm-up
        q_off, q_val, info = _drift_queries(cfg, seed, objects, term_df, extent, payload, q_off, q_val, qinfo, meas_q,
                                            ins_pos[meas_q], start_event, (ins_pos[meas_q] - warmup) / n_meas)
        drift.update(info)
        meas_o = np.arange(n_warm_obj, n_obj)  # objects after the warm-up
        loc_rows, obj_x, obj_y, info = _drift_objects(cfg, seed, objects, extent, src_rows, obj_x, obj_y, meas_o,
                                                      obj_pos[meas_o], start_event, (obj_pos[meas_o] - warmup) / n_meas)
        drift.update(info)
    o_off, o_val = list_to_csr(objects.column("terms"))
    ob_off, ob_val = csr_take(o_off, o_val, loc_rows)
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
    cols["x"][obj_pos] = obj_x
    cols["y"][obj_pos] = obj_y
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
    return Workload(Events(cols, offsets, values), warmup=warmup, drift=drift)
