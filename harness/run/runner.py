"""One experiment invocation: validate, start Spark, prepare data, run each strategy, record.

A run is (dataset, workload, strategy, workers, cluster, seed). The warm-up prefix is epoch 0:
it is the strategies' fitting sample and fills the workers' state, and is not measured; the rest
of the stream is the measured epoch. The runs of an invocation share its dataset, its cached
stream and its oracle (harness/run/oracle.py) and run side by side as lanes of shared epoch jobs;
each leaves its record (harness/run/record.py: folder, runs-table row, MLflow run) whether it
failed or not, and a failed strategy does not stop the others.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from harness.core import store
from harness.core import machine_load
from harness.core.events import Events
from harness.engine.assembly import assemble_run
from harness.engine.epochs import epoch_bounds
from harness.engine.executors import SparkExecutor
from harness.engine.lockstep import Lockstep
from harness.engine.loop import run_epochs
from harness.engine.memory import driver_peak_bytes
from harness.report import results
from harness.measure.summary import timed_summary
from harness.report.table import idle_workers
from harness.run import aa_pair, fits
from harness.run import processes as processes_mod
from harness.run import record
from harness.run.config import Job, RunSpec, network_profile, resolve_job, spark_master
from harness.run.oracle import cached_oracle
from harness.run.stream_record import stream_identity
from harness.run.progress import Progress
from harness.run.watchdog import ExecutorWatchdog, LostExecutors
from harness.run.workload_cache import load_or_build_workload, publish_events
from strategies import registry
from strategies.base import FitContext


LAST_RUNS = {"runs": 0}  # runs the last invocation made (the sweep's progress line counts them)


@dataclass
class Invocation:
    """What every run of one invocation shares: the prepared dataset, its stream and warm-up
    prefix, the oracle's digest and how it was found, where the runs are recorded, what every row
    carries about the input and the invocation's own time, and the fit pool's processes."""

    ds: Any
    events: Events
    warmup: int
    oracle: str | None
    oracle_method: str
    dest: record.Destination
    inputs: dict
    fit_processes: int = 0


@dataclass
class _Waited:
    """The time a run spent waiting for the others (its fit or summary queued in the pool, its
    lane's epoch jobs held by other lanes): left out of its own wall time."""

    fit_s: float = 0.0
    summary_s: float = 0.0
    executor: SparkExecutor | None = None

    @property
    def total_s(self) -> float:
        return self.fit_s + self.summary_s + (self.executor.waited_s if self.executor is not None else 0.0)


def run_strategy(lockstep: Lockstep, lane: int, cfg, spec: RunSpec, inv: Invocation) -> dict:
    """One run as lane `lane` of the invocation's shared epoch jobs; called with the baton held
    (released while its fit runs in a pool process: harness/run/fits.py). Returns its row, recorded."""
    spark = lockstep.spark
    run_dir, base, run_cfg, yaml_text = record.start_run(cfg, spec, inv.dest.root)
    rec = record.RunRecord(run_dir, base, run_cfg, yaml_text)
    state_root = record.run_location(cfg, run_dir, base["run_id"], "state")
    waited = _Waited()
    probe = machine_load.LoadProbe.start()  # the machine's load while it measures (loaded runs are left out)
    t_run = time.perf_counter()
    spark.sparkContext.setJobGroup(base["run_id"], f"{spec.label} w{cfg.workers}")  # its jobs, for task_failures
    try:
        row = _measure(lockstep, lane, cfg, spec, inv, rec, state_root, waited)
    except Exception as exc:  # noqa: BLE001 - record the failure, keep going with the others
        row = record.error_row(base, exc)
    # its own driver time and its share of the epoch jobs, not the time it waited for the others
    rec.row = record.finish_row(row, inv.inputs, inv.oracle, inv.oracle_method,
                                failed_tasks(spark, base["run_id"]) + failed_tasks(spark, lockstep.group),
                                driver_peak_bytes(spark), time.perf_counter() - t_run - waited.total_s)
    rec.row.update(probe.finish(rec.row.get("cpu_wall_ratio"), machine_load.Thresholds.of(cfg.machine)))
    store.remove_tree(state_root)  # between-epoch state only; not a result
    inv.dest.progress.step(f"{spec.label}: logging")
    draw = cfg.run_plots if cfg.run_plots is not None else results.current_sweep_id() is None
    record.record_run(rec, inv.dest, record.mlflow_name(cfg, spec), draw_plots=draw, append=False)
    return rec.row


def _measure(lockstep: Lockstep, lane: int, cfg, spec: RunSpec, inv: Invocation, rec: record.RunRecord,
             state_root: str, waited: _Waited) -> dict:
    """The run itself: its assembly, its strategy's fit, its epochs on Spark and its summary. Fills
    `rec`'s tables and `waited` as it goes (a failure keeps what was done) and returns its row."""
    name, base, progress = spec.label, rec.row, inv.dest.progress
    cls = registry.get(spec.name)
    params = cls.make_params(spec.params)
    context = FitContext(inv.ds.extent, inv.ds.vocab.column("df").to_numpy().astype(np.float64), cfg.seed)
    assembly = assemble_run(cls, inv.events, inv.warmup, context, cfg.workers, dict(cfg.index),
                            workload_family=cfg.workload.family, adjust=cfg.adjust.name,
                            adjust_params=dict(cfg.adjust.params), local_pairs=cfg.local_pairs,
                            keep_pairs=cfg.keep_pairs, anomalies=inv.inputs)
    base["indexes"] = assembly.indexes()
    progress.step(f"{name}: fit")
    t_fit = time.perf_counter()
    router, build_s = fits.fit(cls, assembly.sample, cfg.workers, params, assembly.context, inv.fit_processes,
                               lockstep.wait_released)
    waited.fit_s = max(0.0, time.perf_counter() - t_fit - build_s)  # queued, or others' driver work meanwhile
    fits.remember(name, build_s)
    waited.executor = SparkExecutor(lockstep, lane, assembly.setup, cfg.workers, state_root, cfg.keep_pairs,
                                    record.run_location(cfg, rec.run_dir, base["run_id"], "pairs"), cfg.ship_events)
    bounds = epoch_bounds(inv.events, inv.warmup, cfg.epochs.by, cfg.epochs.size)
    progress.extend(len(bounds) - 2)
    with ExecutorWatchdog(lockstep.spark, base["run_id"], cfg.cluster.lost_executors_timeout_s):
        loop = run_epochs(waited.executor, router, inv.events, assembly.setup, bounds, assembly.adjuster,
                          cfg.workers, cfg.dispatchers, progress, name, cfg.measure.repeat)
    rec.series = loop.series
    # in the pool, two runs at a time, while this one waits without the baton (ADR-0044)
    t_sum = time.perf_counter()
    summary, summary_s = processes_mod.call(
        inv.fit_processes, timed_summary, loop.repetitions, loop.series, inv.events, inv.warmup, cfg.workers,
        cfg.dispatchers, OmegaConf.to_object(cfg.latency), network_profile(cfg), OmegaConf.to_object(cfg.measure),
        wait=lockstep.wait_released)
    waited.summary_s = max(0.0, time.perf_counter() - t_sum - summary_s)
    rec.workers, rec.latency_sample, rec.epochs = summary.workers, summary.latency_sample, summary.epochs
    record.write_timeline(rec.run_dir, summary.timeline)
    rec.router_info = loop.router.describe()
    row = record.measured_row(base, summary.metrics, loop, assembly.setup, loop.router, build_s, inv.oracle,
                              cfg.adjust.name)
    row["cpu_wall_ratio"] = machine_load.cpu_wall_ratio(loop.repetitions, cfg.measure.discard)
    return row


def run_lanes(spark, cfg, runs: list[RunSpec], events_path: str, inv: Invocation) -> list[dict]:
    """`runs` in lockstep (harness/engine/lockstep.py): a thread each, one Spark job per epoch for
    all of them; their rows in the order of `runs`."""
    group = f"shared-{results.new_run_id('lanes')}"
    lockstep = Lockstep(spark, events_path, cfg.workers, group,
                        lambda: ExecutorWatchdog(spark, group, cfg.cluster.lost_executors_timeout_s),
                        fatal=(LostExecutors,))
    out: list = [None] * len(runs)
    try:
        # started slowest fit first (by the last invocation's fits), so the pool's fits end together
        lockstep.run_lanes([partial(run_strategy, lockstep, lane, cfg, spec, inv) for lane, spec in enumerate(runs)],
                           out, order=fits.longest_first([spec.label for spec in runs]),
                           names=[f"run-{spec.label}" for spec in runs])
    finally:  # the rows of the runs that ended, each in its folder already
        try:
            inv.dest.logger.wait()  # their MLflow runs (mlflow_s, mlflow_error in the rows)
        finally:
            done = [row for row in out if isinstance(row, dict)]
            if done:
                results.append_runs_table(inv.dest.root, done)
    for row in out:
        if isinstance(row, BaseException):
            raise row
    return out


def failed_tasks(spark, group: str) -> int:
    """Failures Spark recovered from in a run's jobs (an executor lost, a Python worker crashed),
    from its status tracker: the failed task attempts of each stage's latest attempt, plus one per
    earlier attempt of a stage it had to resubmit (a lost executor's shuffle output is fetched by
    the next stage, which then reruns the parent: the tracker keeps only the latest attempt)."""
    tracker = spark.sparkContext.statusTracker()
    failed = 0
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        for stage in (info.stageIds if info else []):
            st = tracker.getStageInfo(stage)
            failed += (st.numFailedTasks + st.currentAttemptId) if st else 0
    return int(failed)


class DataPreparationError(ValueError):
    """The dataset or workload could not be prepared from the user's input (a ValueError raised in
    datasets/); `rows` are the error rows recorded for the runs that could not start."""

    def __init__(self, message: str, rows: list[dict]):
        super().__init__(message)
        self.rows = rows


def ship_plugins(spark, modules: list[str]) -> None:
    """Make the query-family plugin modules that are single files importable on the executors
    (a package must be installed where the executors run)."""
    import importlib.util

    for module in modules:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.origin and spec.origin.endswith(".py") and not spec.submodule_search_locations:
            spark.sparkContext.addPyFile(spec.origin)


def _warn_idle_workers(row: dict, progress: Progress) -> None:
    """More workers than the workload can use leave some with no events: say so, since their load 0
    makes L_max/L_min infinite and the comparison otherwise reads like a strategy's fault."""
    if idle_workers(row):
        progress.warn(f"{row['variant']}: workers={row['workers']} requested, {int(row['partitions_actual'])} "
                      "received events; L_max/L_min is inf because idle workers have load 0")


def _dataset(cfg, spark, root, progress: Progress):
    """The prepared dataset the runs read. An event-file run (workload.source=file) prepares only
    what it reads (issue 52): no generated data set (its objects are the file's), a file dataset
    (dataset=file) for its vocabulary and projection; its space is the file's objects' box."""
    from datasets import prepare_dataset
    from datasets.config import source_of
    from datasets.prepare import events_dataset
    from harness.families import registry as families
    from harness.families.workload import file_formats

    by_file = cfg.workload.source == "file"
    code = families.get(cfg.workload.family).code
    if by_file and source_of(cfg.dataset.name) != "file":
        progress.step(f"reading events file {cfg.workload.path}")
        return events_dataset(cfg.workload, code, formats=file_formats())
    progress.step(f"preparing dataset {cfg.dataset.name}")
    ds = prepare_dataset(cfg.dataset, spark, root / "cache" / "datasets")
    return events_dataset(cfg.workload, code, ds, file_formats()) if by_file else ds


def run_experiment(cfg, job: Job | None = None) -> list[dict]:
    """Everything `python -m harness` does after Hydra composed the config: the job it asks for,
    resolved and checked once before Spark starts (`job`: already resolved by the caller), run."""
    from harness.run.spark import get_session, session_start_seconds

    job = job if job is not None else resolve_job(cfg)  # before Spark starts
    runs = list(job.runs)
    root = results.results_root(cfg.results_dir)
    root.mkdir(parents=True, exist_ok=True)
    runs = record.unfinished(cfg, runs, root)
    if not runs:
        return []
    progress = Progress(enabled=cfg.progress, total=3 + len(runs) * 5)
    processes = fits.fit_processes(cfg.fit_processes, len(runs) if cfg.share_jobs else 1)
    fits.warm(processes)  # its processes start while Spark starts and the data is prepared
    if processes and cfg.mlflow.enabled:
        results.warm_logging(processes_mod.logging_process())
    timings = {}
    master = spark_master(cfg)
    progress.step(f"starting Spark ({master})")
    spark = get_session(master, conf=dict(cfg.cluster.conf))
    timings["spark_start_s"] = session_start_seconds()
    ship_plugins(spark, list(cfg.families))
    # a sweep's runs are logged in a process of their own (harness/report/results.py: MlflowLogger)
    logging = processes_mod.logging_process() if processes and cfg.mlflow.enabled else None
    logger = results.MlflowLogger(root, cfg.mlflow.experiment, cfg.mlflow.enabled, process=logging)
    parent = cfg.mlflow.parent_run_id or results.current_sweep_parent()
    if parent is None and len(runs) > 1:
        parent = logger.start_parent(f"{cfg.tag or 'compare'}-w{cfg.workers}-{cfg.workload.name}",
                                     {"strategies": ",".join(r.label for r in runs), "workers": cfg.workers,
                                      "workload": cfg.workload.name, "dataset": record.dataset_label(cfg)})
    dest = record.Destination(root, logger, parent, progress)
    t0 = time.perf_counter()
    inputs = {}
    try:
        ds = _dataset(cfg, spark, root, progress)
        inputs = record.input_metrics(ds, None)
        if inputs["bad_rows"]:
            hints = [h for h in (ds.swap_hint(), ds.rest_of_line_hint()) if h]
            progress.warn("malformed input rows skipped: " + ", ".join(f"{k}={v}" for k, v in ds.bad_rows.items() if v)
                          + "".join(f"; {h}" for h in hints))
        events, warmup, folder, meta = load_or_build_workload(ds, cfg, root / "cache")
    except Exception as exc:  # noqa: BLE001 - recorded, then a user's bad input is one line, a bug a traceback
        progress.done()
        rows = record.record_failed_preparation(cfg, runs, exc, inputs, dest)
        if isinstance(exc, ValueError):
            raise DataPreparationError(str(exc), rows) from exc
        raise
    # the cached stream it read (issue 42) and the dataset cache its words and ids are in (issue 52)
    inputs = {**record.input_metrics(ds, meta), **stream_identity(folder), "dataset_cache": ds.cache_path or None}
    timings["data_s"] = time.perf_counter() - t0
    events_path = publish_events(cfg, folder)
    progress.step("oracle")
    t0 = time.perf_counter()
    oracle, oracle_method = (cached_oracle(events, folder, cfg, spark, events_path, ds.extent) if cfg.oracle.enabled
                             else (None, "none"))
    timings["oracle_s"] = time.perf_counter() - t0
    rows = []
    timings["invocation_share_s"] = sum(timings.values()) / len(runs)  # in each run's fixed cost
    shared = {**inputs, **{f"time_{k}": v for k, v in timings.items()}}  # every run of the invocation's row
    shared["aa_role"] = aa_pair.role(cfg)  # the preset's A/A pair: its first job (a1), measured again at its end (a2)
    inv = Invocation(ds, events, warmup, oracle, oracle_method, dest, shared, processes)
    # all runs in one set of shared epoch jobs, or (share_jobs=false) each run with jobs of its own
    for group in ([runs] if cfg.share_jobs else [[spec] for spec in runs]):
        rows += run_lanes(spark, cfg, group, events_path, inv)
    for row in rows:
        _warn_idle_workers(row, progress)
    progress.done()
    LAST_RUNS["runs"] = len(rows)
    return rows
