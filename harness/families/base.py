"""The query-family plugin contract: what a family brings so that the engine never names it.

A family is a predicate or ranking over the stream (range, knn, topk, frequent_terms); the kind of a query
event (insert/delete: continuous, snapshot: one-shot) is a separate axis (harness.core.events).
A family carries four parts that sit together in its folder (harness/families/<name>/):

- a `WorkerIndex`: consumes a worker's sub-stream of an epoch in seq order, emits its partial
  results, counts its work, and keeps its state (a `StateBundle`) across epochs and migrations;
- a `Merger`: combines the workers' partial results per query, bucket by bucket (buckets by query
  id, so one query's partials always meet), with state kept across epochs and the epoch's query
  events at hand; it may hand a small per-query feedback table back to the router;
- a brute-force oracle that shares no code with the index, the answer every run is checked against;
- a workload generator (datasets/workloads/).

Everything else a family needs is declared on its class, as data the shared modules read, so none
of them names a family: where its workloads come from (`generator`, `snapshot_protocols`, ...:
harness/families/workload.py), its own workload knobs (`WorkloadKnobs`, `workload_fields`: the
flat `workload.*` schema and the workload cache key), its snapshot answers (in its folder, from the
shared ObjectStore) and its own figures of a run (`counters`, `metrics`, `summarise`,
`snapshot_type`: the report asks every registered family). `harness.engine.contract.check_family`
checks a family class against all of it.

A family defining its class registers itself (harness.families.registry), whether it lives in this
package or in a user's module. A family may declare `routes_like`: a family whose routing rule is
a sound superset for it (every result of its predicate is a result of that family's predicate on
the same event columns), so every strategy routing that family routes it exactly with no edit.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, ClassVar, Iterator

import numpy as np
import pyarrow as pa

from harness.core.events import DELETE, INSERT, OBJECT, SNAPSHOT, Events, splitmix64
from harness.core.metric import Metric
from harness.core.params import ParamsMixin
from harness.families.result_rows import ResultFormat, pair_results

NEVER = np.iinfo(np.int64).max  # deletion seq of a subscription that is still live
MAX_BLOCK_BYTES = 64 << 20  # a result block stays well under Arrow's 2 GiB per binary array


def deletion_seqs(query_ids: np.ndarray, ev: Events) -> tuple[np.ndarray, int]:
    """Seq of the first deletion of each query id in the batch (NEVER if none), and how many
    deletions named a query the worker does not hold."""

    dele = np.full(len(query_ids), NEVER, np.int64)
    d_rows = np.flatnonzero(ev.kind == DELETE)
    if len(d_rows) == 0:
        return dele, 0
    if len(query_ids) == 0:
        return dele, len(d_rows)
    order = np.argsort(query_ids, kind="stable")
    sorted_ids = query_ids[order]
    at = np.searchsorted(sorted_ids, ev.id[d_rows])
    found = sorted_ids[np.minimum(at, len(sorted_ids) - 1)] == ev.id[d_rows]
    np.minimum.at(dele, order[at[found]], ev.seq[d_rows][found])
    return dele, int((~found).sum())


def snapshot_look_back(events: Events, code: int, field: str, extent=None, needs_k: bool = False) -> float:
    """The longest look-back (seconds) of a family's snapshot queries in a stream, 0 when it has
    none; a clear error for a look-back that is not positive, an event time that goes back (the
    store keeps objects in arrival order and finds a look-back by binary search), a region wholly
    outside `extent`, or (`needs_k`) a k below 1."""
    rows = np.flatnonzero((events.kind == SNAPSHOT) & (events.family == code))
    if len(rows) == 0:
        return 0.0

    def fail(i, what, value, allowed):
        raise ValueError(f"{field}: snapshot query {int(events.id[i])} (seq {int(events.seq[i])}) has {what}={value!r}; "
                         f"allowed: {allowed}")

    if needs_k and (events.k[rows] < 1).any():
        i = rows[np.flatnonzero(events.k[rows] < 1)[0]]
        fail(i, "k", int(events.k[i]), "an integer >= 1")
    if extent is not None:
        x0, y0, x1, y1 = (float(v) for v in extent)
        out = (events.xmax[rows] < x0) | (events.xmin[rows] > x1) | (events.ymax[rows] < y0) | (events.ymin[rows] > y1)
        if out.any():
            i = rows[np.flatnonzero(out)[0]]
            fail(i, "region", tuple(float(events.cols[c][i]) for c in ("xmin", "ymin", "xmax", "ymax")),
                 f"a rectangle meeting the space {(x0, y0, x1, y1)}")
    tau = events.tau[rows]
    bad = ~(tau > 0)  # NaN too
    if bad.any():
        i = rows[np.flatnonzero(bad)[0]]
        fail(i, "tau", float(events.tau[i]), "a look-back in seconds > 0")
    if len(events) > 1:
        back = np.flatnonzero(np.diff(events.ts) < 0)
        if len(back):
            i = back[0] + 1
            raise ValueError(f"ts: event seq {int(events.seq[i])} has ts={float(events.ts[i])!r} before the "
                             f"previous event's {float(events.ts[i - 1])!r}; allowed with snapshot queries: ts "
                             "nondecreasing in seq")
    if not np.isfinite(tau).all():
        return float("inf")
    return float(tau.max())


def qid_buckets(qids: np.ndarray, n_buckets: int) -> np.ndarray:
    """The merge bucket of each query id: every partial result of a query meets in one bucket."""
    return (splitmix64(np.asarray(qids, np.int64)) % np.uint64(n_buckets)).astype(np.int64)


@dataclass
class StateBundle:
    """What a worker keeps for one family between epochs: its live subscriptions (as insert
    events), the objects it stores (snapshot families; empty otherwise) and per-subscription
    results it keeps (a table with a `qid` column, e.g. a kNN subscription's current top k)."""

    queries: Events = field(default_factory=Events.empty)
    objects: Events = field(default_factory=Events.empty)
    results: pa.Table | None = None

    def __len__(self) -> int:
        return len(self.queries) + len(self.objects) + (self.results.num_rows if self.results is not None else 0)


@dataclass
class WorkerOutput:
    results: Any  # the family's partial results (range: int64 pair keys); its Merger splits and reads them
    work: np.ndarray  # work units per input event (for apportioning service time)
    counters: dict[str, int] = field(default_factory=dict)  # objects, inserts, deletes, candidates, results
    busy_s: float = 0.0  # CPU time of the index work on this epoch (restore excluded)


@dataclass(frozen=True, eq=False)
class IndexContext:
    extent: tuple[float, float, float, float]
    vocab_size: int
    # what a family derives from the whole stream before the run (Family.stream_context): the
    # top-k family's idf per term id and MaxDist; None / 0 for families that need none
    term_weight: np.ndarray | None = None
    max_dist: float = 0.0
    # the longest look-back (seconds) of the family's snapshot queries in the stream: > 0 makes
    # its workers keep the objects they receive (harness/families/object_store.py); 0: none
    look_back: float = 0.0


class WorkerIndex(ABC):
    family: ClassVar[str]
    # `process` over consecutive slices of an epoch gives what one call gives (the worker stage
    # then slices a large epoch to bound its memory: WorkerSet.process_chunks)
    chunkable: ClassVar[bool] = False

    def __init__(self, context: IndexContext, **params):
        self.context = context

    def begin_epoch(self, lo: int, hi: int, horizon: int | None = None) -> None:
        """The epoch's seq range [lo, hi), given before `process`: an index whose state changes
        at seqs it may not receive (a top-k window's expiries) runs them up to `hi`. `horizon`: the
        next epoch's end, when the router wants thresholds valid until then (top-k prefix
        routing). Default: unused."""

    @abstractmethod
    def restore(self, state: StateBundle) -> float:
        """Load the state the previous epoch left; returns the CPU seconds it took."""

    def observe_feedback(self, table: pa.Table) -> None:
        """The family merger's feedback of the previous epoch (`qid`, `value`: every query's, the
        worker keeps what concerns its own), given before `restore`. Default: ignored."""

    def narrowed(self) -> tuple[Events, Events] | None:
        """After `restore`: the stored subscriptions whose routing columns the feedback narrowed, as
        (before, after) insert events row for row (a kNN ball that shrank: its rectangle), or None.
        The worker routes both (`WorkerSet.prune_replicas`) and answers with `apply_narrowing`."""
        return None

    def observe_routing(self, route: Callable[[Events], tuple[np.ndarray, np.ndarray]], worker: int,
                        n_workers: int) -> None:
        """The epoch's routing as the dispatchers do it (`route(events) -> (row, worker)` pairs),
        this worker's id and the number of workers, given before `restore`: for an index whose answer depends on where else
        the router sent an object or a query (the frequent_terms family counts each object once however
        many workers hold it). Default: unused."""

    def apply_narrowing(self, drop: np.ndarray, narrow: np.ndarray) -> None:
        """Forget the subscriptions with ids `drop` (another replica holds them), take the narrowed
        columns of those with ids `narrow`."""

    @abstractmethod
    def process(self, events: Events) -> WorkerOutput:
        """Run the epoch's sub-stream (sorted by seq) through the index."""

    def stored_bytes(self) -> int | None:
        """Bytes of the objects it keeps for snapshot queries (its `store`, an ObjectStore:
        `ObjectStore.stored_bytes`); None when it keeps none."""
        store = getattr(self, "store", None)
        return None if store is None else store.stored_bytes()

    def followups(self) -> pa.Table | None:
        """The snapshot queries this worker began in a first round since the last call, as (qid,
        seq, value) rows for the driver, which routes each query's second round by its value (the
        family's `snapshot_rounds` is 2: SSTD's two-phase SKQ, harness/engine/rounds.py). Default:
        None, every query answered in one round."""
        return None

    def answer_followups(self, state: StateBundle, ev: Events) -> WorkerOutput:
        """A second round over the state this worker kept at the epoch's end: `ev` are its second
        round's queries (each carrying its first round's value, as the family documents)."""
        raise NotImplementedError(f"{type(self).__name__} answers every query in one round")

    @abstractmethod
    def export_state(self) -> StateBundle:
        """What the next epoch (or a migration) needs: live subscriptions, stored objects, results."""

    @abstractmethod
    def size_bytes(self) -> int:
        """Memory held by the index."""


@dataclass
class MergeOutput:
    keys: np.ndarray  # distinct final result keys of the bucket's epoch (int64; the run's digest hashes them)
    feedback: pa.Table | None = None  # (qid, value) rows the router receives before the next epoch
    # the plain rows the keys were computed from (harness/families/result_rows.py), for a family
    # whose keys are hashes (top-k, terms): what keep_pairs writes; None: decoded from the keys
    rows: pa.Table | None = None
    exits: pa.Table | None = None  # top-k: entries that left the global top-k (result_rows.EXIT_SCHEMA)


class Merger(ABC):
    """Combines the workers' partial results of one bucket of queries for one epoch.

    Workers split their output with `blocks` (by query id, `qid_buckets`); the merge stage gives
    every bucket its blocks, the epoch's query events of the bucket when `needs_queries`, and the
    state the bucket's merger exported the epoch before when `stateful` (then every bucket is
    merged every epoch, even one that received nothing, so its state carries on)."""

    stateful: ClassVar[bool] = False
    needs_queries: ClassVar[bool] = False
    # the merge is the distinct union of (qid << 32 | object id) keys and nothing else, so a pair
    # whose object went to one worker is final where it is found (harness/engine/local_pairs.py)
    union_of_pairs: ClassVar[bool] = False

    @staticmethod
    @abstractmethod
    def blocks(results: Any, n_buckets: int) -> Iterator[tuple[int, bytes]]:
        """(bucket, bytes) blocks of one worker's partial results."""

    def restore(self, state: pa.Table | None) -> None:
        """The bucket's state from the previous epoch (None on the first)."""

    @abstractmethod
    def merge(self, blobs: list[bytes], queries: Events) -> MergeOutput:
        """The bucket's final results of the epoch from every worker's blocks."""

    def export_state(self) -> pa.Table | None:
        """The bucket's state for the next epoch (None: nothing to keep)."""
        return None


class Family(ParamsMixin):
    """One query family. Subclasses set `name`, `code` (the events' family column), `index` and
    `merger`, a `Params` dataclass for the index settings (`index.<name>.*` in the config), an
    `oracle`, and their workloads' source (`generator` and its check, or `snapshot_protocols`;
    or an own `build_workload`); the rest is optional (module docstring)."""

    kind: ClassVar[str] = "query family"
    name: ClassVar[str]
    code: ClassVar[int]
    index: ClassVar[type[WorkerIndex]]
    merger: ClassVar[type[Merger]]
    routes_like: ClassVar[str | None] = None  # route as this family when a router has no route_<name>
    # True when any router may route the family by sending each query to every worker (exact
    # whatever the router, since every copy of an object is then reached); a router with a
    # route_<name> of its own narrows that
    routes_everywhere: ClassVar[bool] = False
    needs_k: ClassVar[bool] = False  # its queries carry a result size k (checked >= 1 where they are one-shot)

    @classmethod
    def snapshot_rounds(cls, params: dict | None = None) -> int:
        """How many rounds its snapshot queries take with these index settings: 1 (routed to every
        worker that may hold an answer), or 2 (first to one worker, whose `followups` value the
        driver routes a second round by; `WorkerIndex.answer_followups`)."""
        return 1
    # False when a worker's state cannot move between workers (a top-k replica's local top-k is over
    # its own worker's share of the window): load adjusters then refuse the workload before Spark
    migratable: ClassVar[bool] = True
    # True when each object's matches, checks and copies depend on that object and the
    # subscriptions alone (no other object): the count mode (harness/counts/) may then keep a
    # random share of the measured objects against every subscription and scale its counts by
    # 1/share (`counts.object_sample`). False for families whose answers are over the objects
    # together (kNN's nearest, top-k's count-based window, the terms' frequencies): a sample of the
    # objects changes their answers, not just their number
    object_sampling: ClassVar[bool] = False
    # an oracle for streams too large for `oracle` on the driver: (spark, events DataFrame, extent,
    # tiles) -> (digest, checks), computed on Spark with an algorithm of its own (None: none)
    scale_oracle: ClassVar[Callable | None] = None

    # Its workloads, as data that one dispatcher reads (harness/families/workload.py), so that no
    # family repeats the `workload.source` / `workload.protocol` dispatch:
    # - `generator(objects, term_df, extent, cfg, seed) -> Workload`: its own generator
    #   (datasets/workloads/<name>.py); None: SSTD's snapshot generator builds all its workloads;
    # - `check_generator(cfg)`: refuses settings its generator cannot use (ValueError);
    # - `snapshot_protocols`: the `workload.protocol` values SSTD's snapshot generator
    #   (datasets/workloads/snapshot.py) builds for it instead of its own generator;
    # - `check_file(cfg)`: its own checks of a `workload.source=file` workload, before the event
    #   file's (top-k: its window); the file itself is read by the generic reader with its code.
    # - `planner(objects, term_df, extent, cfg, seed) -> plan`: its generator's draws without the
    #   per-event columns, whose `chunks(rows)` write the same stream a chunk at a time, never
    #   whole in memory (issue 51; datasets/workloads/range.py RangePlan); None: built whole.
    generator: ClassVar[Callable | None] = None
    planner: ClassVar[Callable | None] = None
    check_generator: ClassVar[Callable | None] = None
    snapshot_protocols: ClassVar[tuple[str, ...]] = ()
    check_file: ClassVar[Callable | None] = None
    # Its formats, which the shared readers and writers ask every registered family for, so that
    # none of them names a family:
    # - `file_types`: its event-file query types by kind (INSERT, SNAPSHOT: datasets/workloads/
    #   file_types.py QueryType: label, needed columns, checks, what the reader derives); a family
    #   without any has no rows in an event file; `derive_file(events, warmup) -> (events, warmup,
    #   info)` and `finish_file(events, cfg) -> (events, info)`: the events a file's stream derives
    #   for it before and after normalisation (frequent_terms: a CTQ's reports; top-k: its window);
    # - `results`: its results in plain form (harness/families/result_rows.py ResultFormat: the
    #   digest keys of its rows, the columns it fills, its `python -m harness.export` file); the
    #   default: (query, object) pairs.
    file_types: ClassVar[dict] = {}
    derive_file: ClassVar[Callable | None] = None
    finish_file: ClassVar[Callable | None] = None
    results: ClassVar[ResultFormat] = pair_results()
    # Its own workload knobs: a dataclass whose fields only its generator reads; they join the flat
    # `workload.*` schema beside the shared knobs (datasets/workloads/config.py), harness/families/
    # workload.py: WorkloadConfig. None: its workloads read shared knobs alone.
    WorkloadKnobs: ClassVar[type | None] = None
    # shared knobs its generator reads that the others' do not: with its WorkloadKnobs' fields, the
    # knobs its workloads are keyed by. A workload's cache key (harness/run/workload_cache.py)
    # drops every knob some family declares unless the workload's own family declares it too.
    workload_fields: ClassVar[tuple[str, ...]] = ()

    # the settings of a tiny workload of this family over the shared tiny ones (150 queries, 300
    # updates), where those do not make one: what `check_family` and the kernels' warm-up run
    tiny_workload: ClassVar[dict] = {}

    # Its own figures of a run, which the report asks every registered family for
    # (harness/measure/summary.py), so that no figure of one family is computed in the report:
    # - `counters`: per-worker counters its index reports (WorkerOutput.counters) that the worker
    #   table sums over the measured epochs (harness/engine/monitor.py: worker_table);
    # - `metrics`: the registry entries (name, unit, meaning, direction, format) of the figures
    #   `summarise` returns (harness/report/metrics.py lists them with the shared ones);
    # - `snapshot_type`: SSTD's name of its snapshot queries (srq, skq, stq): the report gives their
    #   mean latency as `<snapshot_type>_latency_mean_ms`; None: no per-type figure.
    counters: ClassVar[tuple[str, ...]] = ()
    metrics: ClassVar[tuple[Metric, ...]] = ()
    snapshot_type: ClassVar[str | None] = None

    @classmethod
    def summarise(cls, workers, final_stats: list[dict]) -> dict[str, float]:
        """Its figures of a run (`metrics`), from the worker table (a pandas DataFrame, one row per
        worker: the measured epochs' counters summed, its `counters` among them) and each worker's
        statistics at the last measured epoch's end (`final_stats`). Every registered family is
        asked for every run, so its figures are in every run row (0 or NaN without its work).
        Default: none."""
        return {}

    @classmethod
    def workload_key(cls, key: dict) -> dict:
        """Its own trim of one of its workloads' cache key (`key`: the plain workload config, other
        families' knobs dropped): knobs this configuration leaves unused. Default: as it is."""
        return key

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            from harness.families import registry

            registry.register(cls)

    @classmethod
    def index_factory(cls, context: IndexContext, params: dict | None = None) -> Callable[[], WorkerIndex]:
        """A picklable zero-argument constructor of this family's worker index."""
        from functools import partial

        return partial(cls.index, context, **asdict(cls.make_params(params)))

    @classmethod
    def stream_context(cls, context: IndexContext, events: Events) -> IndexContext:
        """The context the family's workers run with, given the whole (normalised) stream on the
        driver: a family whose semantics depend on stream-wide facts (top-k: term weights) derives
        them here, so workers, merger and oracle agree. Default: the longest look-back of the
        family's snapshot queries, so that its workers keep objects when it has any."""
        look_back = snapshot_look_back(events, cls.code, f"workload ({cls.name})", context.extent, cls.needs_k)
        return replace(context, look_back=look_back) if look_back else context

    @classmethod
    def check_params(cls, params: Any) -> None:
        """Reject index settings that cannot run (ValueError naming the field, value and what is allowed)."""

    @classmethod
    def check_run(cls, cfg, job) -> None:
        """Refuse a job this family cannot run with, beyond its workload and index settings
        (`validate_workload`, `check_params`): a ValueError naming the field, the value and what is
        allowed. `cfg` is the whole composed config, `job` what it asks for, resolved once
        (harness/run/config.py Job: families, snapshots, source); called before Spark starts for
        every family the job's workload holds (harness/run/config.py walks the registry). Default:
        nothing to refuse."""

    @staticmethod
    @abstractmethod
    def oracle(stream: Events) -> np.ndarray:
        """Distinct final result keys of a whole stream, by brute force."""

    @classmethod
    def oracle_checks(cls, stream: Events) -> float:
        """About how many (object, query) pairs `oracle` examines on `stream`, which `oracle.max_checks`
        bounds on the driver. Default: every object against every query."""
        return float((stream.kind == OBJECT).sum()) * float(np.isin(stream.kind, (INSERT, SNAPSHOT)).sum())

    @classmethod
    def build_workload(cls, objects: pa.Table, term_df: np.ndarray, extent, cfg, seed: int):
        """The workload's event stream (datasets.workloads.Workload) over a prepared dataset, from the
        family's workload attributes (`generator`, `snapshot_protocols`, ...: harness/families/workload.py)."""
        from harness.families.workload import build_workload

        return build_workload(cls, objects, term_df, extent, cfg, seed)

    @classmethod
    def plan_workload(cls, objects: pa.Table, term_df: np.ndarray, extent, cfg, seed: int):
        """The workload's plan (`planner`) when its own generator makes it and has one, else None:
        the stream is then built whole (`build_workload`)."""
        from harness.families.workload import plan_workload

        return plan_workload(cls, objects, term_df, extent, cfg, seed)

    @classmethod
    def validate_workload(cls, cfg) -> None:
        """Reject workload settings this family's workloads cannot use (ValueError), from the same
        attributes."""
        from harness.families.workload import validate_workload

        validate_workload(cls, cfg)

    @classmethod
    def fit_view(cls, sample: Events, context: IndexContext) -> Events:
        """The warm-up sample as strategies fit on it. Default: as it is. A family whose routing
        columns at insertion say little about the steady state (a kNN subscription's rectangle is
        the whole space until its ball is known) may show the state the warm-up ends in; routing
        itself always uses the events' own columns."""
        return sample


def keyword_list_checks(stream: Events) -> float:
    """The (object, query) pairs a brute force reads when it walks, per query, the objects of its
    keywords' lists (kNN's and top-k's oracles): the sum over queries of their keywords' object
    counts. An upper bound: an object counts once per shared keyword and over the whole stream, not
    the query's life."""
    is_obj = stream.kind == OBJECT
    lens = np.diff(stream.offsets)
    df = np.bincount(stream.values[np.repeat(is_obj, lens)], minlength=int(stream.values.max(initial=0)) + 1)
    queries = np.isin(stream.kind, (INSERT, SNAPSHOT))
    return float(df[stream.values[np.repeat(queries, lens)]].sum())
