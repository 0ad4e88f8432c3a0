"""Range-subscription workloads: PS2Stream's STS query sets and event mix over a prepared dataset.

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
  and Q2 (regions taken in a seeded random order, wrapping round, so they switch back later),
  and none from `drift_end` on (default 1: to the end); a switched query keeps its source
  object, k, its side's uniform draw and its AND/OR coin.
- hotspot_objects / hotspot_queries (SSTD Sec. 7.6, object- and continuous-query-insertion
  imbalance): a square of side `hotspot_region_km` around a random object; the share of measured
  objects (or query insertions) replaced by objects of that square (queries: re-centred on them,
  keywords re-drawn from their terms) ramps linearly from 0 at the drift start to
  `hotspot_fraction` at `drift_end` (default: the end of the stream) and holds there after it.
- scale (Tornado Sec. 6.4): after the drift start a `scale_fraction` of the objects and query
  insertions get every coordinate scaled by `scale_factor` about the extent's min corner, i.e.
  the workload crowds into a corner area and onto fewer workers of a static partitioning.
Drift draws use their own seeded generators, never the base one.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from datasets.workloads.config import DRIFTS, PROFILES, Workload
from datasets.workloads.drift import drift_objects, drift_queries, validate_hot_spot
from datasets.workloads.sts import sts_queries
from harness.core.events import DELETE, INSERT, OBJECT, RANGE, Events, csr_take, list_to_csr



def validate_range_workload(cfg) -> None:
    def bad(field, value, allowed):
        raise ValueError(f"workload.{field}={value!r} is invalid; allowed: {allowed}")

    if cfg.profile not in PROFILES:
        bad("profile", cfg.profile, ", ".join(PROFILES))
    if cfg.queries < 1:  # one check, so a negative value is told the real bound
        bad("queries", cfg.queries, "an integer >= 1")
    if cfg.updates < 0:
        bad("updates", cfg.updates, "an integer >= 0")
    if not 1 <= cfg.keywords_min <= cfg.keywords_max:
        bad("keywords_min/keywords_max", (cfg.keywords_min, cfg.keywords_max), "1 <= min <= max")
    if not 0.0 <= cfg.or_fraction <= 1.0:
        bad("or_fraction", cfg.or_fraction, "a number in [0, 1]")
    if cfg.keyword_rarity is not None and not 0.0 <= cfg.keyword_rarity <= 1.0:
        bad("keyword_rarity", cfg.keyword_rarity, "a number in [0, 1] (0: the most frequent terms), or null")
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
    validate_hot_spot(cfg)
    if cfg.drift_every is not None and cfg.drift_every < 1:
        bad("drift_every", cfg.drift_every, "an integer >= 1, or null for `queries` (PS2Stream: every mu insertions)")
    if not 0.0 < cfg.drift_fraction <= 1.0:
        bad("drift_fraction", cfg.drift_fraction, "a number in (0, 1]")
    if not 0.0 < cfg.scale_factor <= 1.0:
        bad("scale_factor", cfg.scale_factor, "a number in (0, 1] (Tornado: .4 to .7)")
    if not 0.0 <= cfg.scale_fraction <= 1.0:
        bad("scale_fraction", cfg.scale_fraction, "a number in [0, 1]")


def build_workload(objects: pa.Table, term_df: np.ndarray, extent, cfg, seed: int) -> Workload:
    """The ordered event stream of a range-subscription workload (warm-up first): the plan's one
    chunk (`plan_workload`), the same stream its chunks make."""
    plan = plan_workload(objects, term_df, extent, cfg, seed)
    return Workload(plan.events(), warmup=plan.warmup, drift=plan.drift, info=plan.info)


def plan_workload(objects: pa.Table, term_df: np.ndarray, extent, cfg, seed: int) -> "RangePlan":
    """Every random draw of the workload and its per-query state, without the per-event columns:
    `RangePlan.chunks` writes the stream from it a chunk of positions at a time, so a stream of
    tens of millions of events (PS2Stream's mu = 5M with 2 mu updates: about 70M) is never whole in
    memory while it is generated (issue 51). The draws are made in one order, whatever the chunks."""
    validate_range_workload(cfg)
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
    del life, warm
    # update timeline as (slot, sub-order, query): deletions due at slot j come before insertion j
    dead = np.flatnonzero(expiry < n_q)
    slot = np.concatenate([np.arange(n_q), expiry[dead]])
    sub = np.concatenate([np.ones(n_q, np.int8), np.zeros(len(dead), np.int8)])
    qref = np.concatenate([np.arange(n_q), dead])
    kind = np.concatenate([np.full(n_q, INSERT, np.int8), np.full(len(dead), DELETE, np.int8)])
    del expiry, dead
    order = np.lexsort((qref, sub, slot))
    qref, kind = qref[order], kind[order]
    n_slots = len(slot)
    del slot, sub, order
    n_warm_updates = mu
    n_meas_updates = n_slots - mu
    n_warm_obj = int(round(mu * cfg.warmup_objects_per_query))
    n_meas_obj = int(round(n_meas_updates * cfg.objects_per_update))

    def interleave(n_upd, n_obj):
        is_upd = np.zeros(n_upd + n_obj, bool)
        is_upd[rng.choice(n_upd + n_obj, size=n_upd, replace=False)] = True
        return is_upd

    is_upd = np.concatenate([interleave(n_warm_updates, n_warm_obj), interleave(n_meas_updates, n_meas_obj)])
    n_events = len(is_upd)
    upd_pos = np.flatnonzero(is_upd)
    n_obj = n_events - len(upd_pos)

    payload, q_off, q_val, qinfo = sts_queries(cfg, rng, objects, term_df, extent, n_q)
    if cfg.drift == "none":
        del is_upd
    warmup = n_warm_updates + n_warm_obj
    drift = moved = None
    if cfg.drift != "none":
        obj_pos = np.flatnonzero(~is_upd)
        src_rows = np.arange(n_obj) % objects.num_rows
        obj_x = objects.column("x").to_numpy()[src_rows]
        obj_y = objects.column("y").to_numpy()[src_rows]
        n_meas = max(n_events - warmup, 1)
        start_event = warmup + int(np.ceil(cfg.drift_start * (n_events - warmup)))
        drift = dict(kind=cfg.drift, start_event=start_event)
        ins = kind == INSERT
        ins_pos = np.empty(n_q, np.int64)
        ins_pos[qref[ins]] = upd_pos[ins]
        meas_q = np.arange(mu, n_q)  # queries inserted after the warm-up
        q_off, q_val, info = drift_queries(cfg, seed, objects, term_df, extent, payload, q_off, q_val, qinfo, meas_q,
                                            ins_pos[meas_q], start_event, (ins_pos[meas_q] - warmup) / n_meas)
        drift.update(info)
        meas_o = np.arange(n_warm_obj, n_obj)  # objects after the warm-up
        loc_rows, obj_x, obj_y, info = drift_objects(cfg, seed, objects, extent, src_rows, obj_x, obj_y, meas_o,
                                                      obj_pos[meas_o], start_event, (obj_pos[meas_o] - warmup) / n_meas)
        drift.update(info)
        moved = (loc_rows, obj_x, obj_y)
    return RangePlan(objects, n_events, warmup, upd_pos, kind, qref, payload, q_off, q_val, moved, drift,
                     object_reuse(n_obj, objects.num_rows))


class RangePlan:
    """A range workload's draws (`plan_workload`) and the stream they make, a chunk at a time.

    Events are at positions 0..n_events-1; `upd_pos` are the updates' positions (the others are
    objects, in time order: object j is the dataset's row j mod rows, its id j), `kind`/`qref` the
    updates' kind and query, `payload`/`q_off`/`q_val` the queries'. `moved` holds a drift's
    relocated objects (rows, x, y), else None: an object's place is its dataset row's."""

    def __init__(self, objects, n_events, warmup, upd_pos, kind, qref, payload, q_off, q_val, moved, drift, info):
        self.n_events, self.warmup, self.drift, self.info = int(n_events), int(warmup), drift, info
        self.upd_pos, self.kind, self.qref = upd_pos, kind, qref
        self.payload, self.q_off, self.q_val, self.moved = payload, q_off, q_val, moved
        self.n_rows = objects.num_rows
        self.ox, self.oy = objects.column("x").to_numpy(), objects.column("y").to_numpy()
        self.ots = objects.column("ts").to_numpy()
        self.o_off, self.o_val = list_to_csr(objects.column("terms"))
        # cycled: each pass over the dataset shifts time by its span, so time keeps increasing
        self.span = float(self.ots[-1] - self.ots[0]) + 1.0 if self.n_rows else 0.0

    def check_normal(self) -> dict[str, int]:
        """What `normalise_workload` would fix in the stream, found from the timeline alone
        (datasets/workloads/anomalies.py): every query inserted once, deleted at most once and
        after its insert, with its insert's payload (both read `payload[qref]`), objects' ids
        0..n-1. The generator makes no anomaly: a count other than 0 is its bug, raised."""
        ins = self.kind == INSERT
        n_q = len(self.q_off) - 1
        first = np.full(n_q, -1, np.int64)
        first[self.qref[ins]] = np.flatnonzero(ins)
        dels = np.flatnonzero(~ins)
        orphan = int(np.count_nonzero(first[self.qref[dels]] > dels)) + len(dels) - len(np.unique(self.qref[dels]))
        bad = {"orphan_deletes": orphan, "duplicate_inserts": int(ins.sum()) - int(np.count_nonzero(first >= 0)),
               "reused_ids": 0, "duplicate_object_ids": 0, "delete_payloads_filled": 0}
        if any(bad.values()):
            raise RuntimeError(f"the range generator wrote an anomalous stream: {bad}")
        return bad

    def events(self, lo: int = 0, hi: int | None = None, carry: float = -np.inf) -> Events:
        """Positions lo..hi-1 of the stream. `carry`: the latest object time before `lo` (event
        time never decreases: an update takes the time of the last object before it); -inf: none."""
        hi = self.n_events if hi is None else min(int(hi), self.n_events)
        n = hi - lo
        u_lo, u_hi = (int(v) for v in np.searchsorted(self.upd_pos, [lo, hi]))
        upd = self.upd_pos[u_lo:u_hi] - lo
        is_obj = np.ones(n, np.bool_)
        is_obj[upd] = False
        obj = np.flatnonzero(is_obj)
        oid = np.arange(lo - u_lo, lo - u_lo + len(obj), dtype=np.int64)  # objects before lo: lo - u_lo
        src_rows = oid % self.n_rows if self.n_rows else oid
        if self.moved is None:
            loc_rows, obj_x, obj_y = src_rows, self.ox[src_rows], self.oy[src_rows]
        else:
            loc_rows, obj_x, obj_y = (a[oid] for a in self.moved)
        qref, kind = self.qref[u_lo:u_hi], self.kind[u_lo:u_hi]
        cols = {
            "seq": np.arange(lo, hi, dtype=np.int64),
            "kind": np.empty(n, np.int8),
            "family": np.full(n, -1, np.int8),
            "id": np.empty(n, np.int64),
            "x": np.empty(n), "y": np.empty(n),
            "xmin": np.full(n, np.nan), "ymin": np.full(n, np.nan),
            "xmax": np.full(n, np.nan), "ymax": np.full(n, np.nan),
            "op": np.zeros(n, np.int8),
            "k": np.zeros(n, np.int32),
            "alpha": np.zeros(n, np.float32),
        }
        cols["kind"][obj] = OBJECT
        cols["id"][obj] = oid
        cols["x"][obj] = obj_x
        cols["y"][obj] = obj_y
        cols["kind"][upd] = kind
        cols["family"][upd] = RANGE
        cols["id"][upd] = qref
        for name in ("x", "y", "xmin", "ymin", "xmax", "ymax", "op"):
            cols[name][upd] = self.payload[name][qref]
        ts_obj = self.ots[src_rows]
        if self.n_rows and oid[-1:].sum() >= self.n_rows:  # cycled: keep time increasing
            ts_obj = ts_obj + self.span * (oid // self.n_rows)
        ts = np.full(n, -np.inf)
        ts[obj] = ts_obj
        if n:
            ts[0] = max(ts[0], carry)
        ts = np.maximum.accumulate(ts)
        first_ts = self.ots[0] if self.n_rows and len(self.upd_pos) < self.n_events else 0.0
        cols["ts"] = np.where(np.isfinite(ts), ts, first_ts)  # updates before the first object: its time

        ob_off, ob_val = csr_take(self.o_off, self.o_val, loc_rows)
        qb_off, qb_val = csr_take(self.q_off, self.q_val, qref)
        lengths = np.zeros(n, np.int64)
        lengths[obj] = np.diff(ob_off)
        lengths[upd] = np.diff(qb_off)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        values = np.empty(offsets[-1], np.int32)
        for pos, off, val in ((obj, ob_off, ob_val), (upd, qb_off, qb_val)):
            dest = np.repeat(offsets[pos], np.diff(off)) + (np.arange(len(val)) - np.repeat(off[:-1], np.diff(off)))
            values[dest] = val
        return Events(cols, offsets, values)

    def chunks(self, rows: int):
        """The stream as consecutive Events of at most `rows` events each (the last may be
        shorter); their concatenation is `events()`, whatever `rows`."""
        if rows < 1:
            raise ValueError(f"chunk rows={rows!r} is invalid; allowed: an integer >= 1")
        carry = -np.inf
        for lo in range(0, self.n_events, int(rows)):
            ev = self.events(lo, lo + int(rows), carry)
            obj_ts = ev.ts[ev.kind == OBJECT]
            carry = max(carry, float(obj_ts.max())) if len(obj_ts) else carry
            yield ev


def object_reuse(n_object_events: int, n_dataset_objects: int) -> dict:
    """How far the workload cycled the dataset's objects (src_rows above), so a run on a dataset
    smaller than its workload says so instead of silently measuring repeats."""
    return {"workload_objects": int(n_object_events), "dataset_objects": int(n_dataset_objects),
            "objects_reused": max(0, int(n_object_events) - int(n_dataset_objects)),
            "object_reuse_factor": n_object_events / n_dataset_objects if n_dataset_objects else float("nan")}
