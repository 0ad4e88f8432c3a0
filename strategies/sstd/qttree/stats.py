"""The query distribution statistics J of SSTD's QT-tree (Section 4.1): a quadtree over the sample
built lazily. A cell holds the sample queries overlapping it (p = count / all queries of the
family), the objects inside it (E_obj), and the routing-keyword distribution M of its queries.

The region queries are SSTD's six types (`TYPES`): continuous range (CRQ), kNN (CKQ) and top-k
terms (CTQ) queries, and snapshot range (SRQ), kNN (SKQ) and top-k terms (STQ) ones; p_t of a
cell is the fraction of the sample's type-t queries whose region reaches it. A CKQ counts by the
rectangle around its ball (the fit view narrows it to its warm-up ball), which is SSTD's "d(q, P)
< d(q, q.R_k)"; an SKQ counts by the square around its k-th nearest qualifying sample object
(`QueryStats._narrow_skq_to_balls`; the stream gives it the whole space).
kNN queries have routing keywords only when routed by them (ckq_routing: ball); SSTD's own rule
sends them to every worker, and then they add nothing to M; top-k-terms queries have none.

Decisions (ADR-0019; J's six-type sample: ADR-0096):
- J is never materialised beyond the cells the tree visits; a J cell is the QT node's own region.
- E_{P,O} = mean query lifetime x objects per time unit; the lifetime of a sample query is its
  insert-to-delete time, or insert-to-end-of-sample if not deleted there.
- A snapshot type's |O| is the objects within its mean look-back (E_P x E[tau], spec 4.6), so
  its term has the continuous one's units: `time_share` is the mean lifetime or look-back over the
  sample's span. A CTQ's report events are not sample queries (its registration is).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core.events import (
    AND,
    DELETE,
    FAMILY_NAMES,
    INSERT,
    KNN,
    OBJECT,
    RANGE,
    SNAPSHOT,
    TERMS,
    Events,
    csr_take,
)

# SSTD's query types by (family, kind), in `QueryStats.qtype` order
TYPES = {(RANGE, INSERT): "crq", (KNN, INSERT): "ckq", (TERMS, INSERT): "ctq", (RANGE, SNAPSHOT): "srq",
         (KNN, SNAPSHOT): "skq", (TERMS, SNAPSHOT): "stq"}
TYPE_NAMES = tuple(TYPES.values())
KNN_TYPES = ("ckq", "skq")
SNAPSHOT_TYPES = ("srq", "skq", "stq")
from strategies.load import routing_terms


@dataclass
class StatsCell:
    """One cell of J: its region and the sample queries/objects it holds (positions, not rows)."""

    key: tuple[int, int, int]  # depth, ix, iy
    region: tuple[float, float, float, float]
    queries: np.ndarray  # range queries overlapping the cell
    objects: np.ndarray  # objects inside the cell (routing rule: x >= mid goes right)
    n_entries: int  # routing keywords of those queries: M's normaliser

    @property
    def mid(self) -> tuple[float, float]:
        x0, y0, x1, y1 = self.region
        return (x0 + x1) * 0.5, (y0 + y1) * 0.5


class QueryStats:
    """J over the fitting sample: a quadtree of query distribution statistics, built on demand.

    The root covers the extent and holds every sample query and object (even those outside it);
    a child keeps its parent's queries whose rectangle reaches its quadrant and objects whose point
    falls in it, by the same comparisons the router makes, so J cells and QT nodes agree exactly.
    """

    def __init__(self, sample: Events, extent, knn_by_keywords: bool = True):
        self.sample = sample
        self.knn_by_keywords = knn_by_keywords
        self.objs = np.flatnonzero(sample.kind == OBJECT)
        is_query = ((sample.kind == INSERT) | (sample.kind == SNAPSHOT)) & ~((sample.family == TERMS)
                                                                           & np.isfinite(sample.step)
                                                                           & (sample.kind == SNAPSHOT))
        other = np.setdiff1d(np.unique(sample.family[is_query]), [RANGE, KNN, TERMS])
        self.other_families = [FAMILY_NAMES.get(int(f), str(int(f))) for f in other]
        self.qs = np.flatnonzero(is_query & np.isin(sample.family, (RANGE, KNN, TERMS)))
        lut = np.full((max(f for f, _ in TYPES) + 1, max(k for _, k in TYPES) + 1), -1, np.int64)
        for i, (f, k) in enumerate(TYPES):
            lut[f, k] = i
        self.qtype = lut[sample.family[self.qs].astype(np.int64), sample.kind[self.qs].astype(np.int64)]
        self.type_counts = {t: int(c) for t, c in zip(TYPE_NAMES, np.bincount(self.qtype, minlength=len(TYPES))) if c}
        self.is_knn = np.isin(self.qtype, [TYPE_NAMES.index(t) for t in KNN_TYPES])
        # the queries routed by their keywords: range ones, and kNN ones under ckq_routing: ball
        self.keyworded = (~np.isin(self.qtype, [TYPE_NAMES.index("ctq"), TYPE_NAMES.index("stq")])
                          & (~self.is_knn | knn_by_keywords))
        self.ox = sample.x[self.objs].astype(np.float64)
        self.oy = sample.y[self.objs].astype(np.float64)
        self.o_off, self.o_val = csr_take(sample.offsets, sample.values, self.objs)
        self.rect = np.stack([sample.xmin[self.qs], sample.ymin[self.qs], sample.xmax[self.qs], sample.ymax[self.qs]], 1).astype(np.float64)
        self._narrow_skq_to_balls(sample)
        # Routing entries (query position, term): the least frequent keyword of an AND query, every
        # keyword of an OR query; sorted by query so a query's entries are contiguous.
        e_rows, e_terms = routing_terms(sample, self.qs[self.keyworded])
        # top-k-terms queries have no keywords: they reach every textual child
        keep = e_terms >= 0  # a query without keywords has no routing keyword (and matches nothing)
        e_rows, e_terms = e_rows[keep], e_terms[keep]
        e_q = np.searchsorted(self.qs, e_rows)
        order = np.argsort(e_q, kind="stable")
        self.e_q, self.e_t = e_q[order].astype(np.int64), e_terms[order].astype(np.int64)
        self.e_count = np.bincount(self.e_q, minlength=len(self.qs)).astype(np.int64)
        self.e_off = np.concatenate([[0], np.cumsum(self.e_count)]).astype(np.int64)
        self.n_queries = len(self.qs)
        self.time_share = {t: self._time_share(sample, self.qtype == i, t in SNAPSHOT_TYPES)
                           for i, t in enumerate(TYPE_NAMES)}
        self.pr_route_len = self._route_len_distribution()
        root = StatsCell((0, 0, 0), tuple(float(v) for v in extent), np.arange(self.n_queries), np.arange(len(self.objs)),
                         len(self.e_q))
        self.cells: dict[tuple[int, int, int], StatsCell] = {root.key: root}

    def _narrow_skq_to_balls(self, sample: Events) -> None:
        """p_skq of a cell is "the probability an SKQ accessing P", Pr(d(q, P) < d(q, q.R_k))
        (Sec. 4.1.1): an SKQ counts in the cells its k-th nearest answer's ball reaches. The
        stream gives an SKQ the whole space (no ball is known before it is answered), which put
        every SKQ in every cell: p_skq = 1 everywhere, so a spatial split never lowered W_skq and
        the tree split textually only (issue 40). Here each sample SKQ's rectangle becomes the
        square around its ball over the sample's objects it can see (inside its look-back, before
        it, with its keywords: all for AND, any for OR); one with fewer than k such objects keeps
        the whole space. Only the statistics change: routing stays SSTD's two-phase protocol."""
        skq = np.flatnonzero(self.qtype == TYPE_NAMES.index("skq"))
        if len(skq) == 0 or len(self.objs) == 0:
            return
        owner = np.repeat(np.arange(len(self.objs)), np.diff(self.o_off))
        order = np.argsort(self.o_val, kind="stable")
        p_terms, p_objs = self.o_val[order], owner[order]  # postings: objects per term, sorted
        o_ts = sample.ts[self.objs]
        for i in skq:
            row = self.qs[i]
            terms = np.unique(sample.values[sample.offsets[row]:sample.offsets[row + 1]])
            if len(terms) == 0:
                continue
            lists = [p_objs[np.searchsorted(p_terms, t):np.searchsorted(p_terms, t, side="right")] for t in terms]
            cand = lists[0]
            for other in lists[1:]:
                cand = np.intersect1d(cand, other) if sample.op[row] == AND else np.union1d(cand, other)
            t_q, tau = float(sample.ts[row]), float(sample.tau[row])
            seen = o_ts[cand] <= t_q
            if np.isfinite(tau):
                seen &= o_ts[cand] >= t_q - tau
            cand = cand[seen]
            k = max(int(sample.k[row]), 1)
            if len(cand) < k:
                continue
            d2 = (self.ox[cand] - float(sample.x[row])) ** 2 + (self.oy[cand] - float(sample.y[row])) ** 2
            r = float(np.sqrt(np.partition(d2, k - 1)[k - 1]))
            x, y = float(sample.x[row]), float(sample.y[row])
            self.rect[i] = (x - r, y - r, x + r, y + r)

    def _time_share(self, sample: Events, mine: np.ndarray, snapshot: bool) -> float:
        """Mean lifetime (continuous) or look-back (snapshot) / sample span of one type's queries
        (`mine` of qs): turns a sample object count into E_{P,O}, or into the objects a snapshot
        query looks back to."""
        qs = self.qs[mine]
        if len(sample) == 0 or len(qs) == 0:
            return 1.0
        t0, t1 = float(sample.ts.min()), float(sample.ts.max())
        if t1 <= t0:
            return 1.0
        if snapshot:
            tau = sample.tau[qs]
            tau = tau[np.isfinite(tau)]
            return float(np.minimum(tau, t1 - t0).mean() / (t1 - t0)) if len(tau) else 1.0
        family = int(sample.family[qs[0]])
        dels = np.flatnonzero((sample.kind == DELETE) & (sample.family == family))
        end = np.full(len(qs), t1)
        if len(dels):
            ids = sample.id[dels]
            order = np.argsort(ids, kind="stable")
            ids, dts = ids[order], sample.ts[dels][order]
            q_ids = sample.id[qs]
            pos = np.clip(np.searchsorted(ids, q_ids), 0, len(ids) - 1)
            hit = ids[pos] == q_ids
            end[hit] = dts[pos[hit]]
        life = np.maximum(end - sample.ts[qs], 0.0)
        return float(life.mean() / (t1 - t0))

    def _route_len_distribution(self) -> np.ndarray:
        """Pr(l), l = number of routing keywords of a keyword-routed query (1 for AND, |q.phi| for
        OR); global, like the paper's Pr(|q.phi| = l) (it does not say per cell)."""
        routed = self.keyworded
        if not routed.any():
            return np.array([0.0, 1.0])
        return np.bincount(self.e_count[routed]).astype(np.float64) / routed.sum()

    def cell(self, key: tuple[int, int, int]) -> StatsCell:
        if key not in self.cells:
            depth, ix, iy = key
            self.children((depth - 1, ix >> 1, iy >> 1))
        return self.cells[key]

    def children(self, key: tuple[int, int, int]) -> list[StatsCell]:
        """The four child cells in routing order: SW, SE, NW, NE (index = 2 * north + east)."""
        depth, ix, iy = key
        keys = [(depth + 1, 2 * ix + (c & 1), 2 * iy + (c >> 1)) for c in range(4)]
        if keys[0] not in self.cells:
            parent = self.cell(key)
            mx, my = parent.mid
            x0, y0, x1, y1 = parent.region
            q, o = parent.queries, parent.objects
            qx = (self.rect[q, 0] < mx, self.rect[q, 2] >= mx)
            qy = (self.rect[q, 1] < my, self.rect[q, 3] >= my)
            quad = (self.oy[o] >= my) * 2 + (self.ox[o] >= mx)
            xs, ys = ((x0, mx), (mx, x1)), ((y0, my), (my, y1))
            for c, k in enumerate(keys):
                qq = q[qx[c & 1] & qy[c >> 1]]
                region = (xs[c & 1][0], ys[c >> 1][0], xs[c & 1][1], ys[c >> 1][1])
                self.cells[k] = StatsCell(k, region, qq, o[quad == c], int(self.e_count[qq].sum()))
        return [self.cells[k] for k in keys]

    def keyword_distribution(self, key) -> tuple[np.ndarray, np.ndarray]:
        """M of a cell: (terms, probabilities) of the routing keywords of its queries."""
        c = self.cell(key)
        ent = _entries_of(c.queries, self.e_off)
        terms, counts = np.unique(self.e_t[ent], return_counts=True)
        return terms, counts / max(len(ent), 1)


def _entries_of(queries: np.ndarray, e_off: np.ndarray) -> np.ndarray:
    """Entry indices of a set of queries (their contiguous CSR ranges, concatenated)."""
    lengths = e_off[queries + 1] - e_off[queries]
    total = int(lengths.sum())
    starts = np.repeat(e_off[queries] - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return starts + np.arange(total, dtype=np.int64)
