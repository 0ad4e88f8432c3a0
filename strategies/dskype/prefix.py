"""DSkype's prefix-based distribution (Sec. 7.3.4: Eq. 18, Definition 12, Lemma 7).

A top-k subscription s goes only to the workers owning a keyword of its loose prefix pref(s) =
s.psi[1:p] (Skype order: rarest first, here descending term id), p the smallest i with
wtsum(s.psi[i+1:]) < lambda_T = (theta - alpha) / (1 - alpha) (Eq. 18, SSim bounded by 1). A message
sharing no prefix keyword scores below theta: its common keywords lie in the suffix, so TSim <=
wtsum(suffix) < lambda_T and Score < alpha + (1 - alpha) lambda_T = theta. With theta <= the
subscription's k-th score all along, such a message never enters its top-k (Lemma 7), and every
message goes to the workers of all its terms, so the route stays exact.

theta comes from the workers (harness/families/topk/index.py, `thresholds`): at an epoch's end each
replica reports the k-th best score among the messages it holds that stay in the window through
the next epoch, a lower bound of the global k-th score throughout that epoch; the merger keeps the
largest (merge.py) and the router reads it here. Lazy reallocation (DSkype: "triggered only when
pref(s) needs to cover more keywords"; spec A25): the first threshold after a subscription's
registration may shrink its route, later ones only grow it (theta_route = min(theta_route,
theta)); a route that grows re-sends the subscription to its new workers at the next epoch's start
(`pending_resends`), and a worker the route left drops its replica. A subscription registered
during an epoch routes with theta = 0, that is to every keyword's worker, until its first threshold.

The term -> worker map is Algorithm 4 (dskype_keyword's bisection) with N(W) counted over loose
prefixes (Eq. 16 as DSkype's prefix method does): theta per sample subscription is its k-th score
at the end of the warm-up, found by running the sample through one top-k index. Decision: lambda_T
is lowered by 1e-9 before the prefix is cut, so a score computed a rounding error above its
bound cannot fall outside the route.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from datasets.workloads.events_file import measured_events
from harness.core.events import INSERT, OBJECT, TOPK, Events
from harness.core.params import RunRefused
from harness.families.topk.index import TopkIndex
from strategies.base import FitContext, Pairs, Router, Strategy
from strategies.dskype.keyword import ItemRanks, checked_sizes, runs_of
from strategies.load import sample_parts
from strategies.routers.termmap import PartitionedTermRouter
from strategies.routers import kernels as route_kernels

MARGIN = 1e-9


@njit(cache=True)
def prefix_terms(rows, offsets, values, alpha, theta, idf):
    """Per row, its loose prefix's terms (ascending ids) as CSR over the rows."""
    out_off = np.zeros(len(rows) + 1, np.int64)
    size = 0
    for r in range(len(rows)):
        size += offsets[rows[r] + 1] - offsets[rows[r]]
    out_val = np.empty(size, np.int32)
    total = 0
    for r in range(len(rows)):
        i = rows[r]
        lo, hi = offsets[i], offsets[i + 1]
        norm = 0.0
        for j in range(lo, hi):
            norm += idf[values[j]] * idf[values[j]]
        norm = np.sqrt(norm)
        a = alpha[r]
        lam = (theta[r] - a) / (1.0 - a) - MARGIN
        # Skype order is descending id: the suffix after the p rarest keywords is values[lo:hi - p]
        p = hi - lo
        if lam > 0.0 and norm > 0.0:
            suffix = 0.0
            for j in range(lo, hi):
                suffix += idf[values[j]] / norm
            p = 0
            while p < hi - lo and (p == 0 or suffix >= lam):  # the next rarest keyword joins the prefix
                suffix -= idf[values[hi - 1 - p]] / norm
                p += 1
        for j in range(hi - p, hi):
            out_val[total] = values[j]
            total += 1
        out_off[r + 1] = total
    return out_off, out_val[:total]


class Thresholds:
    """The routing threshold of each subscription, from the workers' feedback, with DSkype's lazy
    reallocation (module docstring). Mixed into a router whose `route_topk(ev, rows, table)` routes
    by `thresholds_of(qids, table)`; `table="previous"` routes as before the last feedback."""

    wants_thresholds = True

    def _init_thresholds(self) -> None:
        self.qid = np.zeros(0, np.int64)  # sorted: the subscriptions with a routing threshold
        self.theta = np.zeros(0)
        self.previous = np.zeros(0)  # their threshold before the last feedback (growth checks)
        self.pending = np.zeros(0, np.int64)

    def thresholds_of(self, qids: np.ndarray, table: str = "theta") -> np.ndarray:
        values = getattr(self, table)
        at = np.minimum(np.searchsorted(self.qid, qids), max(len(self.qid) - 1, 0))
        found = (self.qid[at] == qids) if len(self.qid) else np.zeros(len(qids), np.bool_)
        return np.where(found, values[at] if len(values) else 0.0, 0.0)

    def observe_feedback(self, family: str, table) -> None:
        """Each subscription's threshold: the first one it gets may shrink its route, later ones only
        grow it (lazy reallocation); those whose threshold fell are checked for new workers."""
        if family != "topk" or table is None or table.num_rows == 0:
            return
        q = table.column("qid").to_numpy().astype(np.int64)
        v = table.column("value").to_numpy().astype(np.float64)
        old = self.thresholds_of(q)
        known = np.isin(q, self.qid)
        new_theta = np.where(known, np.minimum(old, v), v)
        qid = np.r_[self.qid, q[~known]]
        theta = np.r_[self.theta, new_theta[~known]]
        order = np.argsort(qid, kind="stable")
        self.qid, self.theta = qid[order], theta[order]
        self.previous = self.theta.copy()
        at = np.searchsorted(self.qid, q[known])
        self.theta[at] = new_theta[known]
        self.previous[at] = old[known]
        self.pending = q[known][new_theta[known] < old[known]]

    def pending_resends(self) -> np.ndarray:
        out, self.pending = self.pending, np.zeros(0, np.int64)
        return out

    def routes_gained(self, ev: Events) -> np.ndarray:
        rows = np.arange(len(ev), dtype=np.int64)
        before = np.zeros((len(ev), self.n_workers), np.bool_)
        after = np.zeros_like(before)
        r, w = self.route_topk(ev, rows, "previous")
        before[r, w] = True
        r, w = self.route_topk(ev, rows)
        after[r, w] = True
        return (after & ~before).any(axis=1)

    def prefixes(self, ev: Events, rows: np.ndarray, table: str = "theta") -> tuple[np.ndarray, np.ndarray]:
        """The loose prefix of each of `rows` under its threshold, as CSR over the rows."""
        theta = self.thresholds_of(ev.id[rows], table)
        return prefix_terms(rows, ev.offsets, ev.values, ev.alpha[rows].astype(np.float64), theta, self.idf)


class PrefixRouter(Thresholds, PartitionedTermRouter):
    """Objects to the workers of all their terms (a top-k subscription is filled at registration
    from the window before it, so a message cannot wait for a subscription to route by its term:
    `object_terms="all"`, strategies/routers/termmap.py); a top-k subscription to those of its prefix."""

    def __init__(self, n_workers: int, term_worker: np.ndarray, idf: np.ndarray | None, info: dict):
        super().__init__(n_workers, term_worker, info, object_terms="all")
        self.idf = None if idf is None else np.ascontiguousarray(idf, np.float64)
        self._init_thresholds()

    def route_topk(self, ev: Events, rows: np.ndarray, table: str = "theta") -> Pairs:
        if self.idf is None or len(rows) == 0:
            return super().route_topk(ev, rows)
        rows = np.asarray(rows, np.int64)
        p_off, p_val = self.prefixes(ev, rows, table)
        r, w = route_kernels.route_term_sets(np.arange(len(rows), dtype=np.int64), p_off, p_val, self.term_worker,
                                             self.n_workers)
        return rows[r], w

    def describe(self) -> dict:
        return {**super().describe(), "thresholds": int(len(self.qid))}


# subscriptions per top-k index in `warmup_thresholds`: what one batch's buffers and change rows
# hold (at |W| = 100k about 14 KB per subscription: 1.4 GB a batch)
THRESHOLD_BATCH = 100_000


def warmup_thresholds(sample: Events, context, batch: int = THRESHOLD_BATCH) -> np.ndarray:
    """Each sample top-k subscription's k-th score at the end of the warm-up (0 with fewer than k),
    in the order of its insert rows: the sample through top-k indexes of at most `batch`
    subscriptions each, every one over all the sample's messages. A subscription's k-th score
    is that of the messages alone, whatever other subscriptions an index holds, so the batches
    give the thresholds one index over all subscriptions gives, while only one batch's buffers
    and change rows are held at a time (one index over 1M subscriptions at |W| = 100k passed 12
    GiB, issue 51)."""
    ins = np.flatnonzero((sample.kind == INSERT) & (sample.family == TOPK))
    if len(ins) == 0 or context is None:
        return np.zeros(len(ins))
    if batch < 1:
        raise ValueError(f"batch={batch!r} is invalid; allowed: an integer >= 1")
    ids = np.unique(sample.id[ins])
    span = (int(sample.seq[0]), int(sample.seq[-1]) + 1)  # every batch ends where the warm-up ends
    if len(ids) <= batch:
        return _thresholds(sample, context, ins, span)
    is_sub = (sample.family == TOPK) & (sample.kind != OBJECT)
    out = np.zeros(len(ins))
    for lo in range(0, len(ids), batch):
        chosen = ids[lo:lo + batch]
        part = sample.take(np.flatnonzero(~is_sub | np.isin(sample.id, chosen)))
        mine = np.isin(sample.id[ins], chosen)
        out[mine] = _thresholds(part, context, np.flatnonzero((part.kind == INSERT) & (part.family == TOPK)), span)
    return out


def _thresholds(sample: Events, context, ins: np.ndarray, span: tuple[int, int]) -> np.ndarray:
    """`warmup_thresholds` with one top-k index over `sample` (`ins`: its top-k insert rows) up to
    the end of `span` (the whole warm-up's: a batch's last event may come earlier, and the window
    at the end is the one after the warm-up's last event)."""
    index = TopkIndex(context)
    index.begin_epoch(*span)
    index.process(sample)
    kth = index.kth_scores()
    order = np.argsort(index.subs.id)
    if len(order) == 0:
        return np.zeros(len(ins))
    at = order[np.minimum(np.searchsorted(index.subs.id[order], sample.id[ins]), len(order) - 1)]
    return np.where(index.subs.id[at] == sample.id[ins], kth[at], 0.0)  # 0: deleted in the warm-up


class RoutesByThresholds:
    """A strategy whose router routes top-k subscriptions by the thresholds the workers report for
    the next epoch (Router.wants_thresholds): its jobs need epochs shorter than the top-k window."""

    @classmethod
    def check_run(cls, cfg, job) -> None:
        """A top-k job over a count window needs epochs shorter than the window: a threshold is
        the k-th score among messages that stay through the next epoch, and with an epoch of |W|
        messages or more none does (every threshold 0: the prefix is every keyword). An epoch of
        0 is the measured stream: the generator's measured messages, or an event file's events after
        its warm-up."""
        wl = cfg.workload
        if wl.family != "topk" or getattr(wl, "window_by", "count") != "count" or cfg.epochs.by != "count":
            return
        from_file = job.source == "file"
        measured = measured_events(wl) if from_file else int(wl.measured_messages)
        if (int(cfg.epochs.size) or measured) < int(wl.window):
            return
        field, value = (("epochs.size", int(cfg.epochs.size)) if cfg.epochs.size or from_file else
                        ("workload.measured_messages", wl.measured_messages))
        prune = f"epochs.size below {wl.window} (a quarter of it or less lets them prune)"
        raise RunRefused(f"{field}={value!r} is invalid; allowed: an epoch shorter than the top-k window "
                         f"(workload.window={wl.window} messages) for {cls.name}, which routes by thresholds that "
                         f"hold for a whole epoch: set {prune}",
                         skip=f"{field}={value!r}: an epoch of the top-k window (workload.window={wl.window} "
                              f"messages) or more, and it routes by thresholds that hold for a whole epoch; "
                              f"allowed: {prune}")


class DSkypePrefixStrategy(RoutesByThresholds, Strategy):
    name = "dskype_prefix"
    families = frozenset({"range", "topk"})

    @dataclass
    class Params:
        pass

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        n_workers, vocab = checked_sizes(self.name, n_workers, context)
        topk = context.family_contexts.get("topk")
        idf = None if topk is None else topk.term_weight
        objs_rows, subs_rows = sample_parts(sample)
        subs = ItemRanks.of(sample, subs_rows, vocab)
        view = sample_prefixes(sample, topk)
        if view is not None:  # N(W) over the loose prefixes the warm-up's thresholds give
            subs = ItemRanks.of(view, np.arange(len(view)), vocab)
        term_worker, info = runs_of(subs, ItemRanks.of(sample, objs_rows, vocab), vocab, n_workers)
        return PrefixRouter(n_workers, term_worker, idf, info)


def sample_prefixes(sample: Events, topk) -> Events | None:
    """The sample's top-k insert rows with their terms cut to the loose prefix that their k-th
    score at the end of the warm-up gives (None without top-k subscriptions or term weights)."""
    ins = np.flatnonzero((sample.kind == INSERT) & (sample.family == TOPK))
    if topk is None or topk.term_weight is None or len(ins) == 0:
        return None
    theta = warmup_thresholds(sample, topk)
    p_off, p_val = prefix_terms(ins, sample.offsets, sample.values, sample.alpha[ins].astype(np.float64), theta,
                                np.asarray(topk.term_weight, np.float64))
    return Events({"seq": sample.seq[ins], "kind": np.full(len(ins), INSERT, np.int8), "x": sample.x[ins],
                   "y": sample.y[ins]}, p_off, p_val)
