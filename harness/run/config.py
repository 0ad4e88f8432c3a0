"""The structured config schema (Hydra) and the checks that run before Spark starts.

Config groups: dataset, workload, strategy, cluster, adjust, index; top-level keys include workers,
seed and `families` (plugin modules that define more query families). Every group option is a
YAML file under conf/<group>/ typed by the dataclass below, so a misspelled key or a wrong type is
rejected by composition; `validate` then checks the values (unknown strategy or family, negative
worker count, index settings a family does not have, a strategy that cannot route the workload's
family) and `check_overrides` names the valid keys for a misspelled command-line override.

The rules a family, a strategy or an adjuster keeps for itself are its `check_run(cfg, job)` hook;
`resolve_job` walks the registries and asks each one the job involves, so it names none of them.
What the config asks for (its families, strategy runs, adjuster, whether its generator makes
snapshot queries, where its events come from) is resolved once into a `Job`, checked once, and
handed to every hook and to the runner (issue 49 part 4).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any, Optional

from hydra.core.config_store import ConfigStore

from datasets.config import DatasetConfig, validate_dataset_config
from datasets.workloads.config import SNAPSHOT_PROTOCOLS
from datasets.workloads.snapshot import workload_families
from harness.core import machine_load, store
from harness.core.events import FORMER_FAMILY_NAMES
from harness.engine.assembly import check_adjustable
from harness.engine.epochs import EPOCH_BY
from harness.engine.setup import check_snapshots
from harness.families import registry as families
from harness.families.workload import WorkloadConfig
from harness.measure.network import NetworkProfile
from strategies import registry
from strategies.adjust_base import get_adjuster
from strategies.base import routes


@dataclass
class VariantConfig:
    """One more run of a registered strategy with other parameters, under its own label."""

    label: str = ""
    name: str = ""
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class StrategyConfig:
    name: str = "all"  # a registered strategy, or "all" for every one that routes the workload
    params: dict[str, Any] = field(default_factory=dict)
    include: list[str] = field(default_factory=list)  # with name=all: only these (empty = every one)
    variants: list[VariantConfig] = field(default_factory=list)  # extra labelled runs


@dataclass
class ExperimentConfig:
    """Set by conf/experiment/<name>.yaml: what the experiment's plots show (harness/report/experiments.py)."""

    name: Optional[str] = None
    title: str = ""
    plots: list[str] = field(default_factory=list)
    x: Optional[str] = None  # config path of the swept knob the line plots put on the x axis
    x_label: Optional[str] = None
    facet: Optional[str] = None  # config path whose values get one panel each (besides workload)
    report: bool = False  # write results/report.md (claims of conf/claims.yaml vs measurements)
    # mu per workload at scale=paper (conf/scale/paper.yaml); PS2Stream Fig. 6-10 by default
    paper_queries: dict[str, int] = field(default_factory=lambda: {
        "sts_q1": 5_000_000, "sts_q2": 10_000_000, "sts_q3": 10_000_000, "tiny": 300,
        # drift workloads: PS2Stream Fig. 16 (10M); Fig. 12's 1M for the hot spots; Tornado's 5M
        "sts_q3_drift": 10_000_000, "hotspot_objects": 1_000_000, "hotspot_queries": 1_000_000,
        "scale_drift": 5_000_000, "tornado_q": 5_000_000,  # Tornado Table 1's 5M
        # DkM-SKS Sec. 5.1 (|S| = 10M); SSTD Sec. 7.1 ("We initially register 200k queries")
        "knn_q": 10_000_000, "ckq_q": 200_000,
        # DSkype Sec. 8.2 ("5M subscriptions")
        "topk_q": 5_000_000})


@dataclass
class ClusterConfig:
    name: str = "local"
    # local[*], spark://host:7077 for a standalone cluster, or cluster-up: the one `make cluster-up` started
    master: str = "local[*]"
    conf: dict[str, str] = field(default_factory=dict)  # extra spark.* settings
    # a run whose jobs wait this long with no executor alive (its workers gone) is cancelled and
    # recorded as an error (harness/run/watchdog.py); 0: wait forever, as Spark does
    lost_executors_timeout_s: float = 300.0


@dataclass
class LatencyConfig:
    rate_fraction: float = 0.7  # input rate as a fraction of the run's own throughput ...
    rate_eps: Optional[float] = None  # ... or an absolute rate in events/s (wins when set)
    # even: events arrive one every 1/rate s in seq order; event_time: at their `ts` (rescaled to
    # rate_eps when it is set, else at the stream's own rate), so events of one instant arrive
    # together (SSTD's batches of snapshot queries)
    arrivals: str = "even"


@dataclass
class MeasureConfig:
    """How often each measured epoch is timed (harness/core/repetitions.py)."""

    repeat: int = 1  # runs of each measured epoch from the same state (conf/config.yaml sets the default run's)
    discard: int = 1  # of them, the first ones not counted (compilation, first touch), when repeat > discard
    min_bottleneck_s: float = 0.02  # a bottleneck time below this is flagged: too short to measure well


_LIMITS = machine_load.Thresholds()


@dataclass
class MachineConfig:
    """When a run counts as measured on a loaded machine and is left out of the verdicts
    (harness/core/machine_load.py): other processes than the run's own using more than
    `max_others_busy` of all cores' time over the run; more than `max_steal` of it stolen; and,
    as gross limits (the run's own driver and JVM load a 2-core machine to 1.7 per core and
    millisecond sections to a CPU/wall of 0.45 when nothing else runs), a 1-minute load average
    per core above `max_load_per_core` at either end, or the workers' timed repetitions getting less
    than `min_cpu_wall` of their wall time as CPU. The defaults are machine_load.Thresholds', the
    ones the claims judge stored runs with."""

    max_load_per_core: float = _LIMITS.max_load_per_core
    min_cpu_wall: float = _LIMITS.min_cpu_wall
    max_steal: float = _LIMITS.max_steal
    max_others_busy: float = _LIMITS.max_others_busy


@dataclass
class OracleConfig:
    enabled: bool = True
    # past this many pairs a family's brute force examines (Family.oracle_checks: by default
    # objects x queries; kNN: its queries' keyword lists), the brute force on the driver is too big ...
    max_checks: float = 2.0e10
    # ... and then: auto: the family's scale oracle on Spark if it has one (range: a tiled join), else
    # none (oracle_ok = null); brute: always the brute force; tiled: always the scale oracle
    method: str = "auto"
    tiles: int = 0  # the scale oracle's tiles per side; 0: from the stream's size


@dataclass
class EpochsConfig:
    """How the measured stream is cut into epochs (harness/engine/epochs.py)."""

    by: str = "count"  # count: `size` events per epoch; time: `size` seconds of event time
    size: float = 0  # 0: the measured stream is one epoch (a static experiment)


@dataclass
class AdjustConfig:
    """The load adjuster run between epochs (conf/adjust/<name>.yaml; strategies/adjust_base.py)."""

    name: str = "none"
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class MlflowConfig:
    enabled: bool = True
    experiment: str = "stps-harness"
    parent_run_id: Optional[str] = None  # set by sweeps: jobs become children of this run


@dataclass
class TableConfig:
    """The comparison table printed after a run (harness/report/table.py)."""

    # metrics-registry names, one column each; empty: the default columns (compute and network
    # throughput with their intervals, the bottleneck, busy-time balance, object replication)
    columns: list[str] = field(default_factory=list)


@dataclass
class CountsConfig:
    """The count mode's own knobs (`python -m harness.counts`, harness/counts/): a run's counts
    without timing, the measured objects sampled against every subscription."""

    # the share of the measured objects kept (a Bernoulli draw per object, seeded); every
    # subscription event and the warm-up are kept whole; counts of the objects' work are scaled by
    # 1/object_sample with a standard error per counter. 1: every object, exact counts
    object_sample: float = 1.0
    sample_seed: Optional[int] = None  # null: the run's seed
    out: Optional[str] = None  # the tables' folder; null: <results>/counts/<id>/
    # where the runs are counted: in_process (one core, the stream in this process's memory) or
    # spark (the timed runs' mapInArrow tasks on cluster.master, e.g. cluster=standalone: a stream
    # larger than one machine); the same counts either way
    executor: str = "in_process"


@dataclass
class Config:
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    strategy: StrategyConfig = field(default_factory=StrategyConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    adjust: AdjustConfig = field(default_factory=AdjustConfig)
    epochs: EpochsConfig = field(default_factory=EpochsConfig)
    workers: int = 8
    dispatchers: int = 4
    seed: int = 42
    # per query family, its worker index's settings (index.<family>.*; the family's Params dataclass
    # holds the defaults and the valid keys: harness/families/<family>/)
    index: dict[str, Any] = field(default_factory=dict)
    families: list[str] = field(default_factory=list)  # modules defining more query families (plugins)
    latency: LatencyConfig = field(default_factory=LatencyConfig)
    network: NetworkProfile = field(default_factory=NetworkProfile)  # conf/network/<profile>.yaml
    measure: MeasureConfig = field(default_factory=MeasureConfig)
    machine: MachineConfig = field(default_factory=MachineConfig)
    oracle: OracleConfig = field(default_factory=OracleConfig)
    mlflow: MlflowConfig = field(default_factory=MlflowConfig)
    results_dir: Optional[str] = None  # default: <project>/results
    keep_pairs: bool = False  # write the distinct result pairs as Parquet (else count + digest)
    # where executors keep worker state, kept pairs and the events table, read and written through
    # pyarrow's filesystems: file:///..., hdfs://namenode/..., s3a://bucket/... (a multi-host cluster
    # needs one every host reaches); null: the run's folder under results_dir
    state_uri: Optional[str] = None
    # a pair whose object went to one worker is counted there, not shuffled to the merge (it can be
    # found nowhere else; harness/engine/local_pairs.py); false: every pair goes through the merge
    local_pairs: bool = True
    # the dispatch stage ships each copy's event itself, as the compared systems do, instead of its
    # 8-byte seq (the workers then read nothing from the events table): slower, and what lets a run
    # check the network model's bytes against what the pipeline shipped (shipped_bytes)
    ship_events: bool = False
    # the runs of an invocation share one Spark job per epoch, a lane each (harness/engine/lockstep.py);
    # false: each run has jobs of its own (its job_s and throughput_wall_eps then owe nothing to others)
    share_jobs: bool = True
    # processes that fit the runs' strategies side by side (harness/run/fits.py) and then summarise
    # them; with any, MLflow logs in one more. null: one per driver core when an invocation has two
    # runs or more; 0: each run fits and is summarised in the driver, one after another
    fit_processes: Optional[int] = None
    progress: bool = True
    # each run's own plots (worker load, latency CDF, epochs) as it ends; null: yes, but not in a
    # sweep, where they cost more than the run (`python -m harness.report.plots --run DIR` draws them)
    run_plots: Optional[bool] = None
    tag: Optional[str] = None  # free label stored with the run (e.g. the experiment name)
    # skip a run whose configuration already has a successful row in the runs table (`config_key`):
    # an interrupted `make sweep` run again does only what is missing or failed
    resume: bool = False
    # a preset (a sweep with experiment.name) ends by measuring its first job again: the A/A pair
    # whose spread widens the verdicts' intervals (harness/run/aa_pair.py, harness/report/claims/aa_pairs.py)
    aa_pair: bool = True
    aa_role: Optional[str] = None  # null; "a2" in the invocation that measures the first job again
    experiment: ExperimentConfig = field(default_factory=ExperimentConfig)
    table: TableConfig = field(default_factory=TableConfig)
    counts: CountsConfig = field(default_factory=CountsConfig)  # python -m harness.counts only


def register_configs() -> None:
    from omegaconf import OmegaConf

    cs = ConfigStore.instance()
    cs.store(name="base_config", node=Config)
    if not OmegaConf.has_resolver("mul"):  # sizes derived from sizes (conf/scale/paper.yaml)
        OmegaConf.register_new_resolver("mul", lambda a, b: int(a) * int(b))
    if not OmegaConf.has_resolver("div"):  # a size as a share of another (DSkype's epochs: a tenth of |W|)
        OmegaConf.register_new_resolver("div", lambda a, b: max(int(a) // int(b), 1))


def config_groups() -> list[str]:
    """The config groups (folders of conf/): dataset, workload, strategy, cluster, experiment, ..."""
    from harness.report.results import PROJECT_ROOT

    return sorted(p.name for p in (PROJECT_ROOT / "conf").iterdir() if p.is_dir())


class ConfigError(ValueError):
    """A config value that cannot run; raised before Spark starts."""


def _bad(key: str, value, allowed) -> ConfigError:
    return ConfigError(f"{key}={value!r} is invalid; allowed: {allowed}")


def network_profile(cfg) -> NetworkProfile:
    """The run's network profile (conf/network/<name>.yaml), from a composed config or a plain one."""
    net = cfg.network
    if not isinstance(net, NetworkProfile):
        from omegaconf import OmegaConf

        net = NetworkProfile(**(OmegaConf.to_container(net, resolve=True) if OmegaConf.is_config(net) else net))
    return net


@dataclass(frozen=True)
class RunSpec:
    """One strategy run of a job: the label it is reported under, the strategy, its params."""

    label: str
    name: str
    params: dict


@dataclass(frozen=True)
class Job:
    """What a config asks for, resolved once (`resolve_job`) and handed to every `check_run` hook
    and to the runner, so that no step derives it again: the query `families` its workload holds
    (its family, and a mixed generated workload's others: `configured_families`), whether its
    generator makes `snapshots` queries, the workload's `source` (generator or file), the strategy
    `runs` it can run, the load `adjuster` (None for adjust=none), and the runs `strategy=all` left
    out (`skipped`, each with its reason). The hooks see it before its runs and adjuster are
    filled in (their answers decide those)."""

    families: tuple[str, ...]
    snapshots: bool
    source: str
    runs: tuple[RunSpec, ...] = ()
    adjuster: Any = None
    skipped: tuple[str, ...] = ()


def strategy_runs(cfg, job: Job) -> list[RunSpec]:
    """The runs a job covers: the named strategy, or every registered one routing the workload's
    family (or those of `strategy.include`), then the labelled variants. Raises ConfigError."""
    family = cfg.workload.family
    runs = [RunSpec(n, n, dict(cfg.strategy.params) if cfg.strategy.name != "all" else {})
            for n in strategy_names(cfg, job)]
    for v in cfg.strategy.variants:
        if not v.label or not v.name:
            raise ConfigError(f"strategy.variants entry {dict(v)!r} needs a label and a name")
        try:
            cls = registry.get(v.name)
            cls.make_params(dict(v.params))
        except ValueError as exc:
            raise ConfigError(f"strategy.variants[{v.label}]: {exc}") from None
        if not routes(cls, family):
            raise ConfigError(f"strategy.variants[{v.label}]: {v.name!r} does not route {family!r} queries")
        runs.append(RunSpec(v.label, v.name, dict(v.params)))
    labels = [r.label for r in runs]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"strategy labels must be unique; got {labels}")
    return runs


def strategy_names(cfg, job: Job) -> list[str]:
    """The strategies a run covers: the named one, or every registered one routing the family."""
    family = cfg.workload.family
    if cfg.strategy.name == "all":
        supported = registry.supporting(family)
        for other in job.families:  # a mixed workload: strategies routing all its families
            supported = [n for n in supported if n in registry.supporting(other)]
        if job.snapshots:  # those that answer snapshot queries exactly (check_snapshots)
            supported = [n for n in supported if registry.get(n).stores_objects]
        include = list(cfg.strategy.include)
        for n in include:
            registry.get(n)  # raises with the valid names
            if n not in supported:
                raise ConfigError(f"strategy.include: {n!r} does not route {family!r} queries; "
                                  f"strategies that do: {', '.join(supported)}")
        return [n for n in supported if n in include] if include else supported
    cls = registry.get(cfg.strategy.name)  # raises with the valid names
    for family in job.families:
        if not routes(cls, family):
            raise ConfigError(
                f"strategy {cls.name!r} does not route {family!r} queries (it routes {sorted(cls.families)}); "
                f"strategies that do: {', '.join(registry.supporting(family))}"
            )
    if job.snapshots:
        try:
            check_snapshots(cls)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    return [cls.name]


def configured_families(cfg) -> list[str]:
    """The query families the configured workload holds: its family, and a mixed workload's others."""
    if snapshot_workload(cfg):
        return sorted(set(workload_families(cfg.workload)) | {cfg.workload.family})
    return [cfg.workload.family]


def snapshot_workload(cfg) -> bool:
    """Whether the configured generator makes snapshot queries (an event file's are found when it
    is read, and checked then)."""
    return cfg.workload.source == "generator" and cfg.workload.protocol in SNAPSHOT_PROTOCOLS


CLUSTER_UP = "cluster-up"
ORACLE_METHODS = ("auto", "brute", "tiled")


def spark_master(cfg) -> str:
    """cluster.master, with `cluster-up` read from the state file `make cluster-up` wrote."""
    master = str(cfg.cluster.master)
    if master != CLUSTER_UP:
        return master
    from harness.run import cluster

    st = cluster.status()
    if not st["running"]:
        raise _bad("cluster.master", master, "a running cluster from `make cluster-up WORKERS=n` "
                   f"({st.get('message', 'its processes have exited')}), or spark://host:port, or local[*]")
    return st["master_url"]


def validate(cfg) -> list[RunSpec]:
    """`resolve_job`'s strategy runs (`strategy=all`: those it can run; the others are in SKIPPED
    with their reasons, and on stderr)."""
    return list(resolve_job(cfg).runs)


def resolve_job(cfg) -> Job:
    """Check every value that would fail later, once, and return the `Job` the config asks for:
    its families computed once, then every hook (`check_run`) of the families, strategies and
    adjuster the job involves asked with it."""
    SKIPPED.clear()

    if not isinstance(cfg.workers, int) or cfg.workers < 1:
        raise _bad("workers", cfg.workers, "an integer >= 1")
    if cfg.dispatchers < 1:
        raise _bad("dispatchers", cfg.dispatchers, "an integer >= 1")
    if cfg.fit_processes is not None and (not isinstance(cfg.fit_processes, int) or cfg.fit_processes < 0):
        raise _bad("fit_processes", cfg.fit_processes, "null (one per driver core), 0 (fit in the driver) or an "
                   "integer >= 1")
    spark_master(cfg)  # a cluster that is not up fails here, before Spark starts
    table_columns = getattr(getattr(cfg, "table", None), "columns", None) or []
    from harness.report import metrics as metrics_registry

    for col in table_columns:
        if not metrics_registry.known(col):
            raise _bad("table.columns", col, "metrics-registry names, e.g. throughput_compute_eps, latency_mean_ms, "
                       "busy_max_min (harness/report/metrics.py)")
    if cfg.oracle.method not in ORACLE_METHODS:
        raise _bad("oracle.method", cfg.oracle.method, ", ".join(ORACLE_METHODS))
    if not isinstance(cfg.oracle.tiles, int) or cfg.oracle.tiles < 0:
        raise _bad("oracle.tiles", cfg.oracle.tiles, "an integer >= 1, or 0 (chosen from the stream's size)")
    if cfg.oracle.method == "tiled":
        fam = families.get(cfg.workload.family) if cfg.workload.family in families.names() else None
        if fam is not None and fam.scale_oracle is None:
            raise _bad("oracle.method", "tiled", f"brute or auto: the {fam.name} family has no scale oracle")
    if cfg.cluster.lost_executors_timeout_s < 0:
        raise _bad("cluster.lost_executors_timeout_s", cfg.cluster.lost_executors_timeout_s,
                   "seconds >= 0 (0: wait for executors forever)")
    if cfg.state_uri:
        try:
            store.check(str(cfg.state_uri))
        except store.StoreError as exc:
            raise ConfigError(str(exc)) from None
    validate_families(cfg)
    if not 0 < cfg.latency.rate_fraction <= 10:
        raise _bad("latency.rate_fraction", cfg.latency.rate_fraction, "a number in (0, 10]")
    if cfg.latency.rate_eps is not None and cfg.latency.rate_eps <= 0:
        raise _bad("latency.rate_eps", cfg.latency.rate_eps, "a positive rate in events/s, or null")
    if cfg.latency.arrivals not in ("even", "event_time"):
        raise _bad("latency.arrivals", cfg.latency.arrivals, "even, event_time")
    if cfg.measure.repeat < 1:
        raise _bad("measure.repeat", cfg.measure.repeat, "an integer >= 1")
    if cfg.measure.discard < 0:
        raise _bad("measure.discard", cfg.measure.discard, "an integer >= 0 (ignored unless measure.repeat is larger)")
    if cfg.measure.min_bottleneck_s < 0:
        raise _bad("measure.min_bottleneck_s", cfg.measure.min_bottleneck_s, "seconds >= 0")
    if cfg.get("aa_role") not in (None, "a2"):
        raise _bad("aa_role", cfg.aa_role, "null, or a2 (the A/A repeat of a preset's first job)")
    for key in ("max_load_per_core", "min_cpu_wall", "max_steal", "max_others_busy"):
        if not cfg.machine[key] >= 0:
            raise _bad(f"machine.{key}", cfg.machine[key], "a number >= 0")
    try:
        network_profile(cfg).check()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    try:
        validate_dataset_config(cfg.dataset)
        families.get(cfg.workload.family).validate_workload(cfg.workload)
        job = Job(tuple(configured_families(cfg)), snapshot_workload(cfg), str(cfg.workload.source))
        for name in job.families:
            families.get(name).check_run(cfg, job)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if cfg.epochs.by not in EPOCH_BY:
        raise _bad("epochs.by", cfg.epochs.by, ", ".join(EPOCH_BY))
    if cfg.epochs.size < 0:
        raise _bad("epochs.size", cfg.epochs.size, "0 (one measured epoch) or a positive count / seconds")
    from harness.report.experiments import PLOTS

    unknown_plots = sorted(set(cfg.experiment.plots) - set(PLOTS))
    if unknown_plots:
        raise _bad("experiment.plots", unknown_plots, ", ".join(PLOTS))
    try:
        runs = strategy_runs(cfg, job)
        if cfg.strategy.name != "all":
            registry.get(runs[0].name).make_params(dict(cfg.strategy.params))
    except ConfigError:
        raise
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    runs = runnable(cfg, runs, lambda spec: registry.get(spec.name).check_run(cfg, job))
    runs, adjuster = adjustable_runs(cfg, runs, job)
    return replace(job, runs=tuple(runs), adjuster=adjuster, skipped=tuple(SKIPPED))


SKIPPED: list[str] = []  # the last validate()'s runs left out of strategy=all, each with its reason


def runnable(cfg, runs: list[RunSpec], check) -> list[RunSpec]:
    """The runs `check(spec)` does not refuse (a ValueError; harness.core.params.RunRefused carries
    the line to skip with): a job naming its strategy fails with the first refusal, as does one that
    would run nothing; `strategy=all` runs the others and says, one line each, which it skipped and
    why (`skipped`)."""
    refused: dict[str, ValueError] = {}
    for spec in runs:
        try:
            check(spec)
        except ValueError as exc:
            refused[spec.label] = exc
    kept = [r for r in runs if r.label not in refused]
    if refused and (cfg.strategy.name != "all" or not kept):
        raise ConfigError(str(next(iter(refused.values())))) from None
    for label, exc in refused.items():
        skipped(f"{label}: {getattr(exc, 'skip', exc)}")
    return kept


def skipped(line: str) -> None:
    """A run `strategy=all` leaves out: one line on stderr, kept in SKIPPED for the caller."""
    import sys

    SKIPPED.append(line)
    print(f"skipped {line}", file=sys.stderr)


def validate_families(cfg) -> None:
    """Plugin modules import, the workload's family exists, and every `index.<family>` block names
    a family and only its index's settings."""
    try:
        known = families.load_plugins(list(cfg.families))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if cfg.workload.family not in known:
        raise _bad("workload.family", cfg.workload.family, _renamed(cfg.workload.family, known) + ", ".join(known))
    for name, params in dict(cfg.index).items():
        if name not in known or not hasattr(params, "keys"):
            raise _bad(f"index.{name}", params,
                       f"{_renamed(name, known)}a block of settings per query family: {', '.join(known)}")
        fam = families.get(name)
        try:
            fam.check_params(fam.make_params(dict(params)))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"index.{name}: {exc}") from None


def _renamed(name: str, known: list[str]) -> str:
    """For a family's former name, the start of the allowed values that names its new one."""
    new = FORMER_FAMILY_NAMES.get(name)
    return f"{new} (the {name!r} family's name since it was renamed), or " if new in known else ""


def adjustable_runs(cfg, runs: list[RunSpec], job: Job) -> tuple[list[RunSpec], Any]:
    """With an adjuster, the runs it can adjust, and the adjuster: an explicitly named strategy it
    cannot adjust is an error; `strategy=all` keeps those it can (and says which it dropped). The
    adjuster refuses what else it cannot run in its `check_run`."""
    if cfg.adjust.name == "none":
        return runs, None
    try:  # the rule the run assembly applies again with the stream's own families
        check_adjustable(list(job.families), cfg.adjust.name, "workload")
    except ValueError as exc:
        raise ConfigError(f"{exc} (ADR-0008)") from None
    try:
        adj = get_adjuster(cfg.adjust.name)
        adj.check_params(adj.make_params(dict(cfg.adjust.params)))
        adj.check_run(cfg, job)
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from None
    if cfg.epochs.size <= 0:
        raise ConfigError(f"adjust={cfg.adjust.name} adjusts between epochs, but epochs.size=0 makes the measured "
                          "stream one epoch; set epochs.size (events per epoch, or seconds with epochs.by=time)")
    able = [r for r in runs if adj.applies_to(r.name) and registry.get(r.name).unit_router]
    if not able:
        fit = [n for n in registry.names() if adj.applies_to(n) and registry.get(n).unit_router]
        raise ConfigError(f"adjust={cfg.adjust.name} cannot adjust {', '.join(r.label for r in runs)}; "
                          f"strategies it adjusts: {', '.join(fit)}")
    if cfg.strategy.name != "all" and len(able) < len(runs):
        bad = [r.label for r in runs if r not in able]
        raise ConfigError(f"adjust={cfg.adjust.name} cannot adjust {', '.join(bad)}")
    for r in runs:
        if r not in able:
            skipped(f"{r.label}: adjust={cfg.adjust.name} cannot adjust it (it adjusts "
                    f"{', '.join(x.label for x in able)})")
    return able, adj


def check_overrides(args: list[str]) -> None:
    """Reject `key=value` overrides whose key is not in the schema, naming the valid keys."""
    chosen = dict(a.split("=", 1) for a in args if "=" in a and not a.startswith(("-", "+", "~")))
    for arg in args:
        if arg.startswith(("-", "+", "~", "hydra")) or "=" not in arg:
            continue
        key = arg.split("=", 1)[0]
        if key in config_groups():
            continue  # a group choice: Hydra lists the valid options itself
        if key.startswith("strategy.params.") and chosen.get("strategy", "all") != "all":
            try:
                registry.get(chosen["strategy"]).make_params({key.split(".")[2]: None})
            except ValueError as exc:
                if "valid parameters" in str(exc):
                    raise ConfigError(str(exc)) from None
            except TypeError:
                pass
        node: Any = Config()
        path: list[str] = []
        for part in key.split("."):
            if not is_dataclass(node):
                break  # a free-form map (strategy.params, cluster.conf) or a leaf value
            keys = {f.name: getattr(node, f.name) for f in fields(node)}
            if part not in keys:
                close = difflib.get_close_matches(part, list(keys), n=1)
                hint = f" (did you mean {'.'.join(path + close)!r}?)" if close else ""
                raise ConfigError(f"unknown config key {key!r}{hint}; valid keys here: {', '.join(sorted(keys))}")
            node = keys[part]
            path.append(part)
