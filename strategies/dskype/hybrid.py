"""DSkype's hybrid distributions (Sec. 8.2, Figs. 25-26): l1 x l2 workers in two levels.

- `dskype_spatial_first`: level 1 is the location-based kd-tree (Algorithm 3, Eq. 15) with l1
  leaves; level 2 splits each leaf's l2 workers by the prefix-based keyword runs (Algorithm 4 with
  N(W) over loose prefixes, Eq. 18) fitted on that leaf's subscriptions. A top-k subscription goes
  to its leaf's workers owning a keyword of its loose prefix; a message to every leaf (location is
  broadcast) and there to the workers owning any of its terms.
- `dskype_keyword_first`: level 1 is the prefix-based runs with l1 groups; level 2 a location
  kd-tree with l2 leaves per group, fitted on the subscriptions whose prefix meets the group's
  terms. A subscription goes, in each group its prefix meets, to the leaf holding its point; a
  message to every worker of each group its terms meet.

Worker = group x l2 + member. Exact for the reasons each level is: within a level-1 part the
second level is a complete distribution of that part's subscriptions (Lemma 7 for the prefix
level, broadcast within the group for the location level), and a message reaches every part that
can hold a subscription it may enter. The thresholds, lazy reallocation and re-sends are the prefix
method's (`Thresholds`). Decisions (the paper only names the settings, spec A33): each second
level is fitted on its own part's sample (subscriptions and the messages that reach the part);
l1 defaults to the largest divisor of the worker count not above its square root, and must divide
it (the paper's settings are products: 1x32 ... 32x1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core import kernels
from harness.core.events import AND, Events, csr_take
from strategies.base import FitContext, Pairs, Router, Strategy
from strategies.dskype.keyword import ItemRanks, checked_sizes, runs_of
from strategies.dskype.location import DSkypeLocationStrategy
from strategies.dskype.prefix import RoutesByThresholds, Thresholds, sample_prefixes
from strategies.load import sample_parts
from strategies.routers import kernels as route_kernels


def default_l1(n_workers: int) -> int:
    return max(d for d in _divisors(n_workers) if d * d <= n_workers)


class HybridRouter(Thresholds, Router):
    """Routes by a level-1 rule and a per-part level-2 rule; `spatial_first` picks the order."""

    def __init__(self, n_workers: int, l1: int, spatial_first: bool, leaves, term_worker: np.ndarray, vocab: int,
                 idf: np.ndarray, info: dict):
        super().__init__(n_workers)
        self.l1, self.l2, self.spatial_first = int(l1), int(n_workers) // int(l1), bool(spatial_first)
        self.leaves = list(leaves)  # spatial-first: one location router; keyword-first: one per group
        # spatial-first: (l1, vocab) run per leaf, flattened as leaf * vocab + term -> worker;
        # keyword-first: (vocab,) term -> group
        self.term_worker = np.ascontiguousarray(term_worker, np.int64)
        self.vocab = int(vocab)
        self.idf = np.ascontiguousarray(idf, np.float64)
        self.info = info
        self._init_thresholds()

    def route_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        rows = np.asarray(rows, np.int64)
        if self.spatial_first:  # every leaf, and there the workers of the message's terms
            terms = ev.values.astype(np.int64)
            parts = [route_kernels.route_term_sets(rows, ev.offsets, terms + g * self.vocab, self.term_worker,
                                                   self.n_workers) for g in range(self.l1)]
            return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        r, g = route_kernels.route_term_sets(rows, ev.offsets, ev.values, self.term_worker, self.l1)
        return np.repeat(r, self.l2), (np.repeat(g, self.l2) * self.l2 + np.tile(np.arange(self.l2), len(r)))

    def route_topk(self, ev: Events, rows: np.ndarray, table: str = "theta") -> Pairs:
        rows = np.asarray(rows, np.int64)
        if len(rows) == 0:
            return rows, rows
        p_off, p_val = self.prefixes(ev, rows, table)
        local = np.arange(len(rows), dtype=np.int64)
        if self.spatial_first:
            leaf = self.leaves[0].leaf_of(ev.x[rows], ev.y[rows])
            keyed = p_val.astype(np.int64) + np.repeat(leaf, np.diff(p_off)) * self.vocab
            r, w = route_kernels.route_term_sets(local, p_off, keyed, self.term_worker, self.n_workers)
            return rows[r], w
        r, g = route_kernels.route_term_sets(local, p_off, p_val, self.term_worker, self.l1)
        return rows[r], self._at_leaves(g, ev.x[rows[r]], ev.y[rows[r]])

    def route_range(self, ev: Events, rows: np.ndarray) -> Pairs:
        """A range subscription (and kNN, routed like one) by its keywords as every term map routes
        it (AND: its least frequent keyword's worker; OR: those of all its keywords), in the part
        whose messages it needs: spatial-first the leaf of its point (each leaf gets every
        message), keyword-first the leaf of its point in each group it meets."""
        rows = np.asarray(rows, np.int64)
        if len(rows) == 0:
            return rows, rows
        x = np.where(np.isnan(ev.x[rows]), (ev.xmin[rows] + ev.xmax[rows]) / 2, ev.x[rows])  # no point: the centre
        y = np.where(np.isnan(ev.y[rows]), (ev.ymin[rows] + ev.ymax[rows]) / 2, ev.y[rows])
        off, val = csr_take(ev.offsets, ev.values, rows)
        val = val.astype(np.int64)
        is_and = ev.op[rows] == AND
        local = np.arange(len(rows), dtype=np.int64)
        last = kernels.last_terms(local[is_and], off, val)
        last = np.where(last < 0, self.vocab - 1, last)
        if self.spatial_first:
            leaf = self.leaves[0].leaf_of(x, y)
            keyed = val + np.repeat(leaf, np.diff(off)) * self.vocab
            r, w = route_kernels.route_term_sets(local[~is_and], off, keyed, self.term_worker, self.n_workers)
            w_and = self.term_worker[leaf[is_and] * self.vocab + last]
        else:
            r, g = route_kernels.route_term_sets(local[~is_and], off, val, self.term_worker, self.l1)
            w = self._at_leaves(g, x[r], y[r])
            w_and = self._at_leaves(self.term_worker[last], x[is_and], y[is_and])
        return np.concatenate([rows[is_and], rows[r]]), np.concatenate([w_and, w])

    def _at_leaves(self, group: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Keyword-first: the worker of each point's leaf in its group."""
        w = np.empty(len(group), np.int64)
        for g in np.unique(group):
            at = np.flatnonzero(group == g)
            w[at] = g * self.l2 + self.leaves[g].leaf_of(x[at], y[at])
        return w

    def describe(self) -> dict:
        return {**super().describe(), "l1": self.l1, "l2": self.l2, "thresholds": int(len(self.qid)), **self.info}


class _Hybrid(RoutesByThresholds, Strategy):
    families = frozenset({"range", "topk"})
    spatial_first = True

    @dataclass
    class Params:
        l1: int | None = None  # level-1 parts; l2 = workers / l1 (None: module docstring)

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        n_workers, vocab = checked_sizes(self.name, n_workers, context)
        l1 = default_l1(n_workers) if params.l1 is None else params.l1
        if not isinstance(l1, int) or l1 < 1 or n_workers % l1:
            raise ValueError(f"{self.name}: strategy.params.l1={params.l1!r} is invalid for {n_workers} workers; "
                             f"allowed: a divisor of the worker count ({', '.join(map(str, _divisors(n_workers)))})")
        topk = context.family_contexts.get("topk")
        # without top-k (a range or kNN workload) the thresholds stay 0: every keyword is the prefix
        idf = topk.term_weight if topk is not None and topk.term_weight is not None else np.ones(vocab)
        l2 = n_workers // l1
        objs, sub_rows = sample_parts(sample)
        # the sample's subscriptions, top-k ones with their loose prefix
        subs = sample_prefixes(sample, topk) if topk is not None else None
        if subs is None:
            subs = sample.take(sub_rows)
        location = DSkypeLocationStrategy()
        loc_params = location.make_params({})
        if self.spatial_first:
            leaves = location.fit(sample, l1, loc_params, context)
            sub_leaf = leaves.leaf_of(subs.x, subs.y)
            maps, infos = [], []
            all_objs = ItemRanks.of(sample, objs, vocab)
            for g in range(l1):
                part = np.flatnonzero(sub_leaf == g)
                tw, info = runs_of(ItemRanks.of(subs, part, vocab), all_objs, vocab, l2)
                maps.append(g * l2 + tw)
                infos.append(info["runs"])
            return HybridRouter(n_workers, l1, True, [leaves], np.concatenate(maps), vocab, idf,
                                {"runs": infos})
        group_of, info = runs_of(ItemRanks.of(subs, np.arange(len(subs)), vocab), ItemRanks.of(sample, objs, vocab),
                                 vocab, l1)
        sub_groups = _groups_met(subs, np.arange(len(subs)), group_of, l1)
        obj_groups = _groups_met(sample, objs, group_of, l1)
        leaves = []
        for g in range(l1):  # a kd-tree per group over its subscriptions and the messages it gets
            view = Events.concat([sample.take(objs[obj_groups[:, g]]), _as_inserts(subs, sub_groups[:, g])])
            leaves.append(location.fit(view, l2, loc_params, context))
        return HybridRouter(n_workers, l1, False, leaves, group_of, vocab, idf, {"runs": info["runs"]})


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _groups_met(ev: Events, rows: np.ndarray, term_group: np.ndarray, n_groups: int) -> np.ndarray:
    """(rows, groups) booleans: which groups each row's terms meet."""
    out = np.zeros((len(rows), n_groups), np.bool_)
    r, g = route_kernels.route_term_sets(np.asarray(rows, np.int64), ev.offsets, ev.values, term_group, n_groups)
    out[np.searchsorted(rows, r), g] = True
    return out


def _as_inserts(subs: Events, keep: np.ndarray) -> Events:
    """Sample subscriptions as full insert events (only their points matter to the kd-tree fit)."""
    rows = np.flatnonzero(keep)
    cols = {n: np.zeros(len(rows), c.dtype) for n, c in Events.empty().cols.items()}
    cols.update(kind=subs.kind[rows], seq=subs.seq[rows], x=subs.x[rows], y=subs.y[rows])
    return Events(cols, np.zeros(len(rows) + 1, np.int64), np.zeros(0, np.int32))


class DSkypeSpatialFirstStrategy(_Hybrid):
    name = "dskype_spatial_first"


class DSkypeKeywordFirstStrategy(_Hybrid):
    name = "dskype_keyword_first"
    spatial_first = False
