"""A finished run's figures from its epochs: the metrics, the per-worker table, the latency model's
sample and the per-epoch series (definitions: README, DESIGN.md)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.core.events import DELETE, INSERT, OBJECT, Events
from harness.engine.monitor import worker_table
from harness.report import latency as latency_model
from harness.report.metrics import run_metrics
from harness.report.timestamps import timestamp_metrics, timestamp_series

SERIES_TOTALS = ("migrated_queries", "migrated_bytes", "select_s", "migration_s", "select_cells_s")


@dataclass
class RunSummary:
    metrics: dict
    workers: pd.DataFrame
    latency_sample: pd.DataFrame
    epochs: pd.DataFrame
    timeline: pd.DataFrame | None = None  # per time-stamp of a time-stamped stream (timestamps.parquet)


def merged_service(epochs) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Each worker's (seq, service seconds) over all the given epochs."""
    parts: dict[int, list] = {}
    for e in epochs:
        for w, (seqs, s) in e.service.items():
            parts.setdefault(w, []).append((seqs, s))
    return {w: (np.concatenate([p[0] for p in ps]), np.concatenate([p[1] for p in ps])) for w, ps in parts.items()}


def stored_replication(measured, events: Events, warmup: int) -> float:
    """Subscription copies the workers held at the start of the measured part / subscriptions live
    then (DSkype's replication ratio, Table 5)."""
    if not measured:
        return float("nan")
    held = sum(st.get("restored", 0) for st in measured[0].worker_stats.values())
    before = events.kind[:warmup]
    live = int((before == INSERT).sum()) - int((before == DELETE).sum())
    return held / live if live > 0 else float("nan")


def buffer_size_mean(measured) -> float:
    """Messages a top-k subscription's buffer holds on average at the end of the run (Skype Table 4);
    NaN for families without buffers."""
    if not measured:
        return float("nan")
    stats = list(measured[-1].worker_stats.values())
    if not any("buffered" in st for st in stats):
        return float("nan")
    held = sum(st.get("kept", 0) for st in stats)
    return sum(st.get("buffered", 0) for st in stats) / held if held else float("nan")


def summarise_run(measured, series: list[dict], events: Events, warmup: int, n_workers: int, n_dispatchers: int,
                  latency_cfg) -> RunSummary:
    workers = worker_table([e.worker_stats for e in measured], n_workers)
    kinds = events.kind[warmup:]
    n_obj = int((kinds == OBJECT).sum())
    n_q = int(((kinds == INSERT) | (kinds == DELETE)).sum())
    metrics = run_metrics(measured, workers, n_dispatchers, n_obj, n_q)
    rate = latency_cfg.rate_eps or latency_cfg.rate_fraction * metrics["throughput_eps"]
    n_meas = len(events) - warmup
    route_s = sum(e.route_ns for e in measured) / 1e9
    observe_s = sum(e.observe_s for e in measured)
    # a dispatcher routes its share of the events and keeps its whole copy of the routing state current
    service_s = (route_s + observe_s * n_dispatchers) / max(n_meas, 1)
    lat = latency_model.event_latencies(events.seq[warmup:], service_s, n_dispatchers, rate, merged_service(measured))
    metrics.update(latency_model.summarise(lat))
    metrics.update(timestamp_metrics(measured, events, n_workers))
    metrics["latency_rate_eps"] = rate
    metrics["stored_replication"] = stored_replication(measured, events, warmup)
    metrics["buffer_size_mean"] = buffer_size_mean(measured)
    for key in SERIES_TOTALS:
        metrics[key] = float(sum(r.get(key, 0.0) for r in series))
    metrics["adjustments"] = float(sum(1 for r in series if "operation" in r))
    sample = pd.DataFrame({"latency_ms": np.sort(lat)[:: max(1, len(lat) // 20000)] * 1000.0})
    return RunSummary(metrics, workers, sample, pd.DataFrame(series),
                      pd.DataFrame(timestamp_series(measured, events, n_workers)))
