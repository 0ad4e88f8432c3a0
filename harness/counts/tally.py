"""What a run does, counted: per worker and epoch the messages in (object and subscription-update
copies), subscriptions stored, candidates checked, results, index size and migrated bytes; per
dispatcher and epoch the copies out (issue 51 part 1).

The counts come from the run itself, not from a model of it: `count_run` runs the same assembly,
fit and epoch loop as `simulate` (harness/engine/simulate.py: `run_stream`, the routers' and
adjusters' own code) with one repetition and no timing read, and a `Tally` observes the executor:
the routing of each epoch, each worker's `WorkerEpoch`, each migration. The worker counters are
the ones a run's workers table holds (harness/engine/monitor.py `COUNTERS`, `WorkerOutput.counters`).
The executor is the in-process one (`InProcessExecutor.tally`) or, with `counts.executor=spark`,
the timed runs' Spark executor (`SparkExecutor.tally`, harness/counts/spark.py): the same
mapInArrow dispatch, worker and merge tasks, which count per dispatcher and per worker themselves
(harness/engine/tally.py) and return it through Arrow with the workers' own counters, so a stream
that does not fit one machine is counted on a cluster (`cluster=standalone`). The stream is
prepared once per invocation (`count_stream`), whichever strategies and executor count it.

Sampling (`object_sample` = p < 1): the objects are kept each with probability p (a seeded
Bernoulli draw), those of the warm-up too (at the papers' sizes the warm-up's objects are millions,
and its epoch's work was the count's largest part), every subscription event is kept, the
strategy still fits on the whole warm-up (`fit_prefix`: the same router as the full run's), and
the events keep their seqs (so the dispatcher an event is dealt to, seq % dispatchers, is its own). Only
families whose objects are matched independently of each other (`Family.object_sampling`) allow
it. A counter the objects drive (object copies, candidates, results, snapshot checks, objects
held) is estimated as its sampled value / p (Horvitz-Thompson); the others (subscription copies,
subscriptions stored) are exact. Standard errors: for object copies, a copy per kept object, the
binomial sqrt(n (1 - p)) / p; for a counter that varies per object (candidates, results), the
estimate's relative error is taken as that of the worker's total work over its objects,
sqrt((1 - p) sum w_i^2) / sum w_i with w_i the object's work units (`WorkerOutput.work`: for the
range index 1 + its candidates), i.e. the counter is assumed to go with the work object by object
(exact for candidates, an approximation for results). Adaptive parts (an adjuster, a router that
learns from the objects it routes) see the sampled stream, so their decisions may differ from the
full stream's: the metadata says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from harness.core.events import OBJECT, Events, format_digest
from harness.engine.assembly import run_families
from harness.engine.epochs import epoch_bounds
from harness.engine.simulate import run_stream
from harness.families import registry as families
from strategies.base import FitContext, Router

# counters the objects drive: estimated by sampled / p. The first two are one per kept object
# (binomial error), the others vary per object (error from the work's spread)
PER_OBJECT = ("objects", "stored_objects", "stored_bytes")
PER_WORK = ("candidates", "results", "snapshot_checks")
SCALED = PER_OBJECT + PER_WORK
# what each worker row reports, besides the scaled counters (exact whatever the sample)
EXACT = ("inserts", "deletes", "snapshots", "restored", "kept", "index_bytes", "replicas_dropped", "resent")


@dataclass
class Counts:
    """A count run's tables and what produced them."""

    workers: pd.DataFrame  # per (epoch, worker)
    epochs: pd.DataFrame  # per epoch
    dispatchers: pd.DataFrame  # per (epoch, dispatcher)
    meta: dict = field(default_factory=dict)
    digest: str = ""  # the run's results digest (count and hash of the merged pairs; sampled when p < 1)


class Tally:
    """The executor's observer (InProcessExecutor.tally, SparkExecutor.tally): per epoch, what the
    dispatchers received and sent (harness/engine/tally.py `dispatch_counts`, summed over the
    dispatch tasks on Spark) and each worker's objects' work sums (`work_sums`); per migration,
    what each worker sent and received."""

    def __init__(self, n_workers: int, n_dispatchers: int):
        self.n_workers, self.n_dispatchers = n_workers, max(int(n_dispatchers), 1)
        self.dispatch: dict[int, dict[str, np.ndarray]] = {}
        self.work: dict[tuple[int, int], tuple[float, float, int]] = {}  # (epoch, w) -> (sum w, sum w^2, objects)
        self.migrations: dict[int, list[dict]] = {}

    def dispatched(self, epoch: int, counts: dict[str, np.ndarray]) -> None:
        self.dispatch[epoch] = counts

    def worked(self, epoch: int, w: int, sums) -> None:
        self.work[(epoch, w)] = (float(sums[0]), float(sums[1]), int(sums[2]))

    def migrated(self, epoch: int, infos: list[dict]) -> None:
        self.migrations[epoch] = infos


@dataclass
class CountStream:
    """The stream a count runs, prepared once per invocation whichever strategies and executor
    count it: the full stream's epochs and, with a sample, the kept events (seqs kept), the same
    epochs as their positions and the whole warm-up the strategies fit on."""

    events: Events  # what the runs process: the kept events (a sample) or the whole stream
    warmup: int  # the full stream's warm-up prefix
    bounds: list[tuple[int, int, int]]  # the full stream's epochs
    run_bounds: list[tuple[int, int, int]]  # the same epochs as positions of `events`
    objects_full: dict[int, int]  # per epoch, the full stream's objects
    families: list[str]
    object_sample: float = 1.0
    sample_seed: int = 0
    fit_prefix: Events | None = None  # the whole warm-up, when `events` is a sample

    @property
    def sampled(self) -> bool:
        return self.fit_prefix is not None


def _draw(rng, chunk: Events, p: float) -> np.ndarray:
    """The positions a chunk keeps (the next Bernoulli(p) draws for its objects)."""
    objects = np.flatnonzero(chunk.kind == OBJECT)
    drop = objects[rng.random(len(objects)) >= p]
    keep = np.ones(len(chunk), np.bool_)
    keep[drop] = False
    return np.flatnonzero(keep)


def sample_objects(events: "Events | list[Events]", p: float, seed: int) -> np.ndarray | None:
    """The positions kept: every event but the objects a seeded Bernoulli(p) draw drops (None:
    p >= 1, every event). `events` may be the stream's consecutive chunks: one generator draws
    for the objects chunk after chunk, the same draws as for the whole stream at once (a
    generator's doubles do not depend on how many are asked at a time), so the sample does not
    depend on the chunking."""
    if p >= 1:
        return None
    rng, kept, base = np.random.default_rng(seed), [], 0
    for chunk in _chunks(events):
        kept.append(base + _draw(rng, chunk, p))
        base += len(chunk)
    return np.concatenate(kept) if kept else np.zeros(0, np.int64)


def _chunks(events):
    """A stream given whole (Events) as its one chunk; chunks (a list, or the cache's
    StreamChunks, which reads a batch at a time) as they are."""
    return [events] if isinstance(events, Events) else events


@dataclass
class _Length:
    """What `epoch_bounds` reads of a stream given as chunks: its length and (epochs by time) its times."""

    n: int
    ts: np.ndarray | None

    def __len__(self) -> int:
        return self.n


def count_stream(events, warmup: int, *, epochs_by: str = "count", epoch_size: float = 0,
                 object_sample: float = 1.0, sample_seed: int = 0, workload_family: str | None = None) -> CountStream:
    """A normalised stream prepared for counting (module docstring: Sampling): `events` the whole
    stream (it may be the memory-mapped cached one) or its consecutive chunks (a list, or the
    cache's StreamChunks). Its facts, sample and warm-up come in two passes over its chunks: the first counts the
    events and draws the sample (and gathers times for epochs by time), the second counts each
    epoch's objects and copies the kept rows and the warm-up. With a sample, nothing but the
    current chunk and the copied rows is in memory at a time (the cache's StreamChunks reads one
    batch at a time: a mapped stream's pages would count in the resident set as touched, 8 GB
    at PS2Stream's mu = 5M); without one, the chunks are joined (every event runs)."""
    p, seed = float(object_sample), int(sample_seed)
    if workload_family:  # before reading anything
        check_sampling(p, [workload_family])
    chunks = _chunks(events)
    if isinstance(events, Events):
        names = run_families(events, workload_family)
        n, ts, keep = len(events), None, sample_objects(events, p, seed)
    else:
        present, n, ts_parts, kept = set(), 0, [], []
        rng = np.random.default_rng(seed)
        for chunk in chunks:
            if (chunk.family >= 0).any():
                present |= set(run_families(chunk))
            if epochs_by == "time":
                ts_parts.append(np.array(chunk.ts))
            if p < 1:
                kept.append(n + _draw(rng, chunk, p))
            n += len(chunk)
        names = sorted(present | ({workload_family} if workload_family else set())) or ["range"]
        ts = np.concatenate(ts_parts) if ts_parts else np.zeros(0)
        keep = (np.concatenate(kept) if kept else np.zeros(0, np.int64)) if p < 1 else None
    check_sampling(p, names)
    bounds = epoch_bounds(events if isinstance(events, Events) else _Length(n, ts), warmup, epochs_by, epoch_size)
    edges = np.array([lo for _, lo, _ in bounds] + [bounds[-1][2]], np.int64)
    counts, base = np.zeros(len(bounds), np.int64), 0
    prefix, run = [], []
    for chunk in chunks:
        m = len(chunk)
        counts += np.diff(np.searchsorted(base + np.flatnonzero(chunk.kind == OBJECT), edges))
        if keep is not None:
            if base < warmup:
                prefix.append(chunk.take(np.arange(min(m, warmup - base))))
            a, b = np.searchsorted(keep, [base, base + m])
            run.append(chunk.take(keep[a:b] - base))
        elif not isinstance(events, Events):
            run.append(chunk.take(np.arange(m)))  # a copy: the chunk may be read into a buffer reused next
        base += m
    full_objects = {e: int(c) for (e, _, _), c in zip(bounds, counts)}
    if isinstance(events, Events) and keep is None:
        return CountStream(events, warmup, bounds, bounds, full_objects, names, p, seed)
    joined = run[0] if len(run) == 1 else Events.concat(run)
    fit_prefix = None if keep is None else (prefix[0] if len(prefix) == 1 else Events.concat(prefix))
    return CountStream(joined, warmup, bounds, sampled_bounds(bounds, keep), full_objects, names, p, seed, fit_prefix)


def sampled_bounds(bounds: list[tuple[int, int, int]], keep: np.ndarray | None) -> list[tuple[int, int, int]]:
    """The epochs of the full stream as positions of the sampled one (the same events, less the
    objects dropped): an epoch is what it is in the full run, whatever the sample."""
    if keep is None:
        return bounds
    out = []
    for epoch, lo, hi in bounds:
        a, b = (int(x) for x in np.searchsorted(keep, [lo, hi]))
        if b <= a:
            raise ValueError(f"counts.object_sample keeps no event of epoch {epoch} (events [{lo}, {hi})); "
                             "allowed: a larger sample, or larger epochs (epochs.size)")
        out.append((epoch, a, b))
    return out


def adaptive_parts(router, adjust: str) -> list[str]:
    """What in the run decides from the objects it sees, so that a sample may change its decisions."""
    out = [f"adjust={adjust}"] if adjust != "none" else []
    if type(router).observe_objects is not Router.observe_objects:
        out.append(f"its router ({type(router).__name__}) learns from the objects it routes (observe_objects)")
    if type(router).observe_feedback is not Router.observe_feedback:
        out.append(f"its router ({type(router).__name__}) reads the mergers' feedback (observe_feedback)")
    return out


def check_sampling(p: float, family_names: list[str]) -> None:
    """counts.object_sample is in (0, 1], and < 1 only where every family of the run allows it."""
    if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0 < p <= 1:
        raise ValueError(f"counts.object_sample={p!r} is invalid; allowed: a number in (0, 1] (1: every object)")
    if p < 1:
        fixed = [n for n in family_names if not families.get(n).object_sampling]
        if fixed:
            allowed = [n for n in families.names() if families.get(n).object_sampling]
            raise ValueError(f"counts.object_sample={p!r} is invalid for a {fixed[0]!r} workload: its answers are "
                             "over the objects together, a sample changes them; allowed: 1, or a sample < 1 with "
                             f"the families {', '.join(allowed)}")


def _se_binomial(n: np.ndarray, p: float) -> np.ndarray:
    return np.sqrt(np.asarray(n, np.float64) * (1 - p)) / p


def count_run(cls: type, stream: CountStream, n_workers: int, context: FitContext, *,
              index_params: dict | None = None, n_dispatchers: int = 1, adjust: str = "none",
              adjust_params: dict | None = None, strategy_params: dict | None = None, local_pairs: bool = True,
              workload_family: str | None = None, anomalies: dict | None = None, progress=None, label: str = "",
              spark=None) -> Counts:
    """The counts of one run of a prepared stream (`count_stream`; module docstring), in process,
    or on Spark when `spark` (a SparkLane, harness/counts/spark.py) gives its lane's executor."""
    events, bounds, run_bounds, full_objects = stream.events, stream.bounds, stream.run_bounds, stream.objects_full
    names, p = stream.families, stream.object_sample
    tally = Tally(n_workers, n_dispatchers)
    t0 = time.perf_counter()
    loop, run = run_stream(cls, events, run_bounds[0][2], run_bounds, context, n_workers, index_params,
                           adjust=adjust, adjust_params=adjust_params, strategy_params=strategy_params,
                           local_pairs=local_pairs, anomalies=anomalies, repeat=1, n_dispatchers=n_dispatchers,
                           workload_family=workload_family, tally=tally, progress=progress, label=label,
                           fit_prefix=stream.fit_prefix,
                           executor=None if spark is None else spark.executor_for(tally))
    elapsed = time.perf_counter() - t0
    series = {row["epoch"]: row for row in loop.series}
    w_rows, e_rows, d_rows = [], [], []
    for res, (epoch, lo, hi), (_, slo, shi) in zip(loop.epochs, bounds, run_bounds):
        mig_in = {i["dst"]: i for i in tally.migrations.get(epoch, []) if "dst" in i}
        mig_out = {i["src"]: i for i in tally.migrations.get(epoch, []) if "src" in i}
        e_work = np.zeros(3)
        for w in range(n_workers):
            st = res.worker_stats.get(w, {})
            s_w, s_w2, n_obj = tally.work.get((epoch, w), (0.0, 0.0, 0))
            e_work += (s_w, s_w2, n_obj)
            rel = np.sqrt((1 - p) * s_w2) / s_w if s_w > 0 else 0.0  # relative error of the work's estimate
            row = {"epoch": epoch, "worker": w}
            for c in SCALED:
                raw = float(st.get(c, 0))
                row[c] = raw / p
                row[f"{c}_sampled"] = raw
                row[f"{c}_se"] = float(_se_binomial(raw, p)) if c in PER_OBJECT else rel * raw / p
            if st.get("stored_objects", 0):  # bytes held go with the objects held
                row["stored_bytes_se"] = row["stored_bytes"] * row["stored_objects_se"] / max(row["stored_objects"], 1)
            for c in EXACT:
                row[c] = float(st.get(c, 0))
            row["updates"] = row["inserts"] + row["deletes"]
            sampled_in = float(st.get("events", 0))
            row["messages_in"] = sampled_in - row["objects_sampled"] + row["objects"]
            row["messages_in_se"] = row["objects_se"]
            row["work_units"] = s_w / p
            row["migrated_in"] = float(mig_in.get(w, {}).get("moved_in", 0))
            row["migrated_in_bytes"] = float(mig_in.get(w, {}).get("moved_bytes", 0))
            row["migrated_out"] = float(mig_out.get(w, {}).get("leaving", 0))
            w_rows.append(row)
        disp = tally.dispatch.get(epoch)
        for d in range(tally.n_dispatchers):
            if not disp:
                break
            objs, events_in = disp["objects"][d], disp["events"][d]
            d_rows.append({"epoch": epoch, "dispatcher": d,
                           "events_in": events_in - objs + objs / p, "objects_in": objs / p,
                           "objects_in_se": float(_se_binomial(objs, p)),
                           "object_copies_out": disp["object_copies"][d] / p,
                           "object_copies_out_se": float(np.sqrt((1 - p) * disp["object_copies_sq"][d]) / p),
                           "query_copies_out": disp["query_copies"][d],
                           "messages_out": disp["query_copies"][d] + disp["object_copies"][d] / p})
        rel = np.sqrt((1 - p) * e_work[1]) / e_work[0] if e_work[0] > 0 else 0.0
        s = series.get(epoch, {})
        e_rows.append({"epoch": epoch, "measured": epoch > 0, "events_full": hi - lo, "events_run": shi - slo,
                       "objects_full": full_objects[epoch], "objects_run": int(np.count_nonzero(
                           events.kind[slo:shi] == OBJECT)),
                       "object_copies": res.routed_objects / p, "query_copies": float(res.routed_queries),
                       "results_merged": res.result_count / p, "results_merged_se": rel * res.result_count / p,
                       "migrated_queries": float(s.get("migrated_queries", 0)),
                       "migrated_bytes": float(s.get("migrated_bytes", 0)),
                       "operation": str(s.get("operation", ""))})
    count = sum(e.result_count for e in loop.epochs)
    hashed = sum(e.result_hash for e in loop.epochs) % (1 << 64)
    meta = {"strategy": cls.name, "workers": n_workers, "dispatchers": n_dispatchers, "families": names,
            "executor": "in_process" if spark is None else "spark",
            "events_full": int(bounds[-1][2]), "events_run": int(len(events)), "warmup": int(stream.warmup),
            "object_sample": p, "sample_seed": stream.sample_seed,
            "objects_measured_full": int(sum(v for e, v in full_objects.items() if e > 0)),
            "objects_measured_run": int(sum(r["objects_run"] for r in e_rows if r["measured"])),
            "estimator": ("sampled / object_sample (the warm-up's objects sampled too; the fit on the whole warm-up)"
                          if p < 1 else "exact (every object)"),
            "standard_error": ("objects: sqrt(n (1-p))/p; candidates, results, snapshot_checks: the worker's "
                               "relative error of its work sum(w_i) over its objects, sqrt((1-p) sum w_i^2)/sum w_i"
                               if p < 1 else "0 (every object)"),
            "adaptive": adaptive_parts(loop.router, adjust if isinstance(adjust, str) else adjust.name),
            "indexes": run.indexes(), "epochs": len(bounds) - 1, "loop_s": elapsed,
            # the largest peak resident set of a worker or merge task's processes (Spark; 0 in process)
            "executor_peak_bytes": max((int(e.executor_peak_bytes) for e in loop.epochs), default=0),
            "plans": len(loop.plans)}
    return Counts(pd.DataFrame(w_rows), pd.DataFrame(e_rows), pd.DataFrame(d_rows), meta,
                  format_digest(count, hashed))

