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

from harness.core.events import DELETE, INSERT, OBJECT, Events

PARTS = {"knn_update": OBJECT, "ins": INSERT, "del": DELETE}


def is_time_stamped(ts: np.ndarray) -> bool:
    return len(ts) > 0 and bool(np.all(np.isfinite(ts))) and bool(np.all(ts == np.floor(ts)))


def timestamp_metrics(epochs, events: Events, n_workers: int) -> dict[str, float]:
    """The run's DkM-SKS figures over the given (measured) epochs; {} for a stream without time-stamps."""
    per_ts = _per_timestamp(epochs, events, n_workers)
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


def timestamp_series(epochs, events: Events, n_workers: int) -> list[dict]:
    """One row per measured time-stamp (Fig. 7's timeline): update time and its parts, in ms."""
    per_ts = _per_timestamp(epochs, events, n_workers)
    names = [n for n in per_ts if n != "timestamps"]
    return [{"timestamp": float(t), **{f"{n}_ms": float(per_ts[n][i]) * 1e3 for n in names}}
            for i, t in enumerate(per_ts["timestamps"])]


def _per_timestamp(epochs, events: Events, n_workers: int) -> dict[str, np.ndarray]:
    served = [(w, s, t) for e in epochs for w, (s, t) in e.service.items()]
    if not served:
        return {"timestamps": np.zeros(0)}
    all_seq = np.concatenate([s for _, s, _ in served])
    row_of = lambda s: np.searchsorted(events.seq, s)  # noqa: E731
    lo, hi = int(all_seq.min()), int(all_seq.max())
    rng = slice(row_of(lo), row_of(hi) + 1)
    ts_all = events.ts[rng]
    if not is_time_stamped(ts_all):
        return {"timestamps": np.zeros(0)}
    stamps = np.unique(ts_all)
    n_ts = len(stamps)
    by_kind = {name: np.zeros((n_workers, n_ts)) for name in PARTS}
    for w, s, t in served:
        r = row_of(s)
        col = np.searchsorted(stamps, events.ts[r])
        kind = events.kind[r]
        for name, k in PARTS.items():
            m = kind == k
            np.add.at(by_kind[name][w], col[m], t[m])
    total = sum(by_kind.values())
    main = np.zeros(n_ts)  # the main server's time, spread over each epoch's time-stamps
    for e in epochs:
        if e.observe_s and e.service:
            seqs = np.concatenate([s for s, _ in e.service.values()])
            cols = np.unique(np.searchsorted(stamps, events.ts[row_of(seqs)]))
            main[cols] += e.observe_s / max(len(cols), 1)
    return {
        "timestamps": stamps,
        "update_time": total.max(axis=0) + main,
        "update_spread": total.max(axis=0) - total.min(axis=0),
        "knn_update": by_kind["knn_update"].max(axis=0),
        "ins": by_kind["ins"].max(axis=0) + main,
        "del": by_kind["del"].max(axis=0),
    }
