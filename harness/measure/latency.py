"""The latency queue model (DESIGN.md, metrics).

Events arrive at a constant input rate, in seq order (or at their event times rescaled to that mean
rate, `latency.arrivals=event_time`), spread round-robin over the dispatchers.
Each dispatcher and each worker is a FIFO queue. A dispatcher's service time per event is its
measured routing time divided evenly over the events it routed, plus (network model) the CPU to
send the event's copies; a worker's service time per event is its measured busy time apportioned
by the work the index counted for that event (candidate checks for an object, postings for an
insertion), because the kernel is vectorised and cannot be timed per event, plus the CPU to
receive the copy. Under a network profile each copy then crosses the dispatcher's link (a FIFO
queue, bytes / bandwidth), a hop, and the worker's link (FIFO in arrival order) before the worker
takes it, in seq order; a result crosses one more hop to the merge. An event leaves the system
when the last of its copies is done; its latency is that time minus its arrival. With the `none`
profile every cost is zero and the model is the compute-only one.
"""

from __future__ import annotations

import heapq

import numpy as np
from numba import njit

from harness.measure.network import Copies, NetworkProfile, copy_costs

NONE = NetworkProfile()


@njit(cache=True)
def _queue_kernel(ready, service, server, order, n_servers):
    """FIFO servers (Lindley's recursion), each taking its customers in `order`."""
    out = np.empty(len(ready))
    free = np.full(n_servers, -np.inf)
    for i in order:
        s = server[i]
        start = ready[i] if ready[i] > free[s] else free[s]
        free[s] = start + service[i]
        out[i] = free[s]
    return out


@njit(cache=True)
def _chained_kernel(ready, service, server, rank, n_servers, after, delay):
    """FIFO servers taking their customers as they arrive, where a customer with `after` >= 0
    arrives `delay` after that customer left (a second round's copy, sent once its first round
    is done): customers in order of arrival (ties by `rank`), each arrival known once its
    predecessor left. A heap of (arrival, rank, customer)."""
    n = len(ready)
    out = np.empty(n)
    free = np.full(n_servers, -np.inf)
    n_kids = np.zeros(n + 1, np.int64)
    for i in range(n):
        if after[i] >= 0:
            n_kids[after[i] + 1] += 1
    ptr = np.cumsum(n_kids)
    kids = np.empty(ptr[-1], np.int64)
    fill = ptr[:-1].copy()
    for i in range(n):
        if after[i] >= 0:
            kids[fill[after[i]]] = i
            fill[after[i]] += 1
    heap = [(ready[i], rank[i], i) for i in range(n) if after[i] < 0]
    heapq.heapify(heap)
    while len(heap):
        t, _, i = heapq.heappop(heap)
        s = server[i]
        start = t if t > free[s] else free[s]
        free[s] = start + service[i]
        out[i] = free[s]
        for j in range(ptr[i], ptr[i + 1]):
            k = kids[j]
            heapq.heappush(heap, (max(ready[k], out[i] + delay), rank[k], k))
    return out


def _queue(ready: np.ndarray, service: np.ndarray, server: np.ndarray, order: np.ndarray,
           after: np.ndarray | None = None, delay: float = 0.0) -> np.ndarray:
    """Departures of the copies from their servers, each server taking its copies in `order`
    (Lindley's recursion per server, every server in one pass over `order`). With `after` (per
    copy, the copy it waits for, -1: none) the copies that wait arrive `delay` after it left, and
    every server takes its copies in order of arrival, ties in `order`."""
    if len(ready) == 0:
        return np.empty(0)
    args = (np.asarray(ready, np.float64), np.asarray(service, np.float64), np.asarray(server, np.int64))
    if after is None or not (np.asarray(after) >= 0).any():
        return _queue_kernel(*args, np.asarray(order, np.int64), int(server.max()) + 1)
    rank = np.empty(len(ready), np.int64)
    rank[np.asarray(order, np.int64)] = np.arange(len(ready))
    return _chained_kernel(*args, rank, int(server.max()) + 1, np.asarray(after, np.int64), float(delay))


ARRIVALS = ("even", "event_time")


def arrival_times(n: int, rate_eps: float, ts: np.ndarray | None = None) -> np.ndarray:
    """When each of `n` events arrives: one every 1 / rate_eps in seq order, or (given the events'
    `ts`) at their event times rescaled to that mean rate, so events of one instant (a batch of
    snapshot queries) arrive together."""
    even = np.arange(n, dtype=np.float64) / rate_eps
    if ts is None or n < 2 or not ts[-1] > ts[0]:
        return even
    return (np.asarray(ts, np.float64) - ts[0]) * (even[-1] / (ts[-1] - ts[0]))


def event_latencies(copies: Copies, n: int, dispatch_service_s: float, n_dispatchers: int, rate_eps: float,
                    profile: NetworkProfile = NONE, ts: np.ndarray | None = None) -> np.ndarray:
    """Latency (s) of each of the `n` measured events under the queue model, from their copies
    (`Copies.of`: each copy's worker, bytes and index service time); `ts`: arrivals at event time
    (`arrival_times`)."""
    send, recv = copy_costs(profile, copies, n_dispatchers, n)
    arrival = arrival_times(n, rate_eps, ts)
    events = np.arange(n, dtype=np.int64)  # round-robin over the dispatchers, each in seq order
    leave_dispatch = _queue(arrival, dispatch_service_s + send, events % max(n_dispatchers, 1), events)
    if len(copies.pos) == 0:
        return leave_dispatch - arrival
    ready = leave_dispatch[copies.pos]
    # an event's copies leave a dispatcher in worker order; a second round's after its first round's
    second = copies.after >= 0 if copies.after is not None else np.zeros(len(copies.pos), np.bool_)
    by_seq = np.lexsort((copies.worker, second, copies.pos))
    if profile.bandwidth_bps > 0:
        tx = profile.link_s(copies.nbytes.astype(np.float64))
        ready = _queue(ready, tx, copies.dispatcher, by_seq) + profile.hop_latency_s
        ready = _queue(ready, tx, copies.worker, np.argsort(ready, kind="stable"))
    else:
        ready = ready + profile.hop_latency_s
    # a second round's copy leaves once its first round's result reached the dispatcher, which
    # sends it on: two hops after the first round's worker finished
    done_copy = _queue(ready, copies.service_s + recv, copies.worker, by_seq, copies.after,
                       2 * profile.hop_latency_s) + profile.hop_latency_s
    done = leave_dispatch.copy()
    pos, last = copies.pos[by_seq], done_copy[by_seq]
    starts = np.flatnonzero(np.r_[True, pos[1:] != pos[:-1]])
    done[pos[starts]] = np.maximum(done[pos[starts]], np.maximum.reduceat(last, starts))
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
