"""DkM-SKS's figures for a time-stamped stream (Sec. 5.1): per time-stamp, how long the system
took to absorb its objects, insertions and deletions.

A time-stamp's update time is the slowest worker's time on the time-stamp's events plus the main
server's time for its new subscriptions (the driver's `observe_inserts`: Eq. 7 and the kNN over
O_init, spread evenly over the epoch's time-stamps). A worker's time on an event is its busy time
apportioned by work (the same service times the latency model uses). Table 3 decomposes the update
time into kNN update (objects), subscription insertion (plus the main server's time) and deletion,
each the slowest worker's per time-stamp; Table 2's "load balance" is the mean over time-stamps of
max - min worker time. A stream is time-stamped when every measured event time is an integer
(datasets/workloads/knn.py); other streams get none of these figures.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.core.events import DELETE, INSERT, OBJECT, Events, seq_positions

PARTS = {"knn_update": OBJECT, "ins": INSERT, "del": DELETE}


def is_time_stamped(ts: np.ndarray) -> bool:
    return len(ts) > 0 and bool(np.all(np.isfinite(ts))) and bool(np.all(ts == np.floor(ts)))


def timestamp_metrics(per_ts: dict[str, np.ndarray]) -> dict[str, float]:
    """The run's DkM-SKS figures from `per_timestamp`; {} for a stream without time-stamps."""
    if len(per_ts["timestamps"]) == 0:
        return {}
    out = {f"{name}_ms_per_ts": float(v.mean()) * 1e3 for name, v in per_ts.items() if name != "timestamps"}
    out["timestamps"] = float(len(per_ts["timestamps"]))
    out["update_time_growth"] = growth(per_ts["update_time"])
    return out


def growth(series: np.ndarray) -> float:
    """Mean of the last tenth of a per-time-stamp series over the mean of its first tenth (Fig. 7's
    shapes: SOP's update time grows, DkM-SKS's stays flat); NaN with fewer than 10 time-stamps."""
    n = len(series) // 10
    if n == 0:
        return float("nan")
    first = float(np.mean(series[:n]))
    return float(np.mean(series[-n:])) / first if first > 0 else float("nan")


def timestamp_series(per_ts: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per measured time-stamp (Fig. 7's timeline): update time and its parts, in ms."""
    if len(per_ts["timestamps"]) == 0:
        return pd.DataFrame()
    return pd.DataFrame({"timestamp": per_ts["timestamps"].astype(np.float64),
                         **{f"{n}_ms": v * 1e3 for n, v in per_ts.items() if n != "timestamps"}})


def per_timestamp(epochs, events: Events, n_workers: int) -> dict[str, np.ndarray]:
    """Per time-stamp of the given (measured) epochs: the update time and its parts in seconds
    (module docstring), or no time-stamps. One pass over every worker's service times (a sum per
    (part, worker, time-stamp) by bincount, in the order the service times come, as a loop would)."""
    served = [(w, s, t) for e in epochs for w, (s, t) in e.service.items()]
    if not served:
        return {"timestamps": np.zeros(0)}
    all_seq = np.concatenate([s for _, s, _ in served])
    first, last = seq_positions(events.seq, np.array([all_seq.min(), all_seq.max()]))
    ts_all = events.ts[first:last + 1]
    if not is_time_stamped(ts_all):
        return {"timestamps": np.zeros(0)}
    rows = seq_positions(events.seq, all_seq)
    stamps = np.unique(ts_all)
    n_ts = len(stamps)
    # each event's time-stamp column once, then each copy's by its event (copies outnumber events)
    col = np.searchsorted(stamps, ts_all)[rows - first]
    cell = np.repeat(np.array([w for w, _, _ in served], np.int64), [len(s) for _, s, _ in served]) * n_ts + col
    seconds = np.concatenate([t for _, _, t in served])
    kind = events.kind[rows]
    by_kind = {}
    for name, k in PARTS.items():
        m = kind == k
        by_kind[name] = np.bincount(cell[m], weights=seconds[m], minlength=n_workers * n_ts).reshape(n_workers, n_ts)
    total = sum(by_kind.values())
    main = np.zeros(n_ts)  # the main server's time, spread over each epoch's time-stamps
    at = 0
    for e in epochs:
        n = sum(len(s) for s, _ in e.service.values())
        if e.observe_s and n:
            cols = np.flatnonzero(np.bincount(col[at:at + n], minlength=n_ts))  # np.unique's, without a sort
            main[cols] += e.observe_s / len(cols)
        at += n
    return {
        "timestamps": stamps,
        "update_time": total.max(axis=0) + main,
        "update_spread": total.max(axis=0) - total.min(axis=0),
        "knn_update": by_kind["knn_update"].max(axis=0),
        "ins": by_kind["ins"].max(axis=0) + main,
        "del": by_kind["del"].max(axis=0),
    }
