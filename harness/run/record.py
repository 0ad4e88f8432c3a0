"""The run record: which run it is, its row, and where it is written.

Every run, failed or not, leaves a folder under results/runs/<run_id> (config.yaml, metrics.json,
its tables and plots), a row of the runs table and, when MLflow works, an MLflow run. A run's
identity is its configuration without display and storage settings (`config_key`): a resumed
sweep skips the runs whose key already has a successful row made by the current code
(`unfinished`). The row of a run that measured (`measured_row`) carries its figures, its result
digest beside the oracle's, and its epochs' timings; `finish_row` adds what every row carries.
"""

from __future__ import annotations

import hashlib
import json
import time
import traceback
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path

import pandas as pd
import yaml
from omegaconf import OmegaConf

from harness.core import store
from harness.core.events import format_digest
from harness.report import results
from harness.run.config import RunSpec
from harness.run.progress import Progress


def plain_config(cfg) -> dict:
    """A composed config (or its dataclass) as plain dicts and lists."""
    if is_dataclass(cfg):
        return asdict(cfg)
    return OmegaConf.to_container(cfg, resolve=True)


@dataclass
class Destination:
    """Where an invocation's runs are recorded: the results folder, the MLflow logger and the parent
    run their MLflow runs hang under, and the progress display that shows their steps."""

    root: Path
    logger: results.MlflowLogger
    parent_id: str | None
    progress: Progress


@dataclass
class RunRecord:
    """What one run leaves: its folder, its row, its config (plain and as config.yaml), and the
    tables a run that measured has (per worker, the router's description, the latency sample, the
    per-epoch table and series)."""

    run_dir: Path
    row: dict
    run_cfg: dict
    config_yaml: str
    workers: pd.DataFrame | None = None
    router_info: dict | None = None
    latency_sample: pd.DataFrame | None = None
    epochs: pd.DataFrame | None = None
    series: list[dict] = field(default_factory=list)


# -- identity and resume -------------------------------------------------------------------------

def dataset_label(cfg) -> str:
    """The `dataset` a run's row names: the configured data set, or for an event-file run that
    prepares none (workload.source=file without dataset=file: its objects are the file's, issue
    52) the event file, `events:<file name>`; the configured one would name data the run never read."""
    from datasets.config import source_of

    if cfg.workload.source == "file" and source_of(cfg.dataset.name) != "file":
        return f"events:{Path(str(cfg.workload.path)).name}"
    return str(cfg.dataset.name)


def _config_value(cfg, path: str | None):
    """The value at a config path (an experiment's swept knob or facet) for this job, as text."""
    if not path:
        return None
    node = cfg
    for part in path.split("."):
        node = node[part] if isinstance(node, dict) else getattr(node, part)
    return str(node)


def start_run(cfg, spec: RunSpec, root: Path) -> tuple[Path, dict, dict, str]:
    """A run's folder, the row keys that say which run it is, and its config (as dict and YAML)."""
    run_id = results.new_run_id(spec.label)
    run_dir = root / "runs" / run_id
    base = {
        "run_id": run_id, "strategy": spec.name, "variant": spec.label, "workers": cfg.workers,
        "dispatchers": cfg.dispatchers, "dataset": dataset_label(cfg), "workload": cfg.workload.name,
        "seed": cfg.seed, "tag": cfg.tag, "experiment": cfg.experiment.name, "sweep_id": results.current_sweep_id(),
        "cluster": cfg.cluster.name, "x": _config_value(cfg, cfg.experiment.x), "facet": _config_value(cfg, cfg.experiment.facet),
        "started_at": pd.Timestamp.now(tz="UTC").isoformat(), "run_dir": str(run_dir),
        "code_version": results.code_version(),
    }
    run_cfg = run_config(cfg, spec)
    base["config_key"] = config_key(run_cfg)
    base["measurement_key"] = measurement_key(run_cfg)
    return run_dir, base, run_cfg, config_yaml(run_cfg)


def config_yaml(run_cfg: dict) -> str:
    """A run's plain config as config.yaml holds it: PyYAML's C emitter with OmegaConf's settings
    (block style, keys in order, unicode), which gives OmegaConf.to_yaml's text byte for byte at a
    fraction of its time (ADR-0078)."""
    return yaml.dump(run_cfg, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), default_flow_style=False,
                     allow_unicode=True, sort_keys=False)


def run_config(cfg, spec: RunSpec) -> dict:
    """The job's config as one run of it sees it: its strategy, label and parameters, no variants."""
    run_cfg = plain_config(cfg)
    run_cfg["strategy"] = {**run_cfg["strategy"], "name": spec.name, "label": spec.label, "params": spec.params,
                           "variants": []}
    return run_cfg


# settings that change how a run is shown or stored, not what it measures
_NOT_MEASURED = ("progress", "mlflow", "results_dir", "resume", "tag", "keep_pairs", "state_uri", "share_jobs",
                 "run_plots", "fit_processes", "table", "machine", "aa_pair",
                 "counts")


def config_key(run_cfg: dict) -> str:
    """What a run measures, as a hash of its configuration (without display and storage settings,
    and of the experiment only its name and swept knobs): equal keys, the same measurement."""
    plain = {k: v for k, v in run_cfg.items() if k not in _NOT_MEASURED}
    if plain.get("aa_role") is None:  # only the A/A repeat's key differs (resume keeps both)
        plain.pop("aa_role", None)
    exp = plain.get("experiment") or {}
    plain["experiment"] = {k: exp.get(k) for k in ("name", "x", "facet")}
    return hashlib.sha256(json.dumps(plain, sort_keys=True, default=str).encode()).hexdigest()[:16]


def measurement_key(run_cfg: dict) -> str:
    """What a run measures whichever preset ran it: `config_key` without the experiment (its name,
    title, plots and which knob is x: the knobs' values are in the rest of the config) and without
    the A/A role. Two presets' runs with equal keys measured one configuration, so their
    throughputs should agree (`python -m harness.report.same_config`, issue 48); the same x in two
    presets may be two different knobs, and the same stream may run under other settings (k, the
    epochs' size), so neither x nor the stream's digest is such a key."""
    plain = {k: v for k, v in run_cfg.items() if k not in _NOT_MEASURED and k not in ("experiment", "aa_role")}
    return hashlib.sha256(json.dumps(plain, sort_keys=True, default=str).encode()).hexdigest()[:16]


RESUME_SKIPPED = {"runs": 0}  # runs a resumed sweep skipped, over its jobs (printed when it ends)


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
    todo = [r for r in runs if config_key(run_config(cfg, r)) not in done]
    skipped = len(runs) - len(todo)
    RESUME_SKIPPED["runs"] += skipped
    if skipped:
        print(f"resume: skipped {skipped} of {len(runs)} runs already in the runs table "
              f"({', '.join(r.label for r in runs if r not in todo)})")
    return todo


def mlflow_name(cfg, spec: RunSpec) -> str:
    return f"{spec.label}-w{cfg.workers}-{cfg.workload.name}"


def run_location(cfg, run_dir: Path, run_id: str, part: str) -> str:
    """Where a run's executors keep `part` (state, pairs): under state_uri when set, else the run folder."""
    return store.join(cfg.state_uri, "runs", run_id, part) if cfg.state_uri else store.as_uri(run_dir / part)


# -- the row -------------------------------------------------------------------------------------

def input_metrics(ds, meta: dict | None) -> dict:
    """What a run row says about its input: rows read and skipped per reason (the prepared dataset's
    bad_rows), objects the workload reused and stream anomalies normalised (the workload's info)."""
    out = {"input_rows": ds.n_input_rows, "bad_rows": sum(ds.bad_rows.values()),
           **{f"bad_rows_{k}": v for k, v in ds.bad_rows.items()}, "swapped_lat_lon_rows": ds.swapped_lat_lon_rows,
           "rescued_rows": ds.rescued_rows, "rescuable_rows": getattr(ds, "rescuable_rows", 0)}
    if meta:
        out.update(meta.get("info") or {})
    return out


def measured_row(base: dict, metrics: dict, loop, setup, router, build_s: float, oracle: str | None,
                 adjust: str) -> dict:
    """The row of a run that went through its epochs: its identity (`base`), the summary's figures,
    its result digest and whether it equals the oracle's, the work it measures (routing and its
    upkeep, the workers' index work and merging, in every repetition: the epoch's tasks did it that
    many times) and each epoch's timings."""
    epochs = loop.epochs
    count = sum(e.result_count for e in epochs)
    digest = format_digest(count, sum(e.result_hash for e in epochs))
    work_s = sum(e.observe_s for e in loop.measured) + sum(
        e.route_ns / 1e9 + e.merge_busy_s + sum(st.get("busy_s", 0.0) for st in e.worker_stats.values())
        for reps in loop.repetitions for e in reps)
    row = {
        **base, **metrics, "status": "ok", "error": None, "build_s": build_s,
        "family": "+".join(sorted(setup.names.values())),
        "dispatcher_bytes": float(router.size_bytes()), "result_count": count, "result_digest": digest,
        "oracle_ok": None if oracle is None else bool(digest == oracle), "epochs": len(loop.measured),
        "adjust": adjust,
        "executor_peak_rss_bytes": float(max((e.executor_peak_bytes for e in epochs), default=0)),
        "results_local": sum(e.local_pairs for e in epochs), "work_s": work_s,
    }
    for e in epochs:
        for k, v in e.timings.items():
            row[f"epoch{e.epoch}_{k}"] = v
    return row


def error_row(base: dict, exc: BaseException) -> dict:
    """The row of a run that failed: its identity, the error in one line and its traceback."""
    return {**base, "status": "error", "error": f"{type(exc).__name__}: {exc}",
            "traceback": "".join(traceback.format_exception(exc))}


def finish_row(row: dict, inputs: dict | None, oracle: str | None, oracle_method: str, task_failures: int,
               driver_peak_bytes: float, wall_s: float) -> dict:
    """What every row carries, failed or not: its input's facts, how the oracle was found, the task
    failures Spark recovered from, the driver's peak memory, its own driver time (`wall_s`) and,
    when it measured, the harness's own time for it (`fixed_s`; record_run adds its logging)."""
    row.update(inputs or {})
    row["oracle_method"] = oracle_method if oracle is not None else "none"
    row["task_failures"] = task_failures
    row["driver_peak_rss_bytes"] = float(driver_peak_bytes)
    row["wall_s"] = wall_s
    if row["status"] == "ok":
        row["fixed_s"] = row["wall_s"] + row.get("time_invocation_share_s", 0.0) - row["build_s"] - row["work_s"]
    return row


def write_timeline(run_dir: Path, timeline: pd.DataFrame | None) -> None:
    """The run's per-time-stamp table (DkM-SKS Fig. 7), when its summary has one."""
    if timeline is not None and len(timeline):
        run_dir.mkdir(parents=True, exist_ok=True)
        timeline.to_parquet(run_dir / "timestamps.parquet", index=False)


# -- writing it ----------------------------------------------------------------------------------

def record_run(rec: RunRecord, dest: Destination, name: str, draw_plots: bool = True, append: bool = True) -> None:
    """The run's folder (config, metrics, tables, plots) with the time it took (`logging_s`, also
    in `fixed_s`), then its MLflow run (under `name`), logged in the logger's background thread
    while the next runs go on (`mlflow_s`, not in `fixed_s`; metrics.json is written again with
    it); the folder first, so an MLflow failure loses nothing (the row says why in
    `mlflow_error`). append=False: the caller waits for the logger and appends the row with the
    others of its invocation (one rewrite of the table per invocation, not per run)."""
    row, run_dir = rec.row, rec.run_dir
    t0 = time.perf_counter()
    results.write_run_folder(run_dir, rec.config_yaml, row, rec.workers, rec.router_info, rec.latency_sample,
                             rec.epochs)
    if rec.workers is not None and draw_plots:
        from harness.report import plots

        plots.run_plots(run_dir, rec.workers, rec.latency_sample, rec.epochs)
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
            dest.progress.warn(f"MLflow logging failed ({err}); the run is kept in {run_dir} and "
                               "results/runs.parquet")
        write_metrics()

    dest.logger.log_run(name, results.flatten(rec.run_cfg), row, run_dir, dest.parent_id, rec.series, done=logged)
    if append:
        dest.logger.wait()
        results.append_runs_table(dest.root, [row])


def record_failed_preparation(cfg, runs: list[RunSpec], exc: BaseException, inputs: dict,
                              dest: Destination) -> list[dict]:
    """An error row per run that was to start, so a sweep's runs table shows why its job has no figures."""
    rows = []
    for spec in runs:
        run_dir, base, run_cfg, yaml_text = start_run(cfg, spec, dest.root)
        row = {**base, "status": "error", "error": f"preparing data: {type(exc).__name__}: {exc}",
               "traceback": "".join(traceback.format_exception(exc)), "family": cfg.workload.family,
               "adjust": cfg.adjust.name, **inputs}
        record_run(RunRecord(run_dir, row, run_cfg, yaml_text), dest, mlflow_name(cfg, spec))
        rows.append(row)
    return rows
