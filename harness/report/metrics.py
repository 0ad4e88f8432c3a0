"""The registry (METRICS) that gives every metric a run reports its unit, meaning, better direction,
display format and whether it is a column of the runs table, for the table, plots, report, claims,
MLflow and docs/metrics.md to share. The figures themselves are computed during a run by
harness/measure/ (run_metrics.py, summary.py, latency.py, network.py, timestamps.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

import numpy as np
import pandas as pd

from datasets.config import BAD_ROW_REASONS
from harness.core.machine_load import COLUMNS as MACHINE_LOAD_COLUMNS
from harness.core.metric import BETTER, Metric  # noqa: F401 - the registry's readers import them from here
from harness.families import registry as families


# ---------------------------------------------------------------- the registry
# After ann-benchmarks' plotting/metrics.py: every reader takes names, units, directions and
# formats from here, so no two of them can disagree on what a metric means or which way is better.


# the network model's resources (harness/measure/network.py), each with its time column resource_<name>_s
RESOURCES = ("dispatcher_cpu", "dispatcher_link", "worker_link", "worker_cpu", "merge")


def family_metrics() -> dict[str, Metric]:
    """The registry entries of every registered query family's own figures (`Family.metrics`), and
    of its snapshot queries' mean latency when it names their type (`Family.snapshot_type`)."""
    out: dict[str, Metric] = {}
    for name in families.names():
        fam = families.get(name)
        out.update({m.name: m for m in fam.metrics})
        t = fam.snapshot_type
        if t is not None:
            out[f"{t}_latency_mean_ms"] = Metric(
                f"{t}_latency_mean_ms", f"{t.upper()} latency mean", "ms", f"mean latency of the {t.upper()}s alone "
                "under the queue model (a mixed workload's per-type figure)", "lower", **_US)
    return out


# the counts datasets/workloads/anomalies.py reports (run_experiment carries whichever it returns)
ANOMALIES = {"orphan_deletes": "deletions of a query id that is not live",
             "duplicate_inserts": "insertions of a query id that is already live",
             "reused_ids": "query ids inserted again after their deletion",
             "duplicate_object_ids": "object events repeating an earlier object's id (kept: results are sets)",
             "delete_payloads_filled": "deletions that took their insertion's payload so they reach its workers"}
_COUNT = "{:,.0f}"
_MB = {"fmt": "{:,.2f}", "display_unit": "MB", "scale": 1e-6}
_MS = {"fmt": "{:,.1f}", "display_unit": "ms", "scale": 1e3}
# latencies are stored in ms and shown in microseconds: the queue model's figures below saturation
# are a few microseconds, which "0.00 ms" hid (issue 48); the latency_floor precondition names the
# model's floor (harness/report/claims/preconditions.py)
_US = {"fmt": "{:,.1f}", "display_unit": "µs", "scale": 1e3}
_PCT = {"fmt": "{:.1f}", "display_unit": "%", "scale": 100.0}
_RATIO = {"fmt": "{:.2f}", "log": True}

_METRICS = [
    # throughput and time (docs/metrics.md)
    Metric("events", "events", "events", "measured input events (warm-up excluded)", None, _COUNT),
    Metric("throughput_eps", "throughput", "events/s",
           "the throughput the network profile names (network.headline; throughput_basis says which): "
           "throughput_network_eps, or throughput_compute_eps under network=none", "higher", _COUNT),
    Metric("throughput_compute_eps", "compute-only throughput", "events/s",
           "measured events / the busier of a dispatcher's routing time and the busiest worker's CPU time; "
           "moving events costs nothing", "higher", _COUNT),
    Metric("throughput_network_eps", "throughput with network", "events/s",
           "measured events / the busiest resource of the network model (dispatcher CPU with sending, dispatcher "
           "and worker links, worker CPU with receiving, merge; harness/measure/network.py)", "higher", _COUNT),
    Metric("throughput_projected_eps", "projected throughput", "events/s",
           "the projected basis (issue 51): this machine's per-operation costs, fitted per strategy on the timed "
           "runs, times the counts of a count-mode run of the same cell at the paper's size; added when the claims "
           "are judged, never stored (harness/report/projection.py, harness/report/claims/bases.py)", "higher",
           _COUNT, column=False),
    Metric("throughput_basis", "throughput basis", "", "which throughput throughput_eps is: compute, or network "
           "(<profile>)", None, "{}"),
    *(Metric(f"{k}_ci_{end}", f"{short} 95% {side}", "events/s", f"{side} end of the interval of {k}'s median over "
             "the counted repetitions (its coverage: ci_coverage)", "higher", _COUNT)
      for k, short in (("throughput_eps", "throughput"), ("throughput_compute_eps", "compute-only throughput"),
                       ("throughput_network_eps", "throughput with network"))
      for end, side in (("lo", "lower"), ("hi", "upper"))),
    *(Metric(f"worker_busy_max_s_ci_{end}", f"busiest worker time 95% {side}", "s", f"{side} end of the interval of "
             "worker_busy_max_s's median over the counted repetitions", "lower", "{:.3f}")
      for end, side in (("lo", "lower"), ("hi", "upper"))),
    *(Metric(f"route_s_ci_{end}", f"routing time 95% {side}", "s", f"{side} end of the interval of route_s's median "
             "over the counted repetitions", "lower", "{:.4f}")
      for end, side in (("lo", "lower"), ("hi", "upper"))),
    *(Metric(f"reps_{k}", f"{k} per repetition", "", f"JSON list of {k} in each counted repetition", None, "{}")
      for k in ("throughput_eps", "throughput_compute_eps", "throughput_network_eps", "worker_busy_max_s",
                "route_s")),
    Metric("repetitions", "repetitions", "repetitions", "counted repetitions of the measured epochs (measure.repeat "
           "less measure.discard)", None, _COUNT),
    Metric("repetitions_discarded", "repetitions discarded", "repetitions", "first repetitions not counted "
           "(compilation, first touch)", None, _COUNT),
    Metric("ci_coverage", "interval coverage", "", "the probability that the throughput interval covers the median "
           "(order statistics; 95% from six counted repetitions on)", None, **_PCT),
    Metric("too_short", "too short to measure", "", "1 when bottleneck_s < measure.min_bottleneck_s: the figure is "
           "timer noise more than work", None, "{:.0f}"),
    Metric("throughput_by_bandwidth", "throughput by bandwidth", "", "JSON {bandwidth bits/s: throughput_network_eps}"
           " of the run re-evaluated at network.sweep_bandwidths_bps (0: unlimited)", None, "{}"),
    Metric("bottleneck_resource", "bottleneck", "", "the network model's busiest resource: dispatcher_cpu, "
           "dispatcher_link, worker_link, worker_cpu or merge", None, "{}"),
    Metric("bottleneck_compute_s", "compute bottleneck time", "s", "what throughput_compute_eps divides", "lower",
           "{:.3f}"),
    Metric("bottleneck_network_s", "network bottleneck time", "s", "what throughput_network_eps divides", "lower",
           "{:.3f}"),
    *(Metric(f"resource_{r}_s", f"{r.replace('_', ' ')} time", "s", f"the busiest {r.replace('_', ' ')}'s time "
             "under the network model", "lower", "{:.4f}")
      for r in RESOURCES),
    Metric("network_bytes", "bytes sent", "bytes", "dispatcher -> worker bytes of the event copies, block framing "
           "included (the network model's traffic)", "lower", **_MB),
    Metric("network_payload_bytes", "event bytes sent", "bytes", "the event copies' bytes alone (network_bytes less "
           "the block framing)", "lower", **_MB),
    Metric("shipped_bytes", "bytes the pipeline shipped", "bytes", "IPC bytes of the blocks the dispatch stage emitted "
           "to workers (seqs, or events under ship_events=true)", "lower", **_MB),
    Metric("shipped_blocks", "blocks the pipeline shipped", "blocks", "blocks the dispatch stage emitted to workers",
           None, _COUNT),
    Metric("bytes_per_event", "bytes per event", "bytes", "network_bytes / measured events", "lower", "{:,.0f}"),
    Metric("throughput_wall_eps", "wall-clock throughput", "events/s",
           "measured events / Spark wall-clock time of the measured epochs", "higher", _COUNT),
    Metric("bottleneck_s", "bottleneck time", "s", "what throughput_eps divides (bottleneck_network_s or "
           "bottleneck_compute_s)", "lower", "{:.3f}"),
    Metric("route_s", "routing time", "s", "a dispatcher's share of the routing alone (the routers' route calls): "
           "no routing-state upkeep (observe_s), no sending; Tornado Fig. 9's routing time", "lower", "{:.4f}"),
    Metric("dispatcher_s", "dispatcher time", "s", "a dispatcher's time: its share of the routing plus observe_s",
           "lower", "{:.3f}", column=False),
    Metric("observe_s", "routing-state upkeep", "s",
           "driver seconds of Router.observe_inserts, charged in full to every dispatcher", "lower", "{:.3f}"),
    Metric("worker_busy_max_s", "busiest worker time", "s", "the busiest worker's index CPU time plus its stalls",
           "lower", "{:.3f}"),
    Metric("worker_busy_sum_s", "total worker time", "s", "index CPU time summed over workers", "lower", "{:.3f}",
           column=False),
    Metric("merge_s", "merge time", "s", "merge stage CPU seconds (all mergers)", "lower", "{:.3f}"),
    Metric("build_s", "build time", "s", "strategy fit time", "lower", "{:.3f}"),
    # latency (the queue model, harness/measure/latency.py)
    *(Metric(f"latency_{k}_ms", f"latency {k}", "ms", f"{k} event latency under the queue model", "lower", **_US)
      for k in ("mean", "p50", "p95", "p99")),
    Metric("latency_share_lt_100ms", "latency < 100 ms", "", "share of events with latency < 100 ms", "higher", **_PCT),
    Metric("latency_share_100ms_1s", "latency 100 ms - 1 s", "", "share of events with latency in [100 ms, 1 s]",
           None, **_PCT),
    Metric("latency_share_gt_1s", "latency > 1 s", "", "share of events with latency > 1 s", "lower", **_PCT),
    Metric("latency_rate_eps", "latency input rate", "events/s", "the input rate the latency model assumed", None,
           _COUNT, column=False),
    Metric("latency_curve", "latency curve", "", "JSON {compute|network: [[input rate events/s, mean latency "
           "ms], ...]}: the queue model at 5-70% of the run's own throughput on each basis, so claims compare "
           "strategies at one common rate", None, "{}"),
    # work and balance
    Metric("load_sum", "total load", "", "sum of the worker loads L_i (PS2Stream Def. 1, c = 1)", "lower", _COUNT),
    Metric("load_max_min", "L_max/L_min", "", "largest / smallest worker load L_i (inf if a worker has none)",
           "lower", **_RATIO),
    Metric("load_max_mean", "L_max/L_mean", "", "largest / mean worker load L_i", "lower", **_RATIO),
    Metric("busy_max_min", "busy max/min", "", "largest / smallest measured worker busy time (the work done, not "
           "the load model)", "lower", **_RATIO),
    Metric("busy_max_mean", "busy max/mean", "", "largest / mean measured worker busy time", "lower", **_RATIO),
    Metric("checks_max_min", "checks max/min", "", "largest / smallest candidate checks per worker", "lower",
           **_RATIO),
    Metric("checks_max_mean", "checks max/mean", "", "largest / mean candidate checks per worker", "lower", **_RATIO),
    Metric("unit_load_max_min", "unit L_max/L_min", "",
           "balance of the monitor's unit loads per worker (what SSTD's detection compares)", "lower", **_RATIO,
           column=False),
    Metric("obj_replication", "object replication", "", "routed object copies / input objects", "lower", "{:.2f}"),
    Metric("query_replication", "query replication", "", "routed query-update copies / input query updates",
           "lower", "{:.2f}"),
    Metric("stored_replication", "replication ratio", "", "subscription copies the workers hold / live "
           "subscriptions, read at each measured epoch's end (after the first thresholds prune) and averaged "
           "over the measured epochs (DSkype Table 5: times a subscription is stored)",
           "lower", "{:.2f}"),
    # snapshot queries (SSTD's SRQ / SKQ; NaN-free only in workloads that have them)
    *(Metric(f"snapshot_latency_{k}_ms", f"snapshot latency {k}", "ms", f"{k} latency of the snapshot queries "
             "alone under the queue model (SSTD's measure)", "lower", **_US) for k in ("mean", "p50", "p95")),
    Metric("snapshot_queries", "snapshot queries", "queries", "snapshot queries in the measured part", None, _COUNT),
    Metric("snapshot_workers_mean", "workers per snapshot query", "workers", "workers a snapshot query reaches, "
           "mean (SSTD's partitions accessed)", "lower", "{:.2f}"),
    Metric("stored_objects_max", "stored objects (max)", "objects", "objects the fullest worker keeps for snapshot "
           "queries at the end of an epoch (largest over the measured epochs)", "lower", _COUNT),
    Metric("stored_objects_sum", "stored objects", "objects", "objects all workers keep for snapshot queries "
           "(copies counted: a broadcast strategy keeps one per worker)", "lower", _COUNT),
    Metric("stored_bytes_max", "stored bytes (max)", "bytes", "bytes the fullest worker's object stores hold for "
           "snapshot queries: objects, their terms and cells, the postings built (ObjectStore.stored_bytes); the "
           "most after any slice of an epoch, largest over the measured epochs", "lower", **_MB),
    Metric("stored_bytes_sum", "stored bytes", "bytes", "bytes all workers' object stores hold for snapshot "
           "queries (each worker's largest over the measured epochs, summed; copies counted)", "lower", **_MB),
    Metric("resent", "subscriptions re-sent", "copies", "subscription copies sent to workers their route gained "
           "between epochs (DSkype's prefix reallocation)", "lower", _COUNT),
    Metric("messages_routed", "messages routed", "messages", "(event, worker) pairs the dispatchers sent", "lower",
           _COUNT),
    Metric("candidates_sum", "candidate checks", "checks", "(object, subscription) checks summed over workers",
           "lower", _COUNT, column=False),
    Metric("partitions_actual", "partitions used", "workers", "workers that received any event", None, _COUNT),
    Metric("replicas_dropped", "replicas dropped", "replicas", "subscription replicas the workers dropped when "
           "feedback narrowed the subscription (a kNN ball) out of their partition", None, _COUNT),
    # DkM-SKS's figures on a time-stamped stream (harness/measure/timestamps.py)
    Metric("timestamps", "time-stamps", "time-stamps", "measured time-stamps of a time-stamped stream", None, _COUNT),
    Metric("update_time_ms_per_ts", "update time", "ms", "mean per time-stamp of the slowest worker's time plus the "
           "main server's time for new subscriptions (DkM-SKS Fig. 7)", "lower", "{:,.2f}"),
    Metric("update_spread_ms_per_ts", "load balance (max - min)", "ms", "mean per time-stamp of the slowest minus "
           "the fastest worker's time (DkM-SKS Table 2)", "lower", "{:,.2f}"),
    Metric("knn_update_ms_per_ts", "kNN update time", "ms", "mean per time-stamp of the slowest worker's time on "
           "objects (DkM-SKS Table 3)", "lower", "{:,.2f}"),
    Metric("ins_ms_per_ts", "insertion time", "ms", "mean per time-stamp of the slowest worker's time on insertions "
           "plus the main server's (DkM-SKS Table 3)", "lower", "{:,.2f}"),
    Metric("update_time_growth", "update time growth", "", "mean update time of the last tenth of the time-stamps "
           "over the first tenth's (DkM-SKS Fig. 7: SOP grows, DkM-SKS stays flat)", None, "{:.2f}"),
    Metric("del_ms_per_ts", "deletion time", "ms", "mean per time-stamp of the slowest worker's time on deletions "
           "(DkM-SKS Table 3)", "lower", "{:,.3f}"),
    Metric("busy_max_s", "busiest worker time", "s", "the epoch's busiest worker's CPU time plus its stall",
           "lower", "{:.3f}", column=False),
    Metric("busy_min_s", "least busy worker time", "s", "the epoch's least busy worker's CPU time plus its stall "
           "(busy_max_s / busy_min_s: the epoch's balance, read after a move)", None, "{:.3f}", column=False),
    Metric("pause_max_s", "largest stall", "s", "the longest migration stall a worker paid in the epoch", "lower",
           "{:.3f}", column=False),
    # memory
    Metric("dispatcher_bytes", "dispatcher memory", "bytes", "bytes of the router's arrays", "lower", **_MB),
    Metric("worker_index_bytes_max", "largest worker index", "bytes", "bytes of the largest worker index", "lower",
           **_MB),
    Metric("worker_index_bytes_mean", "mean worker index", "bytes", "bytes of the average worker's index (what "
           "PS2Stream's Fig. 10 reports)", "lower", **_MB),
    Metric("driver_peak_rss_bytes", "driver peak memory", "bytes",
           "peak resident set of the driver's Python process and its JVM when the run ended", "lower", **_MB),
    Metric("executor_peak_rss_bytes", "executor peak memory", "bytes",
           "largest peak resident set of a worker or merge task's Python process plus its executor JVM (local "
           "mode: the JVM is the driver's)", "lower", **_MB),
    # results and correctness
    Metric("results_raw", "raw results", "pairs", "(query, object) pairs the workers found, duplicates included",
           None, _COUNT, column=False),
    Metric("results", "results", "pairs", "distinct (query, object) pairs of the epoch", None, _COUNT,
           column=False),
    Metric("result_count", "results", "pairs", "distinct (query, object) pairs, all epochs", None, _COUNT),
    Metric("results_local", "results counted on workers", "pairs",
           "distinct pairs of sole object copies, counted where found instead of shuffled to the merge", None,
           _COUNT),
    Metric("result_digest", "result digest", "", "count and order-independent hash of the distinct pairs", None,
           "{}"),
    Metric("oracle_ok", "oracle match", "", "the digest equals the oracle's (oracle_method: brute force or the scale oracle; null: not computed)",
           "higher", "{}"),
    Metric("feedback_rows", "feedback rows", "rows", "per-query feedback values the mergers handed the router", None,
           _COUNT),
    # load adjustment
    Metric("epochs", "measured epochs", "epochs", "measured epochs of the run", None, _COUNT),
    Metric("adjustments", "adjustments", "", "migration plans carried out", None, _COUNT),
    Metric("migrated_queries", "migrated queries", "", "subscriptions moved between workers", "lower", _COUNT),
    Metric("migrated_bytes", "migrated data", "bytes", "worker state moved between workers", "lower", "{:,.1f}",
           display_unit="KB", scale=1e-3),
    Metric("select_s", "plan time", "s", "the adjuster's time to choose its plans", "lower", **_MS),
    Metric("select_cells_s", "cell selection time", "s", "the part of select_s spent choosing cells (PS2Stream: "
           "Phase II alone, the median of twenty timings on the same cells)", "lower", **_MS),
    *(Metric(f"select_cells_s_ci_{end}", f"cell selection time, {side} end", "s", f"{side} end of the interval of "
             "select_cells_s's median over its twenty counted timings (summed over adjustments)", "lower", **_MS)
      for end, side in (("lo", "lower"), ("hi", "upper"))),
    Metric("select_candidates", "candidate cells", "cells", "cells Phase II chose from, summed over the run's "
           "adjustments", None, _COUNT),
    Metric("migration_s", "migration time", "s", "time moving state between workers", "lower", **_MS),
    Metric("migration_job_s", "migration job time", "s", "Spark wall-clock time of the migration job", None,
           "{:.3f}", column=False),
    # the input as it came (datasets/prepare.py, the workload generator): what was skipped, repeated or
    # repaired, so a figure measured on repeats or on a thinned file says so
    Metric("input_rows", "input rows", "rows", "rows the dataset source produced, malformed ones included", None,
           _COUNT),
    Metric("bad_rows", "rows skipped", "rows", "malformed input rows skipped, all reasons", None, _COUNT),
    *(Metric(f"bad_rows_{r}", f"rows skipped: {r}", "rows", f"input rows skipped as {r.replace('_', ' ')}", None,
             _COUNT) for r in BAD_ROW_REASONS),
    Metric("swapped_lat_lon_rows", "rows fitting swapped", "rows", "rows skipped for their latitude whose lon and lat, "
           "swapped, would be valid (many of them: the columns may be swapped)", None, _COUNT),
    Metric("rescued_rows", "rows rescued", "rows", "CSV rows whose text held the delimiter, read whole because the "
           "text column took the rest of the line (dataset.text_rest_of_line)", None, _COUNT),
    Metric("rescuable_rows", "rows the option would rescue", "rows", "field_count_mismatch CSV rows whose text, the "
           "last field, held the delimiter: dataset.text_rest_of_line=true would read them whole (counted while it is "
           "off)", None, _COUNT),
    Metric("dataset_objects", "dataset objects", "objects", "objects of the prepared dataset", None, _COUNT),
    Metric("workload_objects", "workload objects", "events", "object events of the workload, warm-up included",
           None, _COUNT),
    Metric("objects_reused", "objects reused", "events",
           "object events beyond the dataset's size: the workload cycled the dataset to fill them", None, _COUNT),
    Metric("object_reuse_factor", "object reuse", "", "workload object events / dataset objects (above 1: each "
           "object used that many times on average)", None, "{:.2f}"),
    Metric("dataset_keywords_per_object", "keywords per object", "terms", "mean distinct terms per dataset object "
           "(DkM-SKS Table 1: Place 2.94, Twitter 5.51)", None, "{:.2f}"),
    Metric("query_keywords_mean", "keywords per query", "terms", "mean keywords per generated kNN subscription",
           None, "{:.2f}"),
    *(Metric(k, k.replace("_", " "), "events", f"stream anomaly normalised when the workload was loaded: {d}", None,
             _COUNT) for k, d in ANOMALIES.items()),
    Metric("ctq_reports", "CTQ reports", "events", "report events derived from the CTQs' registrations (one per "
           "step while a CTQ lives)", None, _COUNT),
    Metric("lifetime_deletes", "lifetime deletes", "events", "deletions an event file's range or kNN inserts got from "
           "their tau (at ts + tau; docs/workloads.md)", None, _COUNT),
    Metric("window", "top-k window", "messages", "|W|: messages of the top-k window (a time window: those of its "
           "first T seconds)", None, _COUNT),
    # where the harness's own time went: descriptive, not the strategy's figure
    *(Metric(f"{k}_span_s", f"{k} stage span", "s", f"wall-clock span of the {k} stage's tasks", None, "{:.3f}",
             column=False) for k in ("dispatch", "workers", "merge")),
    Metric("job_s", "Spark job time", "s", "wall-clock time of the epoch's Spark job", None, "{:.3f}",
           column=False),
    Metric("spark_overhead_s", "Spark overhead", "s", "job_s minus the stage spans", None, "{:.3f}",
           column=False),
    Metric("job_lanes", "runs in the job", "runs", "runs that shared the epoch's Spark job (harness/engine/"
           "lockstep.py; share_jobs=false: 1)", None, _COUNT, column=False),
    Metric("job_share", "share of the job", "", "the run's part of its shared job's task time (routing, the "
           "workers' restore and index work, merging), by which job_s is apportioned to it", None, "{:.3f}",
           column=False),
    Metric("wall_s", "run wall time", "s", "wall-clock time of the strategy's run: its own driver time (fit, "
           "upkeep, summary) and its share of the epoch jobs, not the time it waited for runs it shares jobs "
           "with, nor for a free process to fit in", None, "{:.2f}"),
    Metric("work_s", "measured work", "s", "the measured epochs' routing, routing upkeep, workers' index work "
           "and merging, every repetition (CPU seconds)", None, "{:.3f}"),
    Metric("fixed_s", "fixed cost per run", "s", "everything but the fit and the measured work: wall_s + "
           "logging_s + time_invocation_share_s - build_s - work_s", "lower", "{:.2f}"),
    Metric("time_invocation_share_s", "invocation share", "s", "the invocation's Spark start, data and oracle "
           "time divided by its runs", None, "{:.2f}"),
    Metric("task_failures", "failed tasks", "tasks", "failures Spark recovered from in the run: failed task "
           "attempts plus resubmitted stage attempts (an executor lost, a Python worker crashed)", None, _COUNT),
    Metric("logging_s", "logging time", "s", "time writing the run's folder (config, metrics, tables, plots)", None,
           "{:.1f}"),
    Metric("mlflow_s", "MLflow time", "s", "time logging the run to MLflow, in a background thread while the "
           "invocation's next runs go on (not in fixed_s)", None, "{:.2f}"),
    Metric("time_spark_start_s", "Spark start", "s", "the invocation's Spark start time (shared by its runs)", None,
           "{:.1f}"),
    Metric("time_data_s", "data preparation", "s", "the invocation's dataset and workload preparation time", None,
           "{:.1f}"),
    Metric("time_oracle_s", "oracle time", "s", "the invocation's oracle time (brute force or scale oracle)", None, "{:.1f}"),
    # the machine's load while the run measured (harness/core/machine_load.py); a loaded run is left
    # out of the verdicts with loaded_reason (harness/report/claims/__init__.py)
    Metric("load1_start", "load average at start", "", "the 1-minute load average when the run started", None,
           "{:.2f}"),
    Metric("load1_end", "load average at end", "", "the 1-minute load average when the run ended", None, "{:.2f}"),
    Metric("load_per_core_max", "load per core", "", "the larger of load1_start and load1_end over the cores", None,
           "{:.2f}"),
    Metric("cpu_busy_frac", "machine busy", "", "share of all cores' time not idle over the run (/proc/stat; every "
           "process's, the run's included)", None, **_PCT),
    Metric("steal_frac", "CPU steal", "", "share of all cores' time stolen by the hypervisor over the run "
           "(/proc/stat)", None, **_PCT),
    Metric("cpu_wall_ratio", "CPU/wall of the timed work", "", "the workers' thread CPU time over their wall time "
           "in the counted repetitions: below 1, the worker waited for a core", None, "{:.2f}"),
    Metric("others_busy_frac", "others' CPU", "", "share of all cores' time over the run used by processes "
           "other than the run's own (its driver, JVM and Python workers): the load it did not cause", None, **_PCT),
    Metric("loaded", "measured on a loaded machine", "", "1 when a threshold of `machine` was passed "
           "(others' CPU, steal, gross load per core or CPU/wall): the run is left out of the verdicts", None, "{:.0f}"),
    Metric("loaded_reason", "why loaded", "", "which thresholds the run passed, with its figures", None, "{}"),
    Metric("aa_role", "A/A pair", "", "a1: the preset's first job; a2: the same job measured again at the preset's "
           "end (harness/run/aa_pair.py); their spread widens the verdicts' intervals", None, "{}"),
]
METRICS: dict[str, Metric] = {m.name: m for m in _METRICS}
METRICS.update(family_metrics())  # the figures the families compute (Family.metrics)
LOAD_METRICS = MACHINE_LOAD_COLUMNS  # the machine's load while a run measured (harness/core/machine_load.py)
# what a run row says about its input (every run of an invocation shares them)
TIMESTAMP_METRICS = ("timestamps", "update_time_ms_per_ts", "update_spread_ms_per_ts", "knn_update_ms_per_ts",
                     "ins_ms_per_ts", "del_ms_per_ts", "update_time_growth")
INPUT_METRICS = ("input_rows", "bad_rows", *(f"bad_rows_{r}" for r in BAD_ROW_REASONS), "swapped_lat_lon_rows",
                 "rescued_rows", "rescuable_rows", "ctq_reports", "lifetime_deletes",
                 "dataset_objects",
                 "workload_objects", "objects_reused", "object_reuse_factor", "dataset_keywords_per_object",
                 "query_keywords_mean", "window", *ANOMALIES)
# a run row carries each epoch's stage timings as epoch<N>_<timing>, e.g. epoch0_job_s
_PER_EPOCH = re.compile(r"epoch(\d+)_(\w+)")
# a cached dataset may name a reason BAD_ROW_REASONS no longer lists; its count is still reported
_BAD_ROWS = re.compile(r"bad_rows_(\w+)")


class UnknownMetric(ValueError):
    pass


def metric(name: str) -> Metric:
    """The registered metric (or the per-epoch copy of one); an unknown name lists the known ones."""
    if name in METRICS:
        return METRICS[name]
    late = family_metrics()  # a plugin family registered after this module was imported
    if name in late:
        return late[name]
    hit = _PER_EPOCH.fullmatch(name)
    if hit and hit.group(2) in METRICS:
        base = METRICS[hit.group(2)]
        return replace(base, name=name, short=f"epoch {hit.group(1)} {base.short}",
                       description=f"epoch {hit.group(1)}: {base.description}", column=False)
    hit = _BAD_ROWS.fullmatch(name)
    if hit:
        return replace(METRICS["bad_rows"], name=name, short=f"rows skipped: {hit.group(1)}",
                       description=f"input rows skipped as {hit.group(1).replace('_', ' ')}", column=False)
    raise UnknownMetric(f"unknown metric {name!r}; known metrics: {', '.join(sorted(METRICS))} "
                        "(and epoch<N>_<metric> for per-epoch timings)")


def known(name: str) -> bool:
    try:
        metric(name)
    except UnknownMetric:
        return False
    return True


def label(name: str) -> str:
    """Axis and column title: "throughput (events/s)"."""
    m = metric(name)
    return f"{m.short} ({m.shown_unit})" if m.shown_unit else m.short


def higher_is_better(name: str) -> bool | None:
    """True or False, or None for a descriptive metric (no better direction)."""
    better = metric(name).better
    return None if better is None else better == "higher"


def scale(name: str) -> float:
    return metric(name).scale


def show(name: str, value, unit: bool = False) -> str:
    """The value as the registry formats it ("-" when missing)."""
    m = metric(name)
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return "-"
    try:
        text = m.fmt.format(value * m.scale if m.scale != 1.0 else value)
    except (TypeError, ValueError):
        return "-"
    return f"{text} {m.shown_unit}" if unit and m.shown_unit else text


def numeric(row: dict) -> dict[str, float]:
    """The row's registered metrics with a finite number (booleans as 0/1): what MLflow logs."""
    out = {}
    for k, v in row.items():
        if known(k) and isinstance(v, (bool, int, float, np.integer, np.floating)) and math.isfinite(v):
            out[k] = float(v)
    return out


def describe(names) -> dict[str, dict]:
    """Unit, description and direction of the given metrics (logged beside them)."""
    return {n: {"unit": metric(n).unit, "description": metric(n).description, "better": metric(n).better}
            for n in names}


# ---------------------------------------------------------------- the runs table and its docs
# The registry owns the runs table: a metric is a column unless it says otherwise (`Metric.column`),
# and docs/metrics.md's table of every metric is generated from it, so adding a metric here (or to a
# family's `metrics`) is the one edit that puts it in the table, the docs and MLflow.


def columns() -> list[str]:
    """The registered metrics that are runs-table columns, in the registry's order (a plugin family
    registered after this module was imported included); harness/report/results.py puts the run
    keys before them."""
    return [name for name, m in {**METRICS, **family_metrics()}.items() if m.column]


DOCS_BEGIN = ("<!-- generated from the metrics registry (harness/report/metrics.py) by `make docs`, i.e. "
              "`python -m harness.report.metrics --write-docs docs/metrics.md`: edit the registry, not this table -->")
DOCS_END = "<!-- end of the generated table -->"


def _plugin_only() -> set[str]:
    """Metrics only a plugin family (one defined outside harness/families/) registers: its own docs'."""
    builtin, plugin = {m.name for m in _METRICS}, set()
    for name in families.names():
        fam = families.get(name)
        names = {m.name for m in fam.metrics}
        if fam.snapshot_type is not None:
            names.add(f"{fam.snapshot_type}_latency_mean_ms")
        (builtin if fam.__module__.startswith("harness.families.") else plugin).update(names)
    return plugin - builtin


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")


def docs_table() -> str:
    """The generated part of docs/metrics.md: every registered metric (a plugin family's aside) with its
    unit, better direction, whether the runs table has it, and its description, in the registry's order."""
    skip = _plugin_only()
    lines = [DOCS_BEGIN, "",
             "| metric | name | unit | better | runs table | definition |", "| --- | --- | --- | --- | --- | --- |"]
    for m in METRICS.values():
        if m.name in skip:
            continue
        lines.append(f"| `{m.name}` | {_cell(m.short)} | {_cell(m.unit)} | {m.better or ''} | "
                     f"{'yes' if m.column else 'no'} | {_cell(m.description)} |")
    lines += ["", "A run row (metrics.json, MLflow) also carries each epoch's timings as `epoch<N>_<metric>` "
              "(e.g. `epoch0_job_s`), not in the runs table; a cached dataset's `bad_rows_<reason>` for a "
              "reason no longer listed reads as `bad_rows`.", "", DOCS_END]
    return "\n".join(lines)


def docs_text(current: str) -> str:
    """`current` (docs/metrics.md) with the part between its markers replaced by `docs_table()`; the
    hand-written text around it is kept."""
    if current.count(DOCS_BEGIN) != 1 or current.count(DOCS_END) != 1:
        raise ValueError(f"docs/metrics.md needs exactly one {DOCS_BEGIN!r} line and one {DOCS_END!r} line "
                         "around the generated table")
    head, rest = current.split(DOCS_BEGIN)
    tail = rest.split(DOCS_END)[1]
    return head + docs_table() + tail


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="python -m harness.report.metrics",
                                     description="Generate docs/metrics.md's table of every metric from the registry.")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write-docs", metavar="FILE", help="rewrite FILE's generated table (docs/metrics.md)")
    mode.add_argument("--check-docs", metavar="FILE", help="exit 1 when FILE's generated table is stale")
    args = parser.parse_args(argv)
    path = Path(args.write_docs or args.check_docs)
    current = path.read_text()
    fresh = docs_text(current)
    if args.check_docs:
        if fresh != current:
            print(f"{path} is stale: run `make docs`", file=sys.stderr)
            return 1
        return 0
    if fresh != current:
        path.write_text(fresh)
        print(f"wrote: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
