"""Top-k subscriptions over a count-based sliding window (Skype Sec. 8.1.1, DSkype Sec. 8.2): `topk_q`.

The stream: the first |W| = `window` objects fill the window, then the `queries` subscriptions
register (each initialised against the full window), then `measured_messages` objects; the warm-up
is the window and the registrations, so every measured object arrives at a full window (Skype:
"starts when the sliding window ... is full and continuously runs for 100,000 arriving messages").
The paper's distributed runs have no subscription churn, nor has this stream.

Decisions (ADR-0045):
- A subscription: the location of a uniformly random dataset object with at least `keywords_min`
  terms; j uniform in [keywords_min, keywords_max] ("1 <= j <= 5"), capped at the object's term
  count, distinct terms drawn uniformly from it; k uniform in [k_min, k_max] (topk_q: 20); alpha
  uniform in [alpha_low, alpha_high] inside (0, 1) (alpha = 0 or 1 divide by zero in Skype's
  bounds, Eq. 2 and 8); OR keywords (one common keyword is required). Its `win` column is |W|.
- An object's `win` column is the seq at which it leaves the window: that of the |W|-th object
  after it (NaN when the stream ends first). Workers expire by it without counting objects they
  do not receive; the oracle recomputes it from |W|.
- Objects are the dataset's in its order, cycled when the stream needs more (counted in `info`);
  object ids are 0..n-1 in stream order, query ids 0..queries-1. `ts`: objects at `rate` =
  1,000 per second of event time, the registrations at the moment the window is full.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from datasets.workloads.config import Workload, check_k_and_keywords, invalid
from datasets.workloads.knn import pick_terms
from datasets.workloads.range import object_reuse
from harness.core.events import INSERT, OBJECT, OR, TOPK, Events, csr_take, list_to_csr

RATE = 1000.0  # objects per second of event time


def validate_topk_workload(cfg) -> None:
    bad = invalid
    for field in ("window", "queries", "measured_messages", "keywords_min", "keywords_max", "k_min", "k_max"):
        v = getattr(cfg, field)
        if not isinstance(v, int) or isinstance(v, bool):
            bad(field, v, "an integer")
    if cfg.window < 1:
        bad("window", cfg.window, "an integer >= 1 (|W|, messages)")
    if cfg.queries < 0:
        bad("queries", cfg.queries, "an integer >= 0")
    if cfg.measured_messages < 0:
        bad("measured_messages", cfg.measured_messages, "an integer >= 0")
    check_k_and_keywords(cfg)
    validate_topk_window(cfg)
    for field in ("alpha_low", "alpha_high"):
        a = getattr(cfg, field)
        if not isinstance(a, (int, float)) or isinstance(a, bool) or not 0.0 < float(a) < 1.0:
            bad(field, a, "a number strictly between 0 and 1 (alpha = 0 or 1 divides by zero in Skype's bounds)")
    if cfg.alpha_high < cfg.alpha_low:
        bad("alpha_high", cfg.alpha_high, f"a number >= alpha_low ({cfg.alpha_low})")


def validate_topk_window(cfg) -> None:
    """The window's settings (an event file's top-k subscriptions read them too)."""
    bad = invalid
    if not isinstance(cfg.window, int) or isinstance(cfg.window, bool) or cfg.window < 1:
        bad("window", cfg.window, "an integer >= 1 (|W|, messages)")
    by = getattr(cfg, "window_by", "count")
    if by not in ("count", "time"):
        bad("window_by", by, "count (the last |W| messages) or time (the last window_s seconds)")
    t = getattr(cfg, "window_s", 0.0)
    if by == "time" and (not isinstance(t, (int, float)) or isinstance(t, bool) or not 0.0 < float(t) < np.inf):
        bad("window_s", t, "a number of seconds > 0 (the time-based window T)")


def build_topk_workload(objects: pa.Table, term_df: np.ndarray, extent, cfg, seed: int) -> Workload:
    """The ordered event stream of a top-k workload (module docstring)."""
    validate_topk_workload(cfg)
    n_rows = objects.num_rows
    W, n_q, n_meas = int(cfg.window), int(cfg.queries), int(cfg.measured_messages)
    timed = getattr(cfg, "window_by", "count") == "time"
    if timed:  # the window fills with the messages of the first T seconds
        W = _time_fill(objects, float(cfg.window_s))
    if W > n_rows:
        raise ValueError(f"workload.window={W} is larger than the dataset ({n_rows} objects); allowed: at most "
                         f"{n_rows}, so the window holds distinct messages")
    ss = np.random.SeedSequence([int(seed) & 0xFFFFFFFF, int(cfg.seed_offset) & 0xFFFFFFFF, 0x544F504B])
    rng = np.random.default_rng(ss)
    o_off, o_val = list_to_csr(objects.column("terms"))
    lens = np.diff(o_off)
    eligible = np.flatnonzero(lens >= int(cfg.keywords_min))
    if n_q and not len(eligible):
        raise ValueError(f"workload.keywords_min={cfg.keywords_min!r}: no dataset object has that many terms "
                         f"(the most is {int(lens.max()) if len(lens) else 0}); allowed: at most that")
    src = eligible[rng.integers(0, len(eligible), size=n_q)] if n_q else np.zeros(0, np.int64)
    j = rng.integers(int(cfg.keywords_min), int(cfg.keywords_max) + 1, size=n_q)
    k = rng.integers(int(cfg.k_min), int(cfg.k_max) + 1, size=n_q).astype(np.int32)
    alpha = rng.uniform(float(cfg.alpha_low), float(cfg.alpha_high), size=n_q).astype(np.float32)
    s_off, s_val = csr_take(o_off, o_val, src)
    q_off, q_val = pick_terms(rng, s_off, s_val, np.minimum(j, np.diff(s_off)))

    n_obj = W + n_meas
    n = n_obj + n_q
    is_obj = np.ones(n, np.bool_)
    is_obj[W:W + n_q] = False
    obj_seq = np.flatnonzero(is_obj)
    src_rows = np.arange(n_obj, dtype=np.int64) % n_rows
    win = np.full(n, np.nan)
    ts = np.empty(n)
    tau = np.full(n, np.nan)
    if timed:  # the dataset's own times (cycled as range.py does); a message leaves as the first
        T = float(cfg.window_s)  # message at least T seconds younger arrives
        o_ts = _object_times(objects, src_rows)
        leave = np.searchsorted(o_ts, o_ts + T, side="left")
        inside = leave < n_obj
        win[obj_seq[inside]] = obj_seq[leave[inside]].astype(np.float64)
        ts[is_obj] = o_ts
        ts[~is_obj] = o_ts[W - 1] if W else 0.0
        tau[~is_obj] = T
    else:
        win[obj_seq[:max(n_obj - W, 0)]] = obj_seq[W:].astype(np.float64)
        win[~is_obj] = float(W)
        ts[is_obj] = np.arange(n_obj) / RATE
        ts[~is_obj] = W / RATE
    ids = np.empty(n, np.int64)
    ids[is_obj] = np.arange(n_obj)
    ids[~is_obj] = np.arange(n_q)
    x, y = np.empty(n), np.empty(n)
    x[is_obj] = objects.column("x").to_numpy()[src_rows]
    y[is_obj] = objects.column("y").to_numpy()[src_rows]
    x[~is_obj] = objects.column("x").to_numpy()[src]
    y[~is_obj] = objects.column("y").to_numpy()[src]
    q = ~is_obj
    cols = {
        "seq": np.arange(n, dtype=np.int64), "ts": ts,
        "kind": np.where(is_obj, OBJECT, INSERT).astype(np.int8),
        "family": np.where(is_obj, -1, TOPK).astype(np.int8), "id": ids, "x": x, "y": y,
        "op": np.where(is_obj, 0, OR).astype(np.int8),
        "k": np.where(q, 0, 0).astype(np.int32), "alpha": np.zeros(n, np.float32), "win": win, "tau": tau,
    }
    cols["k"][q] = k
    cols["alpha"][q] = alpha
    for name, v in zip(("xmin", "ymin", "xmax", "ymax"), extent):
        col = np.full(n, np.nan)
        col[q] = float(v)
        cols[name] = col
    all_off = np.concatenate([o_off, o_off[-1] + q_off[1:]])
    all_val = np.concatenate([o_val, q_val])
    row = np.empty(n, np.int64)
    row[is_obj] = src_rows
    row[q] = n_rows + np.arange(n_q)
    offsets, values = csr_take(all_off, all_val, row)
    info = object_reuse(n_obj, n_rows)
    info["dataset_keywords_per_object"] = float(lens.mean()) if len(lens) else float("nan")
    info["query_keywords_mean"] = float(np.diff(q_off).mean()) if n_q else float("nan")
    info["window"] = W  # time windows: the messages of the first T seconds
    return Workload(Events(cols, offsets, values), warmup=W + n_q, info=info)


def _object_times(objects: pa.Table, src_rows: np.ndarray) -> np.ndarray:
    """The objects' own event times in stream order, kept increasing when the dataset is cycled."""
    t = objects.column("ts").to_numpy().astype(np.float64)
    span = float(t[-1] - t[0]) + 1.0 if len(t) else 1.0
    out = t[src_rows] + span * (np.arange(len(src_rows)) // max(len(t), 1))
    return np.maximum.accumulate(out) if len(out) else out


def _time_fill(objects: pa.Table, T: float) -> int:
    """How many of the dataset's first messages a time window of T seconds holds when it is full:
    those before the first message T seconds after the first."""
    t = objects.column("ts").to_numpy().astype(np.float64)
    if not len(t):
        return 0
    n = int(np.searchsorted(t, t[0] + T, side="left"))
    if n >= len(t):
        raise ValueError(f"workload.window_s={T!r} spans the whole dataset ({len(t)} objects over "
                         f"{t[-1] - t[0]:.1f} s); allowed: less than that, so messages leave the window")
    return max(n, 1)
