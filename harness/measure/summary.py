"""A finished run's figures from its epochs: the metrics, the per-worker table, the latency model's
sample and the per-epoch series (definitions: docs/metrics.md, DESIGN.md)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from harness.core.events import DELETE, INSERT, OBJECT, SNAPSHOT, Events, row_bytes
from harness.engine.loop import SELECTION_EXTRAS
from harness.engine.monitor import worker_table
from harness.families import registry as families
from harness.measure import latency as latency_model
from harness.measure.run_metrics import run_metrics
from harness.measure.network import Copies, NetworkProfile, resources
from harness.core.repetitions import kept, median_interval
from harness.measure.timestamps import per_timestamp, timestamp_metrics, timestamp_series

# summed over a run's adjustments (the sum of the selections' interval ends bounds the sum's;
# those and the candidate count only when every adjustment reported them)
SERIES_TOTALS = ("migrated_queries", "migrated_bytes", "select_s", "migration_s", "select_cells_s",
                 "select_cells_s_ci_lo", "select_cells_s_ci_hi", "select_candidates")


@dataclass
class RunSummary:
    metrics: dict
    workers: pd.DataFrame
    latency_sample: pd.DataFrame
    epochs: pd.DataFrame
    timeline: pd.DataFrame | None = None  # per time-stamp of a time-stamped stream (timestamps.parquet)


def merged_service(epochs, attr: str = "service") -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Each worker's (seq, service seconds) over all the given epochs (`second_service`: of the
    second rounds, harness/engine/rounds.py)."""
    parts: dict[int, list] = {}
    for e in epochs:
        for w, (seqs, s) in getattr(e, attr).items():
            parts.setdefault(w, []).append((seqs, s))
    return {w: (np.concatenate([p[0] for p in ps]), np.concatenate([p[1] for p in ps])) for w, ps in parts.items()}


def stored_replication(measured, events: Events, warmup: int) -> float:
    """DSkype's replication ratio (Table 5, skype.txt l.825-835): the mean, over the measured epochs,
    of the subscription copies the workers hold at each epoch's end over the subscriptions live then.

    Read at the epochs' ends, not at the measured part's start: a threshold-routed strategy
    (dskype_prefix, its hybrids) registers the warm-up's subscriptions before any threshold exists
    (theta = 0, every keyword's worker) and prunes the replicas the first thresholds release at the
    first measured epoch's start (harness/engine/worker.py, `prune_replicas`); the paper computes its
    measurements "after system initialization" (l.819), with each prefix cut by kScore (Eq. 18,
    l.650-665). The mean over the epochs also counts the routes lazy reallocation grows back as
    thresholds fall. A strategy that never prunes holds the same copies at every end (ADR-0097)."""
    if not measured:
        return float("nan")
    ends = warmup + np.cumsum([e.n_events for e in measured])
    live_after = np.cumsum(events.kind == INSERT) - np.cumsum(events.kind == DELETE)  # live once seq i is done
    ratios = []
    for e, hi in zip(measured, ends):
        live = int(live_after[min(int(hi), len(events)) - 1]) if hi > 0 and len(events) else 0
        if live > 0:
            ratios.append(sum(st.get("kept", 0) for st in e.worker_stats.values()) / live)
    return float(np.mean(ratios)) if ratios else float("nan")


def native_rate(ts: np.ndarray) -> float | None:
    """The measured events' own mean rate in event time (None when no time passes): with
    latency.arrivals=event_time and no latency.rate_eps, events arrive at their own times."""
    if len(ts) < 2 or not ts[-1] > ts[0]:
        return None
    return (len(ts) - 1) / float(ts[-1] - ts[0])


def snapshot_metrics(latency_s: np.ndarray, kinds: np.ndarray, copies: Copies, workers: pd.DataFrame,
                     family: np.ndarray | None = None) -> dict:
    """Snapshot queries' own figures (SSTD's measure is their latency): latency under the queue
    model over the snapshot events alone, and per SSTD type (`family`: the events' family column;
    a family's type: `Family.snapshot_type`),
    workers reached per query, objects the workers keep and their bytes. Empty for a workload without snapshot
    queries."""
    snap = kinds == SNAPSHOT
    if not snap.any():
        return {}
    out = {f"snapshot_{k}": v for k, v in latency_model.summarise(latency_s[snap]).items()
           if k in ("latency_mean_ms", "latency_p50_ms", "latency_p95_ms")}
    for fam in (families.get(n) for n in families.names()):
        if fam.snapshot_type is None:
            continue
        mine = snap & (family == fam.code) if family is not None else np.zeros(len(snap), np.bool_)
        if mine.any():
            out[f"{fam.snapshot_type}_latency_mean_ms"] = float(latency_s[mine].mean() * 1000.0)
    out["snapshot_queries"] = float(snap.sum())
    out["snapshot_workers_mean"] = float(snap[copies.pos].sum() / snap.sum())
    out["stored_objects_max"] = float(workers["stored_objects"].max())
    out["stored_objects_sum"] = float(workers["stored_objects"].sum())
    out["stored_bytes_max"] = float(workers["stored_bytes"].max())
    out["stored_bytes_sum"] = float(workers["stored_bytes"].sum())
    return out


def family_figures(workers: pd.DataFrame, measured) -> dict:
    """Every registered query family's own figures of the run (`Family.summarise`), from the worker
    table and each worker's statistics at the last measured epoch's end."""
    final = list(measured[-1].worker_stats.values()) if measured else []
    out = {}
    for name in families.names():
        out.update(families.get(name).summarise(workers, final))
    return out


def _resources(profile: NetworkProfile, copies: Copies, workers: pd.DataFrame, n_dispatchers: int,
               dispatch_s: float, merge_max_s: float):
    """The network model's resources from a worker table (busy time and stalls, results per worker)."""
    return resources(profile, copies, n_dispatchers, len(workers), dispatch_s,
                     (workers["busy_s"] + workers["pause_s"]).to_numpy(), workers["results"].to_numpy(), merge_max_s)


def network_metrics(profile: NetworkProfile, copies: Copies, metrics: dict, workers: pd.DataFrame,
                    n_dispatchers: int, merge_max_s: float) -> dict:
    """Throughput with the network model, each resource's time and the bottleneck; the headline
    `throughput_eps` and `bottleneck_s` are the ones the profile names (`headline`)."""
    def at(p: NetworkProfile):
        return _resources(p, copies, workers, n_dispatchers, metrics["dispatcher_s"], merge_max_s)

    res = at(profile)
    name, slowest = res.bottleneck
    events = metrics["events"]
    out = {"throughput_compute_eps": metrics["throughput_eps"], "bottleneck_compute_s": metrics["bottleneck_s"],
           "throughput_network_eps": events / max(slowest, 1e-12), "bottleneck_network_s": slowest,
           "bottleneck_resource": name, "network_bytes": res.bytes_sent, "network_payload_bytes": res.payload_bytes,
           "bytes_per_event": res.bytes_sent / events if events else float("nan"),
           **{f"resource_{k}_s": v for k, v in res.times.items()}}
    if profile.sweep_bandwidths_bps:
        curve = {}
        for bw in profile.sweep_bandwidths_bps:
            curve[f"{float(bw):g}"] = events / max(at(replace(profile, bandwidth_bps=float(bw))).bottleneck[1], 1e-12)
        out["throughput_by_bandwidth"] = json.dumps(curve)
    basis = "network" if profile.headline == "network" else "compute"
    out["throughput_eps"], out["bottleneck_s"] = out[f"throughput_{basis}_eps"], out[f"bottleneck_{basis}_s"]
    out["throughput_basis"] = "compute" if basis == "compute" or profile.free else f"network ({profile.name})"
    return out


def epoch_series(series: list[dict], measured, sizes: np.ndarray, seqs: np.ndarray, profile: NetworkProfile,
                 n_workers: int, n_dispatchers: int, run_copies: Copies | None = None,
                 latency_s: np.ndarray | None = None, kinds: np.ndarray | None = None) -> pd.DataFrame:
    """The per-epoch series with each epoch's throughput under the network model too: the loop's
    `throughput_eps` (compute-only) becomes `throughput_compute_eps`, and `throughput_eps` follows
    the profile's headline, as the run's does. With the run's per-event latencies and kinds
    (`latency_s`, `kinds`, in the measured stream's order), each epoch also gets its snapshot
    queries (`snapshot_queries`) and their mean latency (`snapshot_latency_mean_ms`), so that a claim on
    snapshot latency after an adjustment reads the epochs after the move (sstd.txt l.384-386), as
    a throughput claim does."""
    frame = pd.DataFrame(series)
    if frame.empty or len(frame) != len(measured) or "throughput_eps" not in frame:
        return frame
    if latency_s is not None and kinds is not None and (kinds == SNAPSHOT).any():
        frame["snapshot_queries"], frame["snapshot_latency_mean_ms"] = epoch_snapshot_latency(
            latency_s, kinds, [e.n_events for e in measured])
    network = []
    for e in measured:
        res = _resources(profile, Copies.of(seqs, sizes, e.service, n_dispatchers,
                                            like=run_copies if len(measured) == 1 else None,
                                            second=e.second_service),
                         worker_table([e.worker_stats], n_workers), n_dispatchers,
                         e.route_ns / 1e9 / n_dispatchers + e.observe_s, e.merge_max_s)
        network.append(e.n_events / max(res.bottleneck[1], 1e-12))
    frame["throughput_compute_eps"] = frame["throughput_eps"]
    frame["throughput_network_eps"] = network
    if profile.headline == "network":
        frame["throughput_eps"] = frame["throughput_network_eps"]
    return frame


def epoch_snapshot_latency(latency_s: np.ndarray, kinds: np.ndarray, epoch_events: list[int]) -> tuple[list, list]:
    """Per measured epoch (the stream's consecutive slices of `epoch_events` events): its snapshot
    queries and their mean latency in ms (NaN for an epoch without one)."""
    snap = kinds == SNAPSHOT
    ends = np.cumsum(np.asarray(epoch_events, np.int64))
    if len(ends) and ends[-1] != len(snap):
        raise ValueError(f"the measured epochs hold {int(ends[-1])} events but the latencies {len(snap)}")
    counts, means = [], []
    for lo, hi in zip(np.concatenate(([0], ends[:-1])), ends):
        mine = snap[lo:hi]
        counts.append(int(mine.sum()))
        means.append(float(latency_s[lo:hi][mine].mean() * 1000.0) if mine.any() else float("nan"))
    return counts, means


def balance_metrics(workers: pd.DataFrame) -> dict:
    """Balance of the work the workers measured: busy time and candidate checks, max/min and max/mean."""
    out = {}
    for key, col in (("busy", "busy_s"), ("checks", "candidates")):
        v = workers[col].to_numpy(np.float64) if len(workers) else np.zeros(0)
        top = v.max() if len(v) else 0.0
        out[f"{key}_max_min"] = float(top / v.min()) if len(v) and v.min() > 0 else (float("inf") if top > 0 else float("nan"))
        out[f"{key}_max_mean"] = float(top / v.mean()) if len(v) and v.mean() > 0 else float("nan")
    return out


def measured_inputs(events: Events, warmup: int) -> tuple[int, int]:
    """(objects, subscription inserts and deletes) of the measured part of the stream."""
    kinds = events.kind[warmup:]
    return int((kinds == OBJECT).sum()), int(((kinds == INSERT) | (kinds == DELETE)).sum())


LATENCY_CURVE = "latency_curve"
# the input rates of a run's latency curve, as fractions of its own throughput on each basis: a
# comparison at 0.7x the slowest strategy's throughput reads every other strategy below 0.7x its own
CURVE_FRACTIONS = (0.05, 0.1, 0.2, 0.35, 0.5, 0.7)


def latency_curve(copies: Copies, n: int, service_s: float, n_dispatchers: int, profile: NetworkProfile,
                  metrics: dict) -> str:
    """The mean latency at several input rates, compute-only (no network costs) and under the
    run's network profile, as JSON {basis: [[rate events/s, mean ms], ...]}: what lets the claims
    compare strategies' mean latency at one input rate common to them (harness/report/claims/__init__.py)
    instead of each at its own 0.7x."""
    out = {}
    for basis, prof in (("compute", NetworkProfile()), ("network", profile)):
        eps = float(metrics.get(f"throughput_{basis}_eps", float("nan")))
        if not np.isfinite(eps) or eps <= 0:
            continue
        out[basis] = [[f * eps, float(latency_model.event_latencies(copies, n, service_s, n_dispatchers, f * eps,
                                                                    prof).mean() * 1000.0) if n else 0.0]
                      for f in CURVE_FRACTIONS]
    return json.dumps(out)


def summarise_run(measured, series: list[dict], events: Events, warmup: int, n_workers: int, n_dispatchers: int,
                  latency_cfg, profile: NetworkProfile | None = None, like: Copies | None = None) -> RunSummary:
    """The run's figures from its measured epochs (`like`: copies of another repetition of the
    same run, whose positions and blocks are reused: `Copies.of`)."""
    profile = profile or NetworkProfile()
    workers = worker_table([e.worker_stats for e in measured], n_workers)
    metrics = run_metrics(measured, workers, n_dispatchers, *measured_inputs(events, warmup))
    seqs, sizes, service = events.seq[warmup:], row_bytes(events)[warmup:], merged_service(measured)
    copies = Copies.of(seqs, sizes, service, n_dispatchers, like=like,
                       second=merged_service(measured, "second_service"))
    metrics.update(network_metrics(profile, copies, metrics, workers, n_dispatchers,
                                   sum(e.merge_max_s for e in measured)))
    metrics.update(balance_metrics(workers))
    metrics["shipped_bytes"] = float(sum(e.shipped_bytes for e in measured))
    metrics["shipped_blocks"] = float(sum(e.shipped_blocks for e in measured))
    by_time = getattr(latency_cfg, "arrivals", "even") == "event_time"
    rate = latency_cfg.rate_eps or (native_rate(events.ts[warmup:]) if by_time else None) \
        or latency_cfg.rate_fraction * metrics["throughput_eps"]
    n_meas = len(events) - warmup
    route_s = sum(e.route_ns for e in measured) / 1e9
    observe_s = sum(e.observe_s for e in measured)
    # a dispatcher routes its share of the events and keeps its whole copy of the routing state current
    service_s = (route_s + observe_s * n_dispatchers) / max(n_meas, 1)
    lat = latency_model.event_latencies(copies, len(seqs), service_s, n_dispatchers, rate, profile,
                                        events.ts[warmup:] if by_time else None)
    metrics.update(latency_model.summarise(lat))
    if not by_time and not latency_cfg.rate_eps:  # at one common rate when claims compare runs
        metrics[LATENCY_CURVE] = latency_curve(copies, len(seqs), service_s, n_dispatchers, profile, metrics)
    per_ts = per_timestamp(measured, events, n_workers)
    metrics.update(timestamp_metrics(per_ts))
    metrics["latency_rate_eps"] = rate
    metrics["stored_replication"] = stored_replication(measured, events, warmup)
    metrics.update(family_figures(workers, measured))
    metrics.update(snapshot_metrics(lat, events.kind[warmup:], copies, workers, events.family[warmup:]))
    adjusted = [r for r in series if "operation" in r]
    for key in SERIES_TOTALS:
        if key in SELECTION_EXTRAS and not (adjusted and all(key in r for r in adjusted)):
            continue  # an interval or count only when every adjustment reported it
        metrics[key] = float(sum(r.get(key, 0.0) for r in series))
    metrics["adjustments"] = float(sum(1 for r in series if "operation" in r))
    sample = pd.DataFrame({"latency_ms": np.sort(lat)[:: max(1, len(lat) // 20000)] * 1000.0})
    return RunSummary(metrics, workers, sample,
                      epoch_series(series, measured, sizes, seqs, profile, n_workers, n_dispatchers, copies,
                                   latency_s=lat, kinds=events.kind[warmup:]),
                      timestamp_series(per_ts))


REPEATED = ("throughput_eps", "throughput_compute_eps", "throughput_network_eps", "worker_busy_max_s", "route_s")


def repeated_figures(measured, copies: Copies, n_obj: int, n_q: int, n_workers: int, n_dispatchers: int,
                     profile: NetworkProfile) -> dict:
    """The REPEATED figures of one repetition, as `summarise_run` computes them (the same
    functions), without the latency model and the rest: a repetition differs from another only in
    its times. `copies`: the run's copies (the same in every repetition; their service times are
    not read here)."""
    workers = worker_table([e.worker_stats for e in measured], n_workers)
    metrics = run_metrics(measured, workers, n_dispatchers, n_obj, n_q)
    metrics.update(network_metrics(replace(profile, sweep_bandwidths_bps=()), copies, metrics, workers,
                                   n_dispatchers, sum(e.merge_max_s for e in measured)))
    return {k: metrics[k] for k in REPEATED}


def summarise_repetitions(repetitions: list[list], series: list[dict], events: Events, warmup: int, n_workers: int,
                          n_dispatchers: int, latency_cfg, profile: NetworkProfile, measure) -> RunSummary:
    """The run's summary over its repetitions (harness/core/repetitions.py): the repetition whose
    throughput is the median's gives the figures (its whole summary, the latency model's included,
    is computed for it alone), the throughputs themselves are the medians with their intervals, and
    every counted repetition's throughputs are kept (`reps_*`, JSON lists)."""
    n_reps = len(repetitions[0]) if repetitions else 1
    counted = list(kept(n_reps, measure.discard))
    runs = {r: [reps[r] for reps in repetitions] for r in counted}
    n_obj, n_q = measured_inputs(events, warmup)
    copies = Copies.of(events.seq[warmup:], row_bytes(events)[warmup:], merged_service(runs[counted[0]]),
                       n_dispatchers, second=merged_service(runs[counted[0]], "second_service"))
    figures = [repeated_figures(runs[r], copies, n_obj, n_q, n_workers, n_dispatchers, profile) for r in counted]
    values = {k: [f[k] for f in figures] for k in REPEATED}
    pick = counted[int(np.argsort(values["throughput_eps"], kind="stable")[(len(counted) - 1) // 2])]
    summary = summarise_run(runs[pick], series, events, warmup, n_workers, n_dispatchers, latency_cfg, profile,
                            like=copies)
    metrics = summary.metrics
    for k, vs in values.items():
        med, lo, hi, coverage = median_interval(vs)
        metrics.update({k: med, f"{k}_ci_lo": lo, f"{k}_ci_hi": hi, f"reps_{k}": json.dumps(vs)})
    metrics.update(repetitions=float(len(counted)), repetitions_discarded=float(n_reps - len(counted)),
                   ci_coverage=coverage, too_short=float(metrics["bottleneck_s"] < measure.min_bottleneck_s))
    return summary


def timed_summary(*args) -> tuple[RunSummary, float]:
    """`summarise_repetitions(*args)` and its seconds: what a run's summary costs wherever it runs
    (a sweep's runs are summarised in the driver's pool, two at a time: harness/run/runner.py)."""
    t0 = time.perf_counter()
    summary = summarise_repetitions(*args)
    return summary, time.perf_counter() - t0
