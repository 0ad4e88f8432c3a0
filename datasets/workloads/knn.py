"""Continuous kNN spatial-keyword subscriptions: a time-stamped stream over a prepared dataset.

`workload.protocol` picks one of two protocols (the family is the same, `knn`):

dkm (`knn_q`, DkM-SKS Sec. 5.1). The warm-up registers the `queries` initial subscriptions (INSERT
events, time-stamp 0) and then streams O_init = `init_objects` objects (time-stamp 0), so an initial
subscription's result is the exact kNN over O_init. Then come `timestamps` measured time-stamps
t = 1..T, each `deletes_per_ts` deletions (uniform over the subscriptions live before t; never more
than are live), `inserts_per_ts` insertions, then `objects_per_ts` objects, in that seq order. The
defaults keep the paper's 1,000 : 100 : 100 ratio at a tenth (100 : 10 : 10).

ckq (`ckq_q`, SSTD CKQ, Sec. 7.1). The same warm-up and time-stamps, but a subscription lives a
lifetime tau and is deleted at its insertion's time-stamp + tau; each deletion is replaced by an
insertion in the same time-stamp (deletions first, then the replacements, then the objects), so
exactly `queries` subscriptions are live throughout. `inserts_per_ts`/`deletes_per_ts` are not
used (the churn is the lifetime's: about queries / lifetime of each per time-stamp).

Decisions:
- Event time. `ts` is the time-stamp index (0.0 for the warm-up, t for time-stamp t), in both
  protocols: one time-stamp is one second of event time (DkM's 1,000 objects per time-stamp is the
  synthetic stream's 1,000 objects/s). The dataset's own times are not used; a stream is
  recognised as time-stamped by its integer times (harness/measure/timestamps.py).
- Lifetime (ckq). tau = `tau_hours` * `hour_s` seconds, rounded to whole time-stamps (at least 1),
  so a deletion falls exactly on insertion + tau. `hour_s` = None maps the measured span of T
  time-stamps to TW14's 31 days (744 h, spec 1.9): hour_s = T / 744, so tau = 72 h is ~9.7% of the
  span and the live set turns over ~10.3 times in the measured part (about 20.7 * queries updates
  whatever T is; set `hour_s` for a slower churn). The `tau` column is the lifetime in seconds.
  The warm-up subscriptions stand for a stream that has been running: their remaining lifetimes
  spread evenly over 1..L time-stamps (a seeded permutation), and their `tau` is that remaining
  lifetime, so every deletion is at insertion + tau and the churn is even (ceil or floor of
  queries / L per time-stamp) instead of a burst at L.
- A subscription: the location of a uniformly random dataset object; keywords = min(keywords_max,
  |o.terms|) distinct terms drawn uniformly (without replacement) from that same object's terms,
  sorted ascending; objects with fewer than `keywords_min` terms (so every object without terms)
  are redrawn; k uniform in [k_min, k_max]; op from `op` (knn_q: or, ckq_q: and, set by the
  configs; the protocol does not force it); rectangle = the dataset extent (radius infinite: no
  results yet); tau NaN (dkm). A deletion carries its insertion's payload.
- Ids: query ids 0..queries-1 for the initial subscriptions, then in insertion order; object ids
  0..n-1 in stream order. Objects are the dataset's in its order, cycled when the stream needs more
  (counted in `info` as objects reused, as range.py does).
- `timestamps` = None derives T = ceil(updates / (inserts_per_ts + deletes_per_ts)) (at least 1),
  for both protocols; `init_objects` = None means `queries`.

Deterministic for a seed; vectorised numpy, with one small loop per time-stamp (dkm deletions).
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from datasets.workloads.config import KNN_OPS, KNN_PROTOCOLS, Workload, check_k_and_keywords, invalid
from datasets.workloads.range import object_reuse
from harness.core.events import AND, DELETE, INSERT, KNN, OBJECT, OR, Events, csr_take, list_to_csr

SPAN_HOURS = 744.0  # TW14: August 2014, 31 days (spec 1.9)


def validate_knn_workload(cfg) -> None:
    bad = invalid
    if cfg.protocol not in KNN_PROTOCOLS:
        bad("protocol", cfg.protocol, ", ".join(KNN_PROTOCOLS))
    if cfg.op not in KNN_OPS:
        bad("op", cfg.op, ", ".join(KNN_OPS))
    if cfg.queries < 1:
        bad("queries", cfg.queries, "an integer >= 1")
    if cfg.updates < 0:
        bad("updates", cfg.updates, "an integer >= 0")
    if cfg.init_objects is not None and cfg.init_objects < 0:
        bad("init_objects", cfg.init_objects, "an integer >= 0, or null for queries")
    if cfg.objects_per_ts < 1:
        bad("objects_per_ts", cfg.objects_per_ts, "an integer >= 1")
    if cfg.inserts_per_ts < 0:
        bad("inserts_per_ts", cfg.inserts_per_ts, "an integer >= 0")
    if cfg.deletes_per_ts < 0:
        bad("deletes_per_ts", cfg.deletes_per_ts, "an integer >= 0")
    if cfg.timestamps is not None and cfg.timestamps < 1:
        bad("timestamps", cfg.timestamps, "an integer >= 1, or null for ceil(updates / (inserts_per_ts + deletes_per_ts))")
    if cfg.timestamps is None and cfg.inserts_per_ts + cfg.deletes_per_ts == 0:
        bad("timestamps", cfg.timestamps, "an integer >= 1 (null derives it from updates, which needs "
            "inserts_per_ts + deletes_per_ts >= 1)")
    check_k_and_keywords(cfg)
    if not cfg.tau_hours > 0:
        bad("tau_hours", cfg.tau_hours, "a number > 0 (paper hours; SSTD: 24-168)")
    if cfg.hour_s is not None and not cfg.hour_s > 0:
        bad("hour_s", cfg.hour_s, "a number > 0 (event seconds per paper hour), or null for timestamps / 744")
    if getattr(cfg, "drift", "none") != "none":
        bad("drift", cfg.drift, "none (the kNN generator has no drift)")


def n_timestamps(cfg) -> int:
    """The measured time-stamps: `timestamps`, or derived from `updates` (module docstring)."""
    if cfg.timestamps is not None:
        return int(cfg.timestamps)
    return max(1, math.ceil(int(cfg.updates) / (int(cfg.inserts_per_ts) + int(cfg.deletes_per_ts))))


def lifetime_ts(cfg, timestamps: int) -> int:
    """ckq: a subscription's lifetime in time-stamps (= seconds of event time)."""
    hour_s = cfg.hour_s if cfg.hour_s is not None else timestamps / SPAN_HOURS
    return max(1, int(round(float(cfg.tau_hours) * float(hour_s))))


def build_knn_workload(objects: pa.Table, term_df: np.ndarray, extent, cfg, seed: int) -> Workload:
    """The ordered event stream of a kNN-subscription workload (warm-up first; module docstring)."""
    validate_knn_workload(cfg)
    if objects.num_rows == 0:
        raise ValueError("the kNN workload needs a dataset with objects; this one has none")
    ss = np.random.SeedSequence([int(seed) & 0xFFFFFFFF, int(cfg.seed_offset) & 0xFFFFFFFF, 0x4B4E4E])
    rng_time, rng_q = (np.random.default_rng(s) for s in ss.spawn(2))
    mu = int(cfg.queries)
    T = n_timestamps(cfg)
    n_init = mu if cfg.init_objects is None else int(cfg.init_objects)
    per_ts = int(cfg.objects_per_ts)

    if cfg.protocol == "dkm":
        del_ts, del_q, ins_ts, n_q = _dkm_timeline(rng_time, mu, T, int(cfg.inserts_per_ts), int(cfg.deletes_per_ts))
        tau = np.full(n_q, np.nan)
    else:
        L = lifetime_ts(cfg, T)
        del_ts, del_q, ins_ts, tau = _ckq_timeline(rng_time, mu, T, L)
        n_q = len(ins_ts)

    # objects: O_init at time-stamp 0, then objects_per_ts per time-stamp
    n_obj = n_init + T * per_ts
    obj_ts = np.concatenate([np.zeros(n_init), np.repeat(np.arange(1, T + 1, dtype=np.float64), per_ts)])

    o_off, o_val = list_to_csr(objects.column("terms"))
    x, y, k, q_off, q_val = sampled_queries(rng_q, objects, o_off, o_val, n_q, cfg)

    # stream order: time-stamp, then deletions (0), insertions (1), objects (2), then id
    ts = np.concatenate([del_ts, ins_ts, obj_ts])
    sub = np.concatenate([np.zeros(len(del_ts), np.int8), np.ones(n_q, np.int8), np.full(n_obj, 2, np.int8)])
    ids = np.concatenate([del_q, np.arange(n_q, dtype=np.int64), np.arange(n_obj, dtype=np.int64)])
    if T < (1 << 20) and max(n_q, n_obj) < (1 << 40):  # one int64 key; three sorted runs merge fast
        key = ((ts.astype(np.int64) * 3 + sub) << np.int64(40)) | ids
        order = np.argsort(key, kind="stable")
    else:
        order = np.lexsort((ids, sub, ts))
    ts, sub, ids = ts[order], sub[order], ids[order]
    n_events = len(order)
    is_obj = sub == 2
    is_q = ~is_obj
    qid = ids[is_q]
    src_rows = np.arange(n_obj, dtype=np.int64) % objects.num_rows  # objects in dataset order, cycled
    oid = ids[is_obj]

    cols = {
        "seq": np.arange(n_events, dtype=np.int64),
        "ts": ts.astype(np.float64),
        "kind": np.where(sub == 0, DELETE, np.where(sub == 1, INSERT, OBJECT)).astype(np.int8),
        "family": np.where(is_obj, -1, KNN).astype(np.int8),
        "id": ids.astype(np.int64),
        "x": np.empty(n_events), "y": np.empty(n_events),
        "xmin": np.full(n_events, np.nan), "ymin": np.full(n_events, np.nan),
        "xmax": np.full(n_events, np.nan), "ymax": np.full(n_events, np.nan),
        "op": np.zeros(n_events, np.int8),
        "k": np.zeros(n_events, np.int32),
        "alpha": np.zeros(n_events, np.float32),
        "tau": np.full(n_events, np.nan),
    }
    obj_x = objects.column("x").to_numpy()
    obj_y = objects.column("y").to_numpy()
    cols["x"][is_obj] = obj_x[src_rows[oid]]
    cols["y"][is_obj] = obj_y[src_rows[oid]]
    cols["x"][is_q] = x[qid]
    cols["y"][is_q] = y[qid]
    for name, v in zip(("xmin", "ymin", "xmax", "ymax"), extent):
        cols[name][is_q] = float(v)
    cols["op"][is_q] = OR if cfg.op == "or" else AND
    cols["k"][is_q] = k[qid]
    cols["tau"][is_q] = tau[qid]

    # terms: one CSR of dataset rows then subscriptions, gathered per event
    n_rows = objects.num_rows
    all_off = np.concatenate([o_off, o_off[-1] + q_off[1:]])
    all_val = np.concatenate([o_val, q_val.astype(np.int32)])
    row = np.empty(n_events, np.int64)
    row[is_obj] = src_rows[oid]
    row[is_q] = n_rows + qid
    offsets, values = csr_take(all_off, all_val, row)

    obj_lens = np.diff(o_off)
    info = object_reuse(n_obj, n_rows)
    info["dataset_keywords_per_object"] = float(obj_lens.mean())
    info["query_keywords_mean"] = float(np.diff(q_off).mean()) if n_q else float("nan")
    return Workload(Events(cols, offsets, values), warmup=mu + n_init, info=info)


def _dkm_timeline(rng, mu: int, T: int, n_ins: int, n_del: int):
    """DkM: per time-stamp n_del deletions uniform over the live subscriptions, then n_ins insertions.
    Returns (deletion time-stamps, deleted qids, insertion time-stamp per qid, number of qids)."""
    n_q = mu + T * n_ins
    live = np.empty(n_q, np.int64)
    live[:mu] = np.arange(mu)
    n_live = mu
    del_ts, del_q = [], []
    next_q = mu
    for t in range(1, T + 1):
        d = min(n_del, n_live)
        if d:
            idx = rng.choice(n_live, size=d, replace=False)
            del_q.append(np.sort(live[idx]))
            del_ts.append(np.full(d, float(t)))
            # swap-remove: the tail's surviving entries fill the holes below the new end
            end = n_live - d
            hit = np.zeros(d, bool)
            hit[idx[idx >= end] - end] = True
            holes = idx[idx < end]
            live[holes] = live[end + np.flatnonzero(~hit)]
            n_live = end
        live[n_live:n_live + n_ins] = np.arange(next_q, next_q + n_ins)
        n_live += n_ins
        next_q += n_ins
    ins_ts = np.concatenate([np.zeros(mu), np.repeat(np.arange(1, T + 1, dtype=np.float64), n_ins)])
    cat = lambda parts, dt: np.concatenate(parts) if parts else np.zeros(0, dt)  # noqa: E731
    return cat(del_ts, np.float64), cat(del_q, np.int64), ins_ts, n_q


def _ckq_timeline(rng, mu: int, T: int, L: int):
    """CKQ: every subscription is deleted at insertion + its lifetime and replaced at once. Slot j
    (one of the mu live places) holds warm-up query j until its remaining lifetime r_j (spread over
    1..L), then a replacement every L time-stamps. Returns (deletion time-stamps, deleted qids,
    insertion time-stamp per qid, lifetime in seconds per qid)."""
    r = 1 + (rng.permutation(mu) * L) // mu  # remaining lifetimes, evenly over 1..L
    n_del = np.where(r <= T, (T - r) // L + 1, 0)  # deletions (= replacements) per slot
    slot = np.repeat(np.arange(mu), n_del)
    first = np.repeat(np.cumsum(n_del) - n_del, n_del)
    m = np.arange(len(slot)) - first  # the slot's m-th deletion
    t_del = r[slot] + m * L
    # replacements get qids mu.. in (time-stamp, slot) order
    rank = np.empty(len(slot), np.int64)
    rank[np.lexsort((slot, t_del))] = np.arange(len(slot))
    rep_q = mu + rank
    del_q = np.where(m == 0, slot, np.r_[np.int64(-1), rep_q[:-1]])  # (slot, m-1)'s replacement for m >= 1
    n_q = mu + len(slot)
    ins_ts = np.zeros(n_q)
    ins_ts[rep_q] = t_del
    tau = np.full(n_q, float(L))
    tau[:mu] = r
    return t_del.astype(np.float64), del_q.astype(np.int64), ins_ts, tau


def sampled_queries(rng, objects: pa.Table, o_off, o_val, n_q: int, cfg):
    """Per subscription: location and keywords of a uniformly random dataset object with at least
    keywords_min terms (min(keywords_max, |terms|) of them, uniformly, sorted), and k."""
    lens = np.diff(o_off)
    eligible = np.flatnonzero(lens >= int(cfg.keywords_min))
    if not len(eligible):
        raise ValueError(f"workload.keywords_min={cfg.keywords_min!r}: no dataset object has that many terms "
                         f"(the most is {int(lens.max()) if len(lens) else 0}); allowed: at most that")
    src = eligible[rng.integers(0, len(eligible), size=n_q)]
    k = rng.integers(int(cfg.k_min), int(cfg.k_max) + 1, size=n_q).astype(np.int32)
    s_off, s_val = csr_take(o_off, o_val, src)
    q_off, q_val = pick_terms(rng, s_off, s_val, np.minimum(int(cfg.keywords_max), np.diff(s_off)))
    x = objects.column("x").to_numpy()[src]
    y = objects.column("y").to_numpy()[src]
    return x, y, k, q_off, q_val


def pick_terms(rng, s_off: np.ndarray, s_val: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`counts[i]` distinct terms drawn uniformly from row i of the CSR (s_off, s_val), ascending."""
    n_q = len(counts)
    owner = np.repeat(np.arange(n_q, dtype=np.int64), np.diff(s_off))
    # a uniform random order within each row's terms: sort by (owner, random 32 bits) as one int64
    race = (owner << np.int64(32)) | rng.integers(0, 1 << 32, size=len(s_val), dtype=np.int64)
    order = np.argsort(race, kind="stable")
    rank = np.arange(len(order)) - s_off[owner]  # groups stay in place: position - group start
    chosen = order[rank < counts[owner]]
    # the chosen terms ascending within each subscription: sort (owner, term) as one int64
    pair = np.sort((owner[chosen] << np.int64(32)) | s_val[chosen].astype(np.int64), kind="stable")
    q_off = np.zeros(n_q + 1, np.int64)
    np.cumsum(counts, out=q_off[1:])
    return q_off, (pair & np.int64(0xFFFFFFFF)).astype(np.int32)

