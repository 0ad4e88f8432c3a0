"""Continuous kNN spatial-keyword subscriptions (DkM-SKS's subscriptions, SSTD's CKQ): the k
nearest objects to a point that hold one of its keywords (OR, DkM-SKS) or all of them (AND,
SSTD), among the objects that arrive while the subscription is live. The result is the stream of
entries "o entered A(s)", each a (query, object) pair at the object's arrival.

A kNN subscription routes like a range subscription whose rectangle encloses its ball: its event
carries that rectangle (the space's extent at insertion, when the ball is unbounded), so every
strategy that routes range routes kNN exactly with no edit (the merger's replay makes a replicated
subscription's results exact); a strategy with its own `route_knn` (the DkM-SKS methods, hash)
routes it natively.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from datasets.workloads.knn import build_knn_workload, validate_knn_workload

from harness.core.events import INSERT, KNN, OBJECT, SNAPSHOT, Events
from harness.families.base import Family, IndexContext, keyword_list_checks
from harness.families.knn import formats
from harness.families.knn.geometry import narrowed_to_balls
from harness.families.knn.index import KnnIndex
from harness.families.knn.merge import KnnMerger
from harness.families.knn.oracle import knn_oracle

# the shared knobs the kNN generator reads and the STS generator does not (datasets/workloads/config.py)
QUERY_SHAPE = ("protocol", "k_min", "k_max", "op", "tau_hours", "hour_s")


class KnnFamily(Family):
    name = "knn"
    code = KNN
    needs_k = True
    index = KnnIndex
    merger = KnnMerger
    routes_like = "range"

    @dataclass
    class Params:
        # the worker grid's resolution (DkM-SKS gives none): an integer, or auto (from the number
        # of live subscriptions at each build, see KnnIndex.auto_cells)
        cells_per_side: int | str = "auto"
        # shared: every strategy's workers use this grid; paper: each strategy's own paper index
        # (Strategy.paper_index; KOP's and SOP's inverted files are a one-cell grid)
        layout: str = "shared"
        # > 0: SOP's worker structure (subsets.py) with this many subsets per worker instead of the
        # grid; set by layout=paper for SOP (its theta = 20)
        subsets: int = 0
        # snapshot kNN queries (SSTD's SKQ): fanout (to every worker its rectangle reaches, the
        # whole space) or two_phase (SSTD Sec. 6.2: the worker of the query's point first, whose
        # local k-th distance r bounds the answer; then every worker the square of side 2r reaches)
        skq_protocol: str = "fanout"

    @dataclass
    class WorkloadKnobs:
        """The kNN generator's own knobs (datasets/workloads/knn.py): a time-stamped stream. It also
        reads queries (the initial |S|, the live set), updates (derives timestamps), keywords_min/max
        and the queries' shape (protocol, k_min/k_max, op, tau_hours, hour_s)."""

        init_objects: Optional[int] = None  # |O_init|, objects after the initial subscriptions; None = queries (DkM: 1M)
        timestamps: Optional[int] = None  # measured time-stamps; None = ceil(updates / (inserts_per_ts + deletes_per_ts))
        objects_per_ts: int = 100  # objects per time-stamp (DkM: 1,000)
        inserts_per_ts: int = 10  # dkm: subscription insertions per time-stamp (DkM: 100)
        deletes_per_ts: int = 10  # dkm: deletions per time-stamp, uniform over the live ones (DkM: 100)

    workload_fields = QUERY_SHAPE

    @classmethod
    def oracle_checks(cls, stream: Events) -> float:
        """The brute force reads, per subscription, the objects of its keywords' lists (oracle.py)."""
        return keyword_list_checks(stream)

    @classmethod
    def snapshot_rounds(cls, params: dict | None = None) -> int:
        return 2 if cls.make_params(params).skq_protocol == "two_phase" else 1

    @classmethod
    def check_params(cls, params) -> None:
        cps = params.cells_per_side
        if cps != "auto" and (not isinstance(cps, int) or isinstance(cps, bool) or cps < 1):
            raise ValueError(f"index.knn.cells_per_side={cps!r} is invalid; allowed: auto or an integer >= 1")
        if not isinstance(params.subsets, int) or isinstance(params.subsets, bool) or params.subsets < 0:
            raise ValueError(f"index.knn.subsets={params.subsets!r} is invalid; allowed: an integer >= 0 "
                             "(0: the grid)")
        if params.skq_protocol not in ("fanout", "two_phase"):
            raise ValueError(f"index.knn.skq_protocol={params.skq_protocol!r} is invalid; allowed: fanout, two_phase")
        if params.layout not in ("shared", "paper"):
            raise ValueError(f"index.knn.layout={params.layout!r} is invalid; allowed: shared, paper")

    oracle = staticmethod(knn_oracle)
    # the DkM-SKS / SSTD CKQ generator; SSTD's snapshot kNN queries (SKQ) with protocol skq or mix
    generator = staticmethod(build_knn_workload)
    check_generator = staticmethod(validate_knn_workload)
    snapshot_protocols = ("skq", "mix")
    snapshot_type = "skq"
    file_types = formats.FILE_TYPES
    results = formats.RESULTS

    @classmethod
    def stream_context(cls, context: IndexContext, events: Events) -> IndexContext:
        """The base class's checks and look-back, after one of its own: a snapshot kNN query's
        rectangle covers every object of the stream, since its answer may be any of them and routers
        send it where its rectangle reaches (the generator gives the dataset's extent)."""
        rows = np.flatnonzero((events.kind == SNAPSHOT) & (events.family == KNN))
        objs = events.kind == OBJECT
        if len(rows) == 0 or not objs.any():
            return super().stream_context(context, events)
        x0, y0, x1, y1 = (float(events.x[objs].min()), float(events.y[objs].min()), float(events.x[objs].max()),
                          float(events.y[objs].max()))
        short = rows[(events.xmin[rows] > x0) | (events.ymin[rows] > y0) | (events.xmax[rows] < x1)
                     | (events.ymax[rows] < y1)]
        if len(short):
            i = short[0]
            raise ValueError(f"workload (knn): snapshot query {int(events.id[i])} (seq {int(events.seq[i])}) has region="
                             f"{tuple(float(events.cols[c][i]) for c in ('xmin', 'ymin', 'xmax', 'ymax'))!r}; allowed: "
                             f"a rectangle covering every object, {(x0, y0, x1, y1)}")
        return super().stream_context(context, events)

    @classmethod
    def fit_view(cls, sample: Events, context: IndexContext) -> Events:
        """The sample with each kNN subscription's rectangle narrowed to its ball at the end of the
        warm-up (its k-th nearest qualifying object of the sample, found by running the sample
        through one index): what a space partitioner should balance, where the insertion's own
        rectangle (the whole space) would put every subscription everywhere. DkM-SKS fits the
        same way: "we partition S when O becomes sufficiently large" (Sec. 3)."""
        ins = np.flatnonzero((sample.kind == INSERT) & (sample.family == KNN))
        if len(ins) == 0:
            return sample
        index = KnnIndex(context)
        index.process(sample)
        r2 = index._radius2()
        slot = index._slots(sample.id[ins])
        ok = slot >= 0
        rows, r = ins[ok], np.sqrt(r2[slot[ok]])
        bounded = np.isfinite(r)
        return narrowed_to_balls(sample, rows[bounded], r[bounded])
