"""One experiment invocation: validate, start Spark, prepare data, run each strategy, record.

A run is (dataset, workload, strategy, workers, cluster, seed). The warm-up prefix is epoch 0:
it is the strategies' fitting sample and fills the workers' state, and is not measured; the rest
of the stream is the measured epoch. Every run, failed or not, leaves a folder, a runs-table row
and (when MLflow works) an MLflow run; a failed strategy does not stop the others.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import traceback
from dataclasses import asdict, is_dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from omegaconf import OmegaConf

from harness.core import store
from harness.core.events import INSERT, OBJECT, SNAPSHOT, Events, format_digest
from harness.engine.assembly import assemble_run, run_families
from harness.engine.assembly import oracle_digest as brute_digest
from harness.engine.epochs import epoch_bounds
from harness.engine.executors import SparkExecutor
from harness.engine.lockstep import Lockstep
from harness.engine.loop import run_epochs
from harness.engine.memory import driver_peak_bytes
from harness.families import registry as families
from harness.report import results
from harness.report.summary import timed_summary
from harness.report.table import idle_workers
from harness.run import fits
from harness.run import processes as processes_mod
from harness.run.config import RunSpec, network_profile, spark_master, validate
from harness.run.stream_record import stream_identity
from harness.run.progress import Progress
from harness.run.watchdog import ExecutorWatchdog, LostExecutors
from harness.run.workload_cache import load_or_build_workload, publish_events
from strategies import registry
from strategies.base import FitContext


def _plain(cfg) -> dict:
    if is_dataclass(cfg):
        return asdict(cfg)
    return OmegaConf.to_container(cfg, resolve=True)


def input_metrics(ds, meta: dict | None) -> dict:
    """What a run row says about its input: rows read and skipped per reason (the prepared dataset's
    bad_rows), objects the workload reused and stream anomalies normalised (the workload's info)."""
    out = {"input_rows": ds.n_input_rows, "bad_rows": sum(ds.bad_rows.values()),
           **{f"bad_rows_{k}": v for k, v in ds.bad_rows.items()}, "swapped_lat_lon_rows": ds.swapped_lat_lon_rows,
           "rescued_rows": ds.rescued_rows}
    if meta:
        out.update(meta.get("info") or {})
    return out


def oracle_digest(events: Events, folder: Path, cfg, spark=None, events_path: str | None = None,
                  extent=None) -> tuple[str | None, str]:
    """The centralised answer's digest and how it was found, cached beside the workload: the
    family's brute force on the driver up to `oracle.max_checks` (objects x queries), past it the
    family's scale oracle on Spark (`oracle.method`); (None, "none") when neither may run."""
    path = folder / "oracle.json"
    if path.exists():
        cached = json.loads(path.read_text())
        if cfg.oracle.method in ("auto", cached.get("method", "brute")):
            return cached["digest"], cached.get("method", "brute")
    names = run_families(events, cfg.workload.family)
    family = families.get(names[0])
    n_obj = int((events.kind == OBJECT).sum())
    n_q = int(np.isin(events.kind, (INSERT, SNAPSHOT)).sum())
    fits = n_obj * n_q <= cfg.oracle.max_checks
    if cfg.oracle.method == "brute" or (cfg.oracle.method == "auto" and fits):
        digest, method = brute_digest(events, names), "brute"
    # the scale oracles answer one family's subscriptions only
    elif (family.scale_oracle is not None and spark is not None and len(names) == 1
          and not (events.kind == SNAPSHOT).any()):
        tiles = cfg.oracle.tiles or auto_tiles(n_obj, n_q)
        digest, _ = family.scale_oracle(spark, spark.read.parquet(events_path), extent, tiles)
        method = "tiled"
    else:
        return None, "none"
    path.write_text(json.dumps({"digest": digest, "method": method}))
    return digest, method


def auto_tiles(n_objects: int, n_queries: int) -> int:
    """Tiles per side for the scale oracle: sqrt(n_o n_q / 1e6) within [8, 512] (measured at 100k
    subscriptions and 0.6M objects on STS-Q1: 26, 64, 128 and 256 tiles took 55, 34, 30 and 28 s)."""
    return int(np.clip(np.sqrt(n_objects * max(n_queries, 1) / 1e6), 8, 512))


def _config_value(cfg, path: str | None):
    """The value at a config path (an experiment's swept knob or facet) for this job, as text."""
    if not path:
        return None
    node = cfg
    for part in path.split("."):
        node = node[part] if isinstance(node, dict) else getattr(node, part)
    return str(node)


def _start_run(cfg, spec: RunSpec, root: Path) -> tuple[Path, dict, dict, str]:
    """A run's folder, the row keys that say which run it is, and its config (as dict and YAML)."""
    run_id = results.new_run_id(spec.label)
    run_dir = root / "runs" / run_id
    base = {
        "run_id": run_id, "strategy": spec.name, "variant": spec.label, "workers": cfg.workers,
        "dispatchers": cfg.dispatchers, "dataset": cfg.dataset.name, "workload": cfg.workload.name,
        "seed": cfg.seed, "tag": cfg.tag, "experiment": cfg.experiment.name, "sweep_id": results.current_sweep_id(),
        "cluster": cfg.cluster.name, "x": _config_value(cfg, cfg.experiment.x), "facet": _config_value(cfg, cfg.experiment.facet),
        "started_at": pd.Timestamp.now(tz="UTC").isoformat(), "run_dir": str(run_dir),
        "code_version": results.code_version(),
    }
    run_cfg = _run_config(cfg, spec)
    base["config_key"] = config_key(run_cfg)
    return run_dir, base, run_cfg, config_yaml(run_cfg)


def config_yaml(run_cfg: dict) -> str:
    """A run's plain config as config.yaml holds it: PyYAML's C emitter with OmegaConf's settings
    (block style, keys in order, unicode), which gave OmegaConf.to_yaml's text byte for byte on
    every config of grand_range and dskype_mechanisms at a fifteenth of its time (33 ms a run
    through OmegaConf, about 2% of a sweep's driver time)."""
    return yaml.dump(run_cfg, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), default_flow_style=False,
                     allow_unicode=True, sort_keys=False)


def _run_config(cfg, spec: RunSpec) -> dict:
    run_cfg = _plain(cfg)
    run_cfg["strategy"] = {**run_cfg["strategy"], "name": spec.name, "label": spec.label, "params": spec.params,
                           "variants": []}
    return run_cfg


# settings that change how a run is shown or stored, not what it measures
_NOT_MEASURED = ("progress", "mlflow", "results_dir", "resume", "tag", "keep_pairs", "state_uri", "share_jobs",
                 "run_plots", "fit_processes", "table")


def config_key(run_cfg: dict) -> str:
    """What a run measures, as a hash of its configuration (without display and storage settings,
    and of the experiment only its name and swept knobs): equal keys, the same measurement."""
    plain = {k: v for k, v in run_cfg.items() if k not in _NOT_MEASURED}
    exp = plain.get("experiment") or {}
    plain["experiment"] = {k: exp.get(k) for k in ("name", "x", "facet")}
    return hashlib.sha256(json.dumps(plain, sort_keys=True, default=str).encode()).hexdigest()[:16]


RESUME_SKIPPED = {"runs": 0}  # runs a resumed sweep skipped, over its jobs (printed when it ends)
LAST_RUNS = {"runs": 0}  # runs the last invocation made (the sweep's progress line counts them)


def unfinished(cfg, runs: list[RunSpec], root: Path) -> list[RunSpec]:
    """With resume=true, the runs without a successful row of the same configuration at this code
    version yet (a row of older code is one no claim reads, so its run is made again)."""
    if not cfg.resume or not (root / "runs.parquet").exists():
        return runs
    table = results.read_runs_table(root)
    if "config_key" not in table or "code_version" not in table:
        return runs
    current = (table["status"] == "ok") & (table["code_version"] == results.code_version())
    done = set(table.loc[current, "config_key"].dropna())
    todo = [r for r in runs if config_key(_run_config(cfg, r)) not in done]
    skipped = len(runs) - len(todo)
    RESUME_SKIPPED["runs"] += skipped
    if skipped:
        print(f"resume: skipped {skipped} of {len(runs)} runs already in the runs table "
              f"({', '.join(r.label for r in runs if r not in todo)})")
    return todo


def _mlflow_name(cfg, spec: RunSpec) -> str:
    return f"{spec.label}-w{cfg.workers}-{cfg.workload.name}"


def _run_location(cfg, run_dir: Path, run_id: str, part: str) -> str:
    """Where a run's executors keep `part` (state, pairs): under state_uri when set, else the run folder."""
    return store.join(cfg.state_uri, "runs", run_id, part) if cfg.state_uri else store.as_uri(run_dir / part)


def run_strategy(lockstep: Lockstep, lane: int, cfg, spec: RunSpec, ds, events: Events, warmup: int,
                 oracle: str | None, root: Path, logger: results.MlflowLogger, parent_id: str | None,
                 progress: Progress, inputs: dict | None = None, oracle_method: str = "none",
                 fit_processes: int = 0) -> dict:
    """One run as lane `lane` of the invocation's shared epoch jobs; called with the baton held
    (released while its fit runs in a pool process: harness/run/fits.py)."""
    spark = lockstep.spark

    name = spec.label
    run_dir, base, run_cfg, config_yaml = _start_run(cfg, spec, root)
    state_root = _run_location(cfg, run_dir, base["run_id"], "state")
    t_run = time.perf_counter()
    workers_df = router_info = lat_sample = epochs_df = executor = None
    fit_waited_s = summary_waited_s = 0.0
    series = []
    spark.sparkContext.setJobGroup(base["run_id"], f"{name} w{cfg.workers}")  # its jobs, for task_failures
    try:
        cls = registry.get(spec.name)
        params = cls.make_params(spec.params)
        context = FitContext(ds.extent, ds.vocab.column("df").to_numpy().astype(np.float64), cfg.seed)
        assembly = assemble_run(cls, events, warmup, context, cfg.workers, dict(cfg.index),
                                workload_family=cfg.workload.family, adjust=cfg.adjust.name,
                                adjust_params=dict(cfg.adjust.params), local_pairs=cfg.local_pairs,
                                keep_pairs=cfg.keep_pairs, anomalies=inputs)
        setup, adjuster = assembly.setup, assembly.adjuster
        base["indexes"] = assembly.indexes()
        progress.step(f"{name}: fit")
        t_fit = time.perf_counter()
        router, build_s = fits.fit(cls, assembly.sample, cfg.workers, params, assembly.context, fit_processes,
                                   lockstep.wait_released)
        fit_waited_s = max(0.0, time.perf_counter() - t_fit - build_s)  # queued, or others' driver work meanwhile
        fits.remember(name, build_s)
        executor = SparkExecutor(lockstep, lane, setup, cfg.workers, state_root, cfg.keep_pairs,
                                 _run_location(cfg, run_dir, base["run_id"], "pairs"), cfg.ship_events)
        bounds = epoch_bounds(events, warmup, cfg.epochs.by, cfg.epochs.size)
        progress.extend(len(bounds) - 2)
        with ExecutorWatchdog(spark, base["run_id"], cfg.cluster.lost_executors_timeout_s):
            loop = run_epochs(executor, router, events, setup, bounds, adjuster, cfg.workers, cfg.dispatchers,
                              progress, name, cfg.measure.repeat)
        epochs, series, router = loop.epochs, loop.series, loop.router
        # in the pool, two runs at a time, while this one waits without the baton (a sweep's
        # summaries were a third of its driver time, one after another on one core)
        t_sum = time.perf_counter()
        summary, summary_s = processes_mod.call(
            fit_processes, timed_summary, loop.repetitions, series, events, warmup, cfg.workers, cfg.dispatchers,
            OmegaConf.to_object(cfg.latency), network_profile(cfg), OmegaConf.to_object(cfg.measure),
            wait=lockstep.wait_released)
        summary_waited_s = max(0.0, time.perf_counter() - t_sum - summary_s)
        workers_df, lat_sample, epochs_df, metrics = summary.workers, summary.latency_sample, summary.epochs, \
            summary.metrics
        if summary.timeline is not None and len(summary.timeline):  # per time-stamp (DkM-SKS Fig. 7)
            run_dir.mkdir(parents=True, exist_ok=True)
            summary.timeline.to_parquet(run_dir / "timestamps.parquet", index=False)
        count = sum(e.result_count for e in epochs)
        digest = format_digest(count, sum(e.result_hash for e in epochs))
        router_info = router.describe()
        # what the run measures: routing and its upkeep, the workers' index work, merging (in every
        # repetition: the epoch's tasks did it that many times)
        work_s = sum(e.observe_s for e in loop.measured) + sum(
            e.route_ns / 1e9 + e.merge_busy_s + sum(st.get("busy_s", 0.0) for st in e.worker_stats.values())
            for reps in loop.repetitions for e in reps)
        row = {
            **base, **metrics, "status": "ok", "error": None, "build_s": build_s,
            "family": "+".join(sorted(setup.names.values())),
            "dispatcher_bytes": float(router.size_bytes()), "result_count": count, "result_digest": digest,
            "oracle_ok": None if oracle is None else bool(digest == oracle), "epochs": len(loop.measured),
            "adjust": cfg.adjust.name,
            "executor_peak_rss_bytes": float(max((e.executor_peak_bytes for e in epochs), default=0)),
            "results_local": sum(e.local_pairs for e in epochs), "work_s": work_s,
        }
        for e in epochs:
            for k, v in e.timings.items():
                row[f"epoch{e.epoch}_{k}"] = v
    except Exception as exc:  # noqa: BLE001 - record the failure, keep going with the others
        row = {**base, "status": "error", "error": f"{type(exc).__name__}: {exc}",
               "traceback": traceback.format_exc()}
    row.update(inputs or {})
    row["oracle_method"] = oracle_method if oracle is not None else "none"
    row["task_failures"] = failed_tasks(spark, base["run_id"]) + failed_tasks(spark, lockstep.group)
    row["driver_peak_rss_bytes"] = float(driver_peak_bytes(spark))
    # its own driver time and its share of the epoch jobs, not the time it waited for the others
    row["wall_s"] = (time.perf_counter() - t_run - (executor.waited_s if executor is not None else 0.0)
                     - fit_waited_s - summary_waited_s)
    if row["status"] == "ok":  # the harness's own time for this run (record_run adds its logging)
        row["fixed_s"] = (row["wall_s"] + row.get("time_invocation_share_s", 0.0) - row["build_s"]
                          - row["work_s"])
    store.remove_tree(state_root)  # between-epoch state only; not a result
    progress.step(f"{name}: logging")
    draw = cfg.run_plots if cfg.run_plots is not None else results.current_sweep_id() is None
    record_run(root, run_dir, row, run_cfg, config_yaml, workers_df, router_info, lat_sample, epochs_df, series,
               logger, parent_id, progress, _mlflow_name(cfg, spec), draw_plots=draw, append=False)
    return row


def run_lanes(spark, cfg, runs: list[RunSpec], events_path: str, **shared) -> list[dict]:
    """`runs` in lockstep (harness/engine/lockstep.py): a thread each, one Spark job per epoch for
    all of them; their rows in the order of `runs`."""
    group = f"shared-{results.new_run_id('lanes')}"
    lockstep = Lockstep(spark, events_path, cfg.workers, group,
                        lambda: ExecutorWatchdog(spark, group, cfg.cluster.lost_executors_timeout_s),
                        fatal=(LostExecutors,))
    out: list = [None] * len(runs)

    def lane_main(lane: int, spec: RunSpec) -> None:
        with lockstep.cond:
            try:
                out[lane] = run_strategy(lockstep, lane, cfg, spec, **shared)
            except BaseException as exc:  # noqa: BLE001 - re-raised on the main thread
                out[lane] = exc
            finally:
                lockstep.leave(lane)

    root = shared["root"]
    for lane in range(len(runs)):
        lockstep.enter(lane)
    # started slowest fit first (by the last invocation's fits), so the pool's fits end together
    threads = [threading.Thread(target=lane_main, args=(lane, runs[lane]), name=f"run-{runs[lane].label}", daemon=True)
               for lane in fits.longest_first([spec.label for spec in runs])]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except KeyboardInterrupt:
        spark.sparkContext.cancelAllJobs()
        raise
    finally:  # the rows of the runs that ended, each in its folder already
        try:
            shared["logger"].wait()  # their MLflow runs (mlflow_s, mlflow_error in the rows)
        finally:
            done = [row for row in out if isinstance(row, dict)]
            if done:
                results.append_runs_table(root, done)
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


def record_failed_preparation(cfg, runs: list[RunSpec], exc: BaseException, inputs: dict, root: Path,
                              logger: results.MlflowLogger, parent_id: str | None, progress: Progress) -> list[dict]:
    """An error row per run that was to start, so a sweep's runs table shows why its job has no figures."""
    rows = []
    for spec in runs:
        run_dir, base, run_cfg, config_yaml = _start_run(cfg, spec, root)
        row = {**base, "status": "error", "error": f"preparing data: {type(exc).__name__}: {exc}",
               "traceback": "".join(traceback.format_exception(exc)), "family": cfg.workload.family,
               "adjust": cfg.adjust.name, **inputs}
        record_run(root, run_dir, row, run_cfg, config_yaml, None, None, None, None, [], logger, parent_id, progress,
                   _mlflow_name(cfg, spec))
        rows.append(row)
    return rows


def record_run(root: Path, run_dir: Path, row: dict, run_cfg: dict, config_yaml: str, workers_df, router_info,
               lat_sample, epochs_df, series: list[dict], logger: results.MlflowLogger, parent_id: str | None,
               progress: Progress, mlflow_name: str, draw_plots: bool = True, append: bool = True) -> None:
    """The run's folder (config, metrics, tables, plots) with the time it took (`logging_s`, also
    in `fixed_s`), then its MLflow run, logged in the logger's background thread while the next
    runs go on (`mlflow_s`, not in `fixed_s`; metrics.json is written again with it); the folder
    first, so an MLflow failure loses nothing (the row says why in `mlflow_error`). append=False:
    the caller waits for the logger and appends the row with the others of its invocation (one
    rewrite of the table per invocation, not per run)."""
    t0 = time.perf_counter()
    results.write_run_folder(run_dir, config_yaml, row, workers_df, router_info, lat_sample, epochs_df)
    if workers_df is not None and draw_plots:
        from harness.report import plots

        plots.run_plots(run_dir, workers_df, lat_sample, epochs_df)
    row["logging_s"] = time.perf_counter() - t0
    if "fixed_s" in row:
        row["fixed_s"] += row["logging_s"]
    write_metrics = (lambda: (run_dir / "metrics.json").write_text(
        json.dumps({k: results._jsonable(v) for k, v in row.items()}, indent=2)))
    write_metrics()

    def logged(err: str | None, seconds: float) -> None:
        row["mlflow_s"] = seconds
        if err:
            row["mlflow_error"] = err
            progress.warn(f"MLflow logging failed ({err}); the run is kept in {run_dir} and results/runs.parquet")
        write_metrics()

    logger.log_run(mlflow_name, results.flatten(run_cfg), row, run_dir, parent_id, series, done=logged)
    if append:
        logger.wait()
        results.append_runs_table(root, [row])


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


def run_experiment(cfg) -> list[dict]:
    """Everything `python -m harness` does after Hydra composed the config."""
    from datasets import prepare_dataset
    from harness.run.spark import get_session, session_start_seconds

    runs = validate(cfg)  # before Spark starts
    root = results.results_root(cfg.results_dir)
    root.mkdir(parents=True, exist_ok=True)
    runs = unfinished(cfg, runs, root)
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
                                      "workload": cfg.workload.name, "dataset": cfg.dataset.name})
    progress.step(f"preparing dataset {cfg.dataset.name}")
    t0 = time.perf_counter()
    inputs = {}
    try:
        ds = prepare_dataset(cfg.dataset, spark, root / "cache" / "datasets")
        inputs = input_metrics(ds, None)
        if inputs["bad_rows"]:
            progress.warn("malformed input rows skipped: " + ", ".join(f"{k}={v}" for k, v in ds.bad_rows.items() if v)
                          + (f"; {ds.swap_hint()}" if ds.swap_hint() else ""))
        events, warmup, folder, meta = load_or_build_workload(ds, cfg, root / "cache")
    except Exception as exc:  # noqa: BLE001 - recorded, then a user's bad input is one line, a bug a traceback
        progress.done()
        rows = record_failed_preparation(cfg, runs, exc, inputs, root, logger, parent, progress)
        if isinstance(exc, ValueError):
            raise DataPreparationError(str(exc), rows) from exc
        raise
    inputs = {**input_metrics(ds, meta), **stream_identity(folder)}  # the cached stream it read (issue 42)
    timings["data_s"] = time.perf_counter() - t0
    events_path = publish_events(cfg, folder)
    progress.step("oracle")
    t0 = time.perf_counter()
    oracle, oracle_method = (oracle_digest(events, folder, cfg, spark, events_path, ds.extent) if cfg.oracle.enabled
                             else (None, "none"))
    timings["oracle_s"] = time.perf_counter() - t0
    rows = []
    timings["invocation_share_s"] = sum(timings.values()) / len(runs)  # in each run's fixed cost
    shared = {**inputs, **{f"time_{k}": v for k, v in timings.items()}}  # every run of the invocation's row
    # all runs in one set of shared epoch jobs, or (share_jobs=false) each run with jobs of its own
    for group in ([runs] if cfg.share_jobs else [[spec] for spec in runs]):
        rows += run_lanes(spark, cfg, group, events_path, ds=ds, events=events, warmup=warmup, oracle=oracle,
                          root=root, logger=logger, parent_id=parent, progress=progress, inputs=shared,
                          oracle_method=oracle_method, fit_processes=processes)
    for row in rows:
        _warn_idle_workers(row, progress)
    progress.done()
    LAST_RUNS["runs"] = len(rows)
    return rows
