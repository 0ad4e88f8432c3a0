"""`python -m harness.counts`: the count mode as a Hydra app on the same conf/ as `python -m harness`.

It composes the same config (an experiment preset, workload sizes, workers, strategy=all or one),
checks it as a run's (harness.run.config.validate) and its own knobs (`counts.*`) before anything
runs, prepares the dataset and the cached workload stream as a run does, samples it once
(`count_stream`) and counts each strategy of the job (harness/counts/tally.py): in process
(`counts.executor=in_process`, the default; Spark only when the dataset is not cached yet), or on
Spark (`counts.executor=spark`: `cluster.master`, e.g. cluster=standalone; the strategies as lanes
of shared epoch jobs, harness/counts/spark.py). Both give the same counts, the workers' own.
Its tables go to <results>/counts/<id>/ beside the runs table: counts_workers.parquet
(per epoch and worker), counts_epochs.parquet, counts_dispatchers.parquet, each with the config in
its Parquet metadata (key `counts`) and in columns, and meta.json (the config, the sample and its
error, the executor, wall time and peak memory: this process's, and on Spark the driver JVM's and
the largest executor task's).

    python -m harness.counts hydra.mode=RUN workload=sts_q1 strategy=kdt workload.queries=200000 \
        counts.object_sample=0.05                                  # in process
    python -m harness.counts hydra.mode=RUN cluster=standalone counts.executor=spark ...  # on a cluster
"""

from __future__ import annotations

import json
import resource
import sys
import time
from functools import partial
from pathlib import Path

import hydra
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from omegaconf import DictConfig, OmegaConf

from harness.counts.tally import check_sampling, count_run, count_stream
from harness.report.results import PROJECT_ROOT
from harness.run.app import run_hydra
from harness.run.config import ConfigError, configured_families, register_configs

register_configs()

TABLES = ("workers", "epochs", "dispatchers")
EXECUTORS = ("in_process", "spark")  # counts.executor
ANOMALIES = ("orphan_deletes", "duplicate_inserts", "reused_ids", "duplicate_object_ids", "delete_payloads_filled")


class LazySpark:
    """The Spark session, started only when the dataset preparation first uses it (a cached
    dataset needs none: the count mode runs in process)."""

    def __init__(self, cfg):
        self._cfg, self._spark = cfg, None

    def __getattr__(self, name):
        if self._spark is None:
            from harness.run.config import spark_master
            from harness.run.spark import get_session

            self._spark = get_session(spark_master(self._cfg), conf=dict(self._cfg.cluster.conf))
        return getattr(self._spark, name)

    def session(self):
        """The session itself (started now if it was not)."""
        self.sparkContext  # noqa: B018 - starts it
        return self._spark


def check_counts(cfg) -> float:
    """The count mode's knobs, before anything runs (a ConfigError naming field, value and what is
    allowed); returns the object sample."""
    c = cfg.counts
    try:
        check_sampling(c.object_sample, configured_families(cfg))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if c.sample_seed is not None and (not isinstance(c.sample_seed, int) or c.sample_seed < 0):
        raise ConfigError(f"counts.sample_seed={c.sample_seed!r} is invalid; allowed: null (the run's seed) or an "
                          "integer >= 0")
    if c.executor not in EXECUTORS:
        raise ConfigError(f"counts.executor={c.executor!r} is invalid; allowed: {', '.join(EXECUTORS)} (spark: on "
                          "cluster.master, e.g. cluster=standalone)")
    if c.executor == "spark":
        from harness.run.config import spark_master

        spark_master(cfg)  # cluster=standalone without a running cluster fails here, before Spark starts
    if cfg.measure.repeat != 1:
        print(f"note: measure.repeat={cfg.measure.repeat} is ignored: the count mode runs each epoch once",
              file=sys.stderr)
    return float(c.object_sample)


def peak_rss_bytes() -> int:
    """This process's peak resident set (getrusage; Linux reports KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def run_counts(cfg) -> list[Path]:
    """Everything `python -m harness.counts` does after Hydra composed the config; the folders written."""
    from harness.report.results import code_version, new_run_id, results_root
    from harness.run import record
    from harness.run.config import validate
    from harness.run.progress import Progress
    from harness.run.runner import _dataset
    from harness.run.workload_cache import load_or_build_workload
    from strategies import registry
    from strategies.base import FitContext

    runs = validate(cfg)  # a run's checks: strategies, families, workload, index, adjuster
    p = check_counts(cfg)
    on_spark = cfg.counts.executor == "spark"
    seed = int(cfg.seed if cfg.counts.sample_seed is None else cfg.counts.sample_seed)
    t_start = time.perf_counter()
    root = results_root(cfg.results_dir)
    root.mkdir(parents=True, exist_ok=True)
    progress = Progress(enabled=cfg.progress, total=3 + 2 * len(runs))
    spark = LazySpark(cfg)
    ds = _dataset(cfg, spark, root, progress)
    progress.step(f"workload {cfg.workload.name}")
    # the stream as its mapped chunks: a sample copies only its kept events, chunk by chunk
    events, warmup, folder, wl_meta = load_or_build_workload(ds, cfg, root / "cache", chunks=True)
    n_events = events.rows
    # the cached stream was normalised when it was built (normalise_workload); what that fixed is in
    # its meta, as the Spark runner reads it (normalising again costs a copy-sized sort at scale)
    anomalies = record.input_metrics(ds, wl_meta)
    context = FitContext(ds.extent, ds.vocab.column("df").to_numpy().astype(np.float64), cfg.seed)
    progress.step(f"sampling the objects (object_sample={p:g})")
    stream = count_stream(events, warmup, epochs_by=cfg.epochs.by, epoch_size=cfg.epochs.size, object_sample=p,
                          sample_seed=seed, workload_family=cfg.workload.family)

    def count(spec, lane=None):
        progress.step(f"{spec.label}: counting ({len(stream.events):,} of {n_events:,} events, "
                      f"object_sample={p:g}, {cfg.counts.executor})")
        t0 = time.perf_counter()
        counts = count_run(registry.get(spec.name), stream, cfg.workers, context, index_params=dict(cfg.index),
                           n_dispatchers=cfg.dispatchers, adjust=cfg.adjust.name,
                           adjust_params=OmegaConf.to_container(cfg.adjust.params, resolve=True),
                           strategy_params=dict(spec.params), local_pairs=cfg.local_pairs,
                           workload_family=cfg.workload.family, anomalies=anomalies, progress=progress,
                           label=spec.label, spark=lane)
        return counts, time.perf_counter() - t0

    out = []

    def finish(spec, counts, wall_s: float) -> None:
        """One strategy's tables and meta.json, written as soon as it is counted (a long invocation
        keeps what it finished)."""
        for part in counts.meta["adaptive"]:
            if p < 1:
                progress.warn(f"{spec.label}: {part} decides from the sampled objects: its decisions may differ "
                              "from the full stream's")
        counts_id = new_run_id(f"counts-{spec.label}")
        dest = (Path(cfg.counts.out) / spec.label if cfg.counts.out else root / "counts" / counts_id)
        meta = {**counts.meta, "counts_id": counts_id, "label": spec.label, "params": dict(spec.params),
                "workload": OmegaConf.to_container(cfg.workload, resolve=True), "dataset": cfg.dataset.name,
                "adjust": cfg.adjust.name, "epochs_by": cfg.epochs.by, "epochs_size": cfg.epochs.size,
                "seed": int(cfg.seed), "workload_cache": folder.name,
                "anomalies": {k: v for k, v in anomalies.items() if k in ANOMALIES},
                "digest": counts.digest, "code_version": code_version(), "command": sys.argv,
                # the cell a timed run of this config is in the runs table: what the projected basis
                # matches a claim's runs by (harness/report/projection.py, projected_throughput)
                "run_keys": {"experiment": cfg.experiment.name, "variant": spec.label,
                             "dataset": record.dataset_label(cfg), "workload": cfg.workload.name,
                             "workers": int(cfg.workers), "x": record._config_value(cfg, cfg.experiment.x),
                             "facet": record._config_value(cfg, cfg.experiment.facet)},
                "wall_s": wall_s, "invocation_s": time.perf_counter() - t_start, "lanes": len(runs) if on_spark else 1,
                "peak_rss_bytes": peak_rss_bytes()}
        if on_spark:
            from harness.engine.memory import driver_peak_bytes
            from harness.run.config import spark_master

            meta.update(spark_master=spark_master(cfg), driver_peak_bytes=driver_peak_bytes(spark.session()))
        write_counts(dest, counts, meta)
        progress.step(f"{spec.label}: counted in {meta['wall_s']:.1f} s, peak {meta['peak_rss_bytes'] / 2**30:.2f} "
                      f"GiB -> {dest}")
        out.append(dest)

    if on_spark:  # the strategies are lanes of the same epoch jobs: they end together
        for spec, (counts, wall_s) in zip(runs, _count_on_spark(cfg, spark.session(), stream, folder, root, runs,
                                                                count)):
            finish(spec, counts, wall_s)
    else:
        for spec in runs:
            finish(spec, *count(spec))
    progress.done()
    for dest in out:
        print(f"counts: {dest}")
    return out


def _count_on_spark(cfg, spark, stream, folder: Path, root: Path, runs: list, count) -> list:
    """Each run's (counts, wall seconds), its strategy a lane of the shared epoch jobs on Spark
    (harness/counts/spark.py); a lane that failed raises here, after the others ended."""
    from harness.core import store
    from harness.report.results import new_run_id
    from harness.run.runner import ship_plugins
    from harness.run.watchdog import ExecutorWatchdog, LostExecutors
    from harness.run.workload_cache import publish_events

    from harness.counts.spark import count_lanes

    ship_plugins(spark, list(cfg.families))
    group = new_run_id("counts-lanes")
    state_root = (store.join(cfg.state_uri, "counts", group) if cfg.state_uri
                  else store.as_uri(root / "cache" / "counts-state" / group))
    out = count_lanes(spark, stream, publish_events(cfg, folder), state_root, cfg.workers, group,
                      [partial(count, spec) for spec in runs], ship_events=cfg.ship_events,
                      guard=lambda: ExecutorWatchdog(spark, group, cfg.cluster.lost_executors_timeout_s),
                      fatal=(LostExecutors,))
    for result in out:
        if isinstance(result, BaseException):
            raise result
    return out


def write_counts(dest: Path, counts, meta: dict) -> None:
    """The three tables, each with the config as columns and in its Parquet metadata, and meta.json."""
    dest.mkdir(parents=True, exist_ok=True)
    text = json.dumps(meta, default=str, sort_keys=True)
    head = {"label": meta["label"], "strategy": meta["strategy"], "workers": meta["workers"],
            "workload": meta["workload"].get("name", ""), "queries": meta["workload"].get("queries", -1),
            "object_sample": meta["object_sample"]}
    for name in TABLES:
        frame = getattr(counts, name).copy()
        for k, v in reversed(list(head.items())):
            frame.insert(0, k, v)
        table = pa.Table.from_pandas(frame, preserve_index=False)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), b"counts": text.encode()})
        pq.write_table(table, dest / f"counts_{name}.parquet")
    (dest / "meta.json").write_text(text + "\n")


@hydra.main(version_base="1.3", config_path=str(PROJECT_ROOT / "conf"), config_name="config")
def _hydra_main(cfg: DictConfig) -> None:
    try:
        run_counts(cfg)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def main() -> int:
    return run_hydra(_hydra_main)
