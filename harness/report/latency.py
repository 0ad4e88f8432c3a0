"""The latency queue model (DESIGN.md, metrics).

Events arrive at a constant input rate, in seq order, spread round-robin over the dispatchers.
Each dispatcher and each worker is a FIFO queue. A dispatcher's service time per event is its
measured routing time divided evenly over the events it routed; a worker's service time per
event is its measured busy time apportioned by the work the index counted for that event
(candidate checks for an object, postings for an insertion), because the kernel is vectorised
and cannot be timed per event. An event leaves the system when the last of its copies leaves
its worker; its latency is that time minus its arrival.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _fifo(arrival, service):
    """Departure times of a FIFO single server (Lindley's recursion)."""
    out = np.empty(len(arrival))
    free = -np.inf
    for i in range(len(arrival)):
        start = arrival[i] if arrival[i] > free else free
        free = start + service[i]
        out[i] = free
    return out


def event_latencies(seqs: np.ndarray, dispatch_service_s: float, n_dispatchers: int, rate_eps: float,
                    worker_service: dict[int, tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Latency (s) of every event in `seqs` (sorted) under the queue model."""
    seqs = np.asarray(seqs, np.int64)
    n = len(seqs)
    arrival = np.arange(n, dtype=np.float64) / rate_eps
    leave_dispatch = np.empty(n)
    for d in range(n_dispatchers):
        idx = np.arange(d, n, n_dispatchers)
        leave_dispatch[idx] = _fifo(arrival[idx], np.full(len(idx), dispatch_service_s))
    done = leave_dispatch.copy()
    for w_seq, w_service in worker_service.values():
        pos = np.searchsorted(seqs, w_seq)
        ok = (pos < n) & (seqs[np.minimum(pos, n - 1)] == w_seq)
        pos, svc = pos[ok], w_service[ok]
        dep = _fifo(leave_dispatch[pos], svc)
        if len(pos) < 2 or (np.diff(pos) > 0).all():  # each event once here (the norm): a plain
            done[pos] = np.maximum(done[pos], dep)  # scatter; np.maximum.at was half of a summary
        else:  # an event served twice by one worker
            np.maximum.at(done, pos, dep)
    return done - arrival


def summarise(latency_s: np.ndarray) -> dict[str, float]:
    if len(latency_s) == 0:
        return {k: float("nan") for k in ("latency_mean_ms", "latency_p50_ms", "latency_p95_ms", "latency_p99_ms")}
    ms = latency_s * 1000.0
    p50, p95, p99 = np.percentile(ms, [50, 95, 99])
    return {
        "latency_mean_ms": float(ms.mean()),
        "latency_p50_ms": float(p50),
        "latency_p95_ms": float(p95),
        "latency_p99_ms": float(p99),
        "latency_share_lt_100ms": float(np.mean(ms < 100.0)),
        "latency_share_100ms_1s": float(np.mean((ms >= 100.0) & (ms <= 1000.0))),
        "latency_share_gt_1s": float(np.mean(ms > 1000.0)),
    }
