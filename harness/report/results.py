"""Where runs go: a folder per run, one row per run in a tidy table, and MLflow.

Local files are written first, so a failing MLflow loses nothing: the failure is reported and
the run's folder and runs-table row stand (`mlflow_error` in its metrics.json says why). A row
holds the keys below, which say which run it is, and metrics, each named in the metrics registry.
"""

from __future__ import annotations

import functools
import importlib
import json
import math
import os
import subprocess
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from harness.report import metrics as metrics_mod

PROJECT_ROOT = Path(__file__).resolve().parents[2]

# what identifies a run (or says why it failed): every other key of a run row is a registered metric
RUN_KEYS = ("run_id", "status", "error", "traceback", "mlflow_error", "strategy", "variant", "experiment", "sweep_id",
            "x", "facet", "workers", "dispatchers", "dataset", "workload", "family", "seed", "tag", "started_at",
            "adjust", "run_dir", "cluster", "config_key", "measurement_key", "oracle_method", "indexes", "code_version",
            "workload_events", "workload_events_sha256", "dataset_cache")
EPOCH_KEYS = ("epoch", "operation")  # likewise for a row of the per-epoch series (epochs.parquet)
# run keys kept in the run's folder (metrics.json) and MLflow but not in the runs table: a failed run's
# traceback is long (the table's `error` says why in one line), and an MLflow failure is the folder's note
KEYS_NOT_COLUMNS = ("traceback", "mlflow_error")


def runs_table_columns() -> list[str]:
    """The runs table's columns: the run keys (less KEYS_NOT_COLUMNS), then every registered metric that
    is a column (`Metric.column`; harness/report/metrics.py owns the list)."""
    return [k for k in RUN_KEYS if k not in KEYS_NOT_COLUMNS] + metrics_mod.columns()


RUNS_TABLE_COLUMNS = runs_table_columns()  # as at import; append_runs_table asks again (a plugin's figures too)


RUN_CODE = ("harness", "strategies", "datasets", "conf", "pyproject.toml", "requirements.txt",
            ":(exclude)conf/claims.yaml", ":(exclude)conf/sizes.yaml",
            ":(exclude)conf/calibration.yaml")  # read at report time, never by a run


@functools.cache
def code_version() -> str:
    """The newest commit that changed the code a run executes (`RUN_CODE`: the packages, the
    configuration and the pinned requirements), "-dirty" appended when any of it has uncommitted
    changes, or "unknown" outside a git checkout. A claim reads only the runs of its preset's
    newest code version (harness/report/claims/__init__.py) and `resume=true` skips only runs made at this
    one, so a commit to the docs or the tests keeps every measurement current while a change to
    the code retires it."""
    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else ""

    try:
        commit = git("log", "-1", "--format=%h", "--abbrev=12", "--", *RUN_CODE)
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", *RUN_CODE)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (commit + ("-dirty" if dirty else "")) if commit else "unknown"


def write_or_print(text: str, out: str | None, note: str = "") -> None:
    """A report command's Markdown: written to `out` (and the path said, with `note`), or printed."""
    if out:
        Path(out).write_text(text)
        print(f"written: {out}{f' ({note})' if note else ''}")
    else:
        print(text)


def results_root(configured: str | None = None) -> Path:
    root = Path(configured or os.environ.get("STPS_RESULTS") or PROJECT_ROOT / "results")
    return root.resolve()


def new_run_id(strategy: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{strategy}-{uuid.uuid4().hex[:6]}"


def tracking_uri(root: Path) -> str:
    return f"sqlite:///{(root / 'mlflow.db').resolve()}"


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "item"):
        return _jsonable(v.item())
    return v


def write_run_folder(run_dir: Path, config_yaml: str, row: dict, workers: pd.DataFrame | None,
                     router: dict | None, latency_sample: pd.DataFrame | None,
                     epochs: pd.DataFrame | None = None) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(config_yaml)
    (run_dir / "metrics.json").write_text(json.dumps({k: _jsonable(v) for k, v in row.items()}, indent=2))
    if workers is not None:
        workers.to_parquet(run_dir / "workers.parquet", index=False)
        workers.to_csv(run_dir / "workers.csv", index=False)
    if router is not None:
        (run_dir / "router.json").write_text(json.dumps(router))
    if latency_sample is not None:
        latency_sample.to_parquet(run_dir / "latency.parquet", index=False)
    if epochs is not None and len(epochs):
        epochs.to_parquet(run_dir / "epochs.parquet", index=False)  # the per-epoch series


def append_runs_table(root: Path, rows: list[dict]) -> Path:
    """Append rows to results/runs.parquet (read, concat, rewrite: once per invocation)."""
    path = root / "runs.parquet"
    columns = runs_table_columns()
    new = pd.DataFrame([{c: row.get(c) for c in columns} for row in rows])  # (a plugin family's figures too)
    if path.exists():
        old = pd.read_parquet(path)
        new = pd.concat([old, new.astype(old.dtypes.to_dict(), errors="ignore")], ignore_index=True)
    for col in ("oracle_ok",):
        new[col] = new[col].astype("boolean")
    tmp = path.with_suffix(".tmp.parquet")
    new.to_parquet(tmp, index=False)
    tmp.replace(path)
    return path


def labelled(table: pd.DataFrame) -> pd.DataFrame:
    """The runs with `variant` filled (a labelled variant, else the strategy) and, for adjusted
    runs, the adjuster appended ("kdt + gr"): what plots, reports and claims call a run."""
    table = table.copy()
    if "variant" not in table:
        table["variant"] = table["strategy"]
    table["variant"] = table["variant"].fillna(table["strategy"])
    if "adjust" in table:
        suffix = " + " + table["adjust"].astype(str)
        adjusted = (table["adjust"].notna() & (table["adjust"] != "none")
                    & ~pd.Series([v.endswith(x) for v, x in zip(table["variant"], suffix)], index=table.index, dtype=bool))
        table.loc[adjusted, "variant"] = table.loc[adjusted, "variant"] + suffix[adjusted]
    return table


PER_RUN_TABLES = ("epochs", "workers", "timestamps", "latency")  # a run folder's Parquet tables, by name
TABLES_DIR = "tables_dir"  # set at read time on a record's runs table: where its gathered per-run tables are


def read_runs_table(root: Path) -> pd.DataFrame:
    """The runs table of a results folder, or of a record's evidence (harness/report/evidence.py):
    there the per-run tables sit gathered beside it, and each row learns where (`tables_dir`)."""
    path = root / "runs.parquet"
    if not path.exists():
        raise FileNotFoundError(f"no runs table at {path}: run `make run` or `make sweep` first")
    table = pd.read_parquet(path)
    if any((root / f"{name}.parquet").exists() for name in PER_RUN_TABLES):
        table[TABLES_DIR] = str(root)
    return table


@functools.lru_cache(maxsize=1024)
def _parquet(path: str, mtime_ns: int) -> pd.DataFrame:  # keyed on the file's time: a rewrite is read anew
    return pd.read_parquet(path)


def _cached(path: Path) -> pd.DataFrame:
    """A Parquet file, read once per version (judging every claim reads a run's tables many times);
    callers treat it as read-only."""
    return _parquet(str(path), path.stat().st_mtime_ns)


def run_frame(run: pd.Series, name: str) -> pd.DataFrame | None:
    """One run's per-run table `name` (one of PER_RUN_TABLES): from its run folder when the folder
    is here, else from the record's gathered table beside the runs table; None when neither has it."""
    if name not in PER_RUN_TABLES:
        raise ValueError(f"per-run table {name!r} is unknown; allowed: {', '.join(PER_RUN_TABLES)}")
    folder = run.get("run_dir")
    try:
        if isinstance(folder, str) and folder and (Path(folder) / f"{name}.parquet").exists():
            return _cached(Path(folder) / f"{name}.parquet")
        tables = run.get(TABLES_DIR)
        if isinstance(tables, str) and (Path(tables) / f"{name}.parquet").exists():
            every = _cached(Path(tables) / f"{name}.parquet")
            mine = every[every["run_id"] == run.get("run_id")]
            return mine.drop(columns="run_id").reset_index(drop=True) if len(mine) else None
    except (OSError, ValueError):  # unreadable (a run folder being written, a truncated file): not there
        return None
    return None


def flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _check_store(db: Path) -> None:
    """Open the sqlite store once directly: MLflow itself retries an unusable store for about 100 s
    (ten attempts with back-off) before it fails, which a sweep would pay on every job."""
    import sqlite3

    db.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(db) as con:
        con.execute("select 1")
    con.close()


class MlflowLogger:
    """Thin wrapper: one tracking store under results/, parent and child runs, never fatal.

    A child run is logged in a background thread (one, so runs are logged in order), while the
    next runs of the invocation go on: logging a run costs MLflow's sqlite store about 0.1-0.2 s,
    which the driver would otherwise spend between Spark jobs for every run of a sweep. With
    `process` (a sweep: the runner passes a one-process executor) the thread hands each run to
    that process and waits: MLflow's SQLAlchemy work is Python that held the driver's GIL while
    the runs' summaries needed it (42 s of grand_range's driver time); a run the process cannot
    log (it died) is logged in the thread. `wait` returns when every submitted run is logged; the
    runner calls it before it writes the rows."""

    def __init__(self, root: Path, experiment: str, enabled: bool = True, process=None):
        self.enabled = enabled
        self.error: str | None = None
        self._pending: list = []
        self._pool = None
        self._process = process  # a one-process executor to log in (None: in the thread itself)
        self._uri = tracking_uri(root)
        if not enabled:
            return
        try:
            _check_store(root / "mlflow.db")
            import mlflow

            mlflow.set_tracking_uri(tracking_uri(root))
            found = mlflow.get_experiment_by_name(experiment)
            if found is None:
                # artifacts beside the store, never in ./mlruns of whatever directory we run from
                self.experiment_id = mlflow.create_experiment(
                    experiment, artifact_location=(root / "mlartifacts").resolve().as_uri())
            else:
                self.experiment_id = found.experiment_id
            mlflow.set_experiment(experiment)
            self.mlflow = mlflow
            self.client = mlflow.MlflowClient(tracking_uri(root))
        except Exception as exc:  # noqa: BLE001 - MLflow must never lose a run
            self.enabled = False
            self.error = f"{type(exc).__name__}: {exc}"

    def start_parent(self, name: str, params: dict | None = None) -> str | None:
        if not self.enabled:
            return None
        try:
            run = self.mlflow.start_run(run_name=name)
            if params:
                self.mlflow.log_params({k: str(v)[:500] for k, v in params.items()})
            run_id = run.info.run_id
            self.mlflow.end_run()
            return run_id
        except Exception as exc:  # noqa: BLE001
            self.error = f"{type(exc).__name__}: {exc}"
            return None

    def log_run(self, name: str, params: dict, metrics: dict, run_dir: Path, parent_id: str | None,
                steps: list[dict] | None = None, done=None) -> None:
        """Submit one run: params, its registered finite metrics, per-epoch ones (`epoch_<name>`,
        step = epoch), their units and descriptions (metric_units.json) and the folder. `done(error,
        seconds)` is called when it is logged (error None) or failed, in the logging thread."""
        if not self.enabled:
            if done is not None and self.error:
                done(self.error, 0.0)
            return
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mlflow")
        self._pending.append(self._pool.submit(self._log, name, dict(params), dict(metrics), run_dir, parent_id,
                                               list(steps or []), done))

    def _log(self, name, params, metrics, run_dir, parent_id, steps, done) -> None:
        args = (self.experiment_id, name, params, metrics, run_dir, parent_id, steps)
        error, seconds = None, None
        if self._process is not None:
            try:
                error, seconds = self._process.submit(_log_in_process, self._uri, *args).result()
            except Exception:  # noqa: BLE001 - the process is gone or cannot take it: log here
                error, seconds = None, None
        if seconds is None:
            t0 = time.perf_counter()
            error = _log_child_run(self.client, *args)
            seconds = time.perf_counter() - t0
        if error is not None:
            self.error = error
        if done is not None:
            done(error, seconds)

    def wait(self) -> None:
        """Until every submitted run is logged."""
        pending, self._pending = self._pending, []
        for future in pending:
            future.result()


def _log_child_run(client, experiment_id: str, name: str, params: dict, metrics: dict, run_dir: Path,
                   parent_id: str | None, steps: list[dict]) -> str | None:
    """One child run through `client`: params, registered finite metrics, per-epoch ones (`epoch_<name>`,
    step = epoch), their units and descriptions (metric_units.json) and the folder; the error, if any."""
    from mlflow.entities import Metric, Param

    try:
        tags = {"mlflow.parentRunId": parent_id} if parent_id else None
        run_id = client.create_run(experiment_id, run_name=name, tags=tags).info.run_id
        now = int(time.time() * 1000)
        logged = metrics_mod.numeric(metrics)
        batch = [Metric(k, v, now, 0) for k, v in logged.items()]
        for step in steps:
            per_epoch = metrics_mod.numeric(step)
            logged.update(per_epoch)
            # prefixed: the run-level figure of the same name stays the run's summary
            batch += [Metric(f"epoch_{k}", v, now, int(step["epoch"])) for k, v in per_epoch.items()]
        client.log_batch(run_id, metrics=batch, params=[Param(k, str(v)[:500]) for k, v in params.items()])
        client.log_dict(run_id, metrics_mod.describe(sorted(logged)), "metric_units.json")
        client.log_artifacts(run_id, str(run_dir))
        client.set_terminated(run_id)
        return None
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"


_CLIENTS: dict[str, Any] = {}  # a logging process's client per tracking URI


def _log_in_process(uri: str, *args) -> tuple[str | None, float]:
    """`_log_child_run` in a logging process: (error, seconds)."""
    import mlflow

    t0 = time.perf_counter()
    if uri not in _CLIENTS:
        _CLIENTS[uri] = mlflow.MlflowClient(uri)
    error = _log_child_run(_CLIENTS[uri], *args)
    return error, time.perf_counter() - t0


def warm_logging(process) -> None:
    """Import MLflow in the logging process now (seconds), while the driver starts Spark."""
    process.submit(importlib.import_module, "mlflow")


SWEEP_PARENT_ENV = "STPS_MLFLOW_PARENT_RUN"


def current_sweep_parent() -> str | None:
    """The MLflow parent run of the Hydra multirun in progress, if any (set by harness.run.callbacks)."""
    return os.environ.get(SWEEP_PARENT_ENV) or None


SWEEP_ID_ENV = "STPS_SWEEP_ID"


def current_sweep_id() -> str | None:
    """The id of the Hydra multirun in progress (set by harness.run.callbacks), stored with each run
    so that an experiment's plots and report use exactly its own runs."""
    return os.environ.get(SWEEP_ID_ENV) or None


def new_sweep_id() -> str:
    return f"{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
