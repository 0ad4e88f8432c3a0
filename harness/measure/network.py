"""The network model (conf/network/<profile>.yaml): what moving the events costs, charged after the
run from what the run measured, so one run gives its throughput at any bandwidth.

The harness pipeline ships each event copy to its worker as an 8-byte seq (the worker reads the
event from the events table); the systems the harness compares ship the event itself. The model
therefore charges every (event, worker) copy the event's bytes in the pipeline's own encoding
(`harness.core.events.row_bytes`: an Arrow row) and, per block (a dispatcher's run of `block_events` events to one
worker: what the dispatch stage emits per batch), the Arrow IPC framing. Resources:

- a dispatcher's CPU: its share of the routing, the routing-state upkeep, and sending its copies
  (per message, per byte, per block);
- a dispatcher's link (its copies' bytes / bandwidth) and a worker's link (the bytes it receives,
  or the result bytes it sends the merge when more);
- a worker's CPU: receiving its copies plus its index work and stalls;
- the merge stage: the busiest merge task's CPU, or the result bytes one merge task receives.

Throughput = measured events / the busiest resource. Events are spread round-robin over the
dispatchers, as the latency model spreads them. With `network=none` every cost is zero, the
links unlimited and the merge stage left out, which gives the compute-only figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from harness.core.events import seq_positions
from harness.report.metrics import RESOURCES  # the registry names the resources' columns

HEADLINES = ("network", "compute")


@dataclass
class NetworkProfile:
    """Costs of moving events (a copy is one event sent to one worker); the `network` config group."""

    name: str = "none"
    send_s_per_message: float = 0.0  # sender CPU per copy ...
    send_s_per_byte: float = 0.0  # ... and per byte of it
    send_s_per_block: float = 0.0  # ... and per block it belongs to
    recv_s_per_message: float = 0.0  # the same on the receiving worker
    recv_s_per_byte: float = 0.0
    recv_s_per_block: float = 0.0
    block_bytes: int = 0  # framing bytes per block (the IPC schema and message headers)
    block_events: int = 10_000  # events a dispatcher batches before it sends (Spark's Arrow batch)
    bandwidth_bps: float = 0.0  # each dispatcher's and each worker's link, bits/s; 0: unlimited
    hop_latency_s: float = 0.0  # one hop: dispatcher -> worker, worker -> merge
    result_bytes: int = 16  # a (query, object) result sent to the merge
    merge_tasks: int = 1  # merge tasks the result bytes spread over
    headline: str = "network"  # the throughput the table shows: network (this model) or compute (none)
    # more link bandwidths (bits/s, 0: unlimited) to evaluate the run at, after it (network_sensitivity)
    sweep_bandwidths_bps: list[float] = field(default_factory=list)

    @property
    def free(self) -> bool:
        """Nothing to charge: the compute-only model."""
        return self.name == "none"

    def check(self) -> None:
        """Raises ValueError naming the first bad key (run before Spark starts)."""
        for key in ("send_s_per_message", "send_s_per_byte", "send_s_per_block", "recv_s_per_message",
                    "recv_s_per_byte", "recv_s_per_block", "block_bytes", "bandwidth_bps", "hop_latency_s",
                    "result_bytes"):
            if not getattr(self, key) >= 0:
                raise ValueError(f"network.{key}={getattr(self, key)!r} is invalid; allowed: a number >= 0")
        for key in ("block_events", "merge_tasks"):
            if not getattr(self, key) >= 1:
                raise ValueError(f"network.{key}={getattr(self, key)!r} is invalid; allowed: an integer >= 1")
        if self.headline not in HEADLINES:
            raise ValueError(f"network.headline={self.headline!r} is invalid; allowed: {', '.join(HEADLINES)}")
        if any(not b >= 0 for b in self.sweep_bandwidths_bps):
            raise ValueError(f"network.sweep_bandwidths_bps={list(self.sweep_bandwidths_bps)!r} is invalid; "
                             "allowed: bandwidths in bits/s >= 0 (0: unlimited)")

    def link_s(self, n_bytes):
        return n_bytes * 8.0 / self.bandwidth_bps if self.bandwidth_bps > 0 else n_bytes * 0.0


@dataclass
class Copies:
    """Every (event, worker) copy of the measured events: the event's position, its worker, its
    bytes and its dispatcher (round-robin), and each copy's block."""

    pos: np.ndarray
    worker: np.ndarray
    nbytes: np.ndarray
    dispatcher: np.ndarray
    service_s: np.ndarray  # the worker's index time for the copy (the latency model's)
    # the copy that must finish first (-1: none): a second round's copy waits for its first round's
    after: np.ndarray | None = None
    _blocks: dict = field(default_factory=dict, repr=False)  # blocks() by (block_events, dispatchers)
    _kept: dict = field(default_factory=dict, repr=False)  # worker -> which of its seqs are copies here

    @classmethod
    def of(cls, seqs: np.ndarray, sizes: np.ndarray, worker_service: dict[int, tuple[np.ndarray, np.ndarray]],
           n_dispatchers: int, like: "Copies | None" = None,
           second: dict[int, tuple[np.ndarray, np.ndarray]] | None = None) -> "Copies":
        """The copies of `worker_service` (worker -> (seqs, service seconds)). `like`: copies built
        from the same seqs per worker (another repetition of the same run, or the run of a
        one-epoch series): only the service times are taken anew, and the blocks are shared.
        `second`: the copies of two-round snapshot queries' second rounds, each after its query's
        first-round copy (harness/engine/rounds.py)."""
        cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt))
        if second:
            first = cls.of(seqs, sizes, worker_service, n_dispatchers)
            extra = cls.of(seqs, sizes, second, n_dispatchers)
            by_pos = np.full(len(seqs), -1, np.int64)
            by_pos[first.pos] = np.arange(len(first.pos))
            return cls(*(np.concatenate([getattr(first, k), getattr(extra, k)])
                         for k in ("pos", "worker", "nbytes", "dispatcher", "service_s")),
                       after=np.concatenate([np.full(len(first.pos), -1, np.int64), by_pos[extra.pos]]))
        if like is not None and like.after is None and like._kept and sorted(worker_service) == sorted(like._kept) and all(
                len(worker_service[w][0]) == len(ok) for w, ok in like._kept.items()):
            svc = [np.asarray(s, np.float64)[like._kept[w]] for w, (_, s) in sorted(worker_service.items())]
            return replace(like, service_s=cat(svc, np.float64))
        pos, wk, svc, kept = [], [], [], {}
        for w, (w_seq, w_svc) in sorted(worker_service.items()):
            p = seq_positions(seqs, w_seq)
            ok = (p < len(seqs)) & (seqs[np.minimum(p, len(seqs) - 1)] == w_seq)
            pos.append(p[ok])
            wk.append(np.full(int(ok.sum()), w, np.int64))
            svc.append(np.asarray(w_svc, np.float64)[ok])
            kept[w] = ok
        p = cat(pos, np.int64)
        return cls(p, cat(wk, np.int64), sizes[p].astype(np.int64), p % max(n_dispatchers, 1), cat(svc, np.float64),
                   _kept=kept)

    def blocks(self, block_events: int, n_dispatchers: int) -> tuple[np.ndarray, np.ndarray]:
        """(dispatcher, worker) of every block: a dispatcher's batch of `block_events` of its
        events sends one block to each worker it reaches (kept: a bandwidth sweep asks again)."""
        memo = self._blocks
        if (block_events, n_dispatchers) not in memo:
            n_w = int(self.worker.max()) + 1 if len(self.worker) else 1
            batch = (self.pos // max(n_dispatchers, 1)) // max(block_events, 1)
            key = np.unique((batch * max(n_dispatchers, 1) + self.dispatcher) * n_w + self.worker)
            memo[(block_events, n_dispatchers)] = ((key // n_w) % max(n_dispatchers, 1), key % n_w)
        return memo[(block_events, n_dispatchers)]

    def counts(self, block_events: int, n_dispatchers: int, n_workers: int) -> tuple[np.ndarray, ...]:
        """Per dispatcher its copies, their bytes and its blocks, then the same per worker: what the
        network model charges, the same for every repetition and bandwidth (kept, as blocks are)."""
        key = ("counts", block_events, n_dispatchers, n_workers)
        memo = self._blocks
        if key not in memo:
            d_blk, w_blk = self.blocks(block_events, n_dispatchers)
            per = (lambda idx, weights, n: np.bincount(idx, weights=weights, minlength=n)[:n].astype(np.float64))
            memo[key] = (per(self.dispatcher, None, n_dispatchers), per(self.dispatcher, self.nbytes, n_dispatchers),
                         per(d_blk, None, n_dispatchers), per(self.worker, None, n_workers),
                         per(self.worker, self.nbytes, n_workers), per(w_blk, None, n_workers))
        return memo[key]


@dataclass
class Resources:
    """Seconds of each resource over the measured part; the bottleneck is the largest."""

    times: dict[str, float]
    bytes_sent: float  # dispatcher -> worker bytes, framing included
    copies: int
    payload_bytes: float = 0.0  # the copies' event bytes alone

    @property
    def bottleneck(self) -> tuple[str, float]:
        name = max(self.times, key=lambda k: self.times[k])
        return name, self.times[name]


def resources(profile: NetworkProfile, copies: Copies, n_dispatchers: int, n_workers: int, dispatch_s: float,
              worker_s: np.ndarray, results: np.ndarray, merge_max_s: float) -> Resources:
    """Each resource's time. `dispatch_s`: one dispatcher's routing share plus upkeep (compute-only);
    `worker_s[w]`: worker w's index time and stalls; `results[w]`: the result pairs it sent."""
    d_msgs, d_bytes, d_blocks, w_msgs, w_bytes, w_blocks = copies.counts(profile.block_events, n_dispatchers,
                                                                         n_workers)
    out_bytes = d_bytes + d_blocks * profile.block_bytes
    in_bytes = w_bytes + w_blocks * profile.block_bytes
    result_bytes = np.asarray(results, np.float64) * profile.result_bytes
    times = {
        "dispatcher_cpu": float(np.max(dispatch_s + d_msgs * profile.send_s_per_message
                                       + d_bytes * profile.send_s_per_byte + d_blocks * profile.send_s_per_block,
                                       initial=dispatch_s)),
        "worker_cpu": float(np.max(worker_s + w_msgs * profile.recv_s_per_message + w_bytes * profile.recv_s_per_byte
                                   + w_blocks * profile.recv_s_per_block, initial=0.0)),
    }
    if not profile.free:
        times["dispatcher_link"] = float(np.max(profile.link_s(out_bytes), initial=0.0))
        times["worker_link"] = float(np.max(profile.link_s(np.maximum(in_bytes, result_bytes)), initial=0.0))
        times["merge"] = max(merge_max_s, float(profile.link_s(result_bytes.sum() / max(profile.merge_tasks, 1))))
    return Resources(times, float(out_bytes.sum()), len(copies.pos), float(d_bytes.sum()))


def copy_costs(profile: NetworkProfile, copies: Copies, n_dispatchers: int, n_events: int) -> tuple[np.ndarray, np.ndarray]:
    """Per event, the dispatcher's CPU to send its copies; per copy, the worker's CPU to receive it
    (block costs spread evenly over the copies of each sender or receiver)."""
    if profile.free or len(copies.pos) == 0:
        return np.zeros(n_events), np.zeros(len(copies.pos))
    d_blk, w_blk = copies.blocks(profile.block_events, n_dispatchers)
    n_w = int(copies.worker.max()) + 1
    # blocks per copy of each sender and receiver
    per_d = np.bincount(d_blk, minlength=n_dispatchers) / np.maximum(np.bincount(copies.dispatcher,
                                                                                 minlength=n_dispatchers), 1)
    per_w = np.bincount(w_blk, minlength=n_w) / np.maximum(np.bincount(copies.worker, minlength=n_w), 1)
    send = (profile.send_s_per_message + copies.nbytes * profile.send_s_per_byte
            + per_d[copies.dispatcher] * profile.send_s_per_block)
    recv = (profile.recv_s_per_message + copies.nbytes * profile.recv_s_per_byte
            + per_w[copies.worker] * profile.recv_s_per_block)
    return np.bincount(copies.pos, weights=send, minlength=n_events), recv
