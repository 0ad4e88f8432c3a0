"""SSTD's QT-tree (Chen et al., PVLDB 2020, Section 4): a quadtree whose nodes split either
spatially (4 equal quadrants) or textually (4 children with the parent's MBR), whichever lowers
the cost model (Eq. 1-2) more; leaves are allocated to workers by Karmarkar-Karp.

Pieces, in the paper's order (Section 4.1):
- `QueryStats` is the query distribution statistics J, a quadtree over the sample built lazily:
  a cell holds the sample queries overlapping it (p = count / all queries of the family), the
  objects inside it (E_obj), and the routing-keyword distribution M of its queries.
- `CostModel` is Eq. 2, one term per query family (a dict of per-family functions). Each term is
  Pr(family) * p_family(cell) * F(H) * E: Eq. 1's form, with H the mass of M on the node's
  keywords. Only the continuous range term (CRQ) exists now; the other families raise.
- `QTTreeStrategy.fit` is Algorithm 1: a max-heap of nodes by cost; the heaviest node is split
  both ways and the cheaper children kept (ties go spatial, as in the paper's `<=`), until there
  are theta leaves; then `allocate.karmarkar_karp` maps leaves to workers.

Decisions (the paper is vague or its rule does not fit a stateless router; docs/decisions.md):
- Textual split = a static term -> child map fixed at fit (the paper assigns each *object* to the
  child of least cost increase, mutating per-router keyword lists while routing, and sends every
  query to all four textual children). Here the node's terms are assigned greedily, heaviest
  first, to the child of least Eq. 2 increase; an object goes to every child owning one of its
  (still live) terms, an AND query to the child of its least frequent keyword, an OR query to the
  children of all its keywords (PS2Stream's text routing). Every matching pair meets, and the
  router is plain data. Objects may be stored more than once; each child's E counts them.
- CRQ text factor: the paper's W_crq has none (CRQs reach every textual child). Under keyword
  routing a CRQ only reaches a child if a routing keyword is there, so W_crq gets Eq. 1's factor
  F(H) = sum_l Pr(l) (1 - (1 - H)^l), l = number of routing keywords (1 for AND), each drawn
  independently from the cell's M, as Eq. 1 assumes.
- E_{P,O} = mean query lifetime x objects per time unit; the lifetime of a sample query is its
  insert-to-delete time, or insert-to-end-of-sample if not deleted there.
- J is never materialised beyond the cells the tree visits; a J cell is the QT node's own region.
- The tree grows to at least max(theta, n_workers) leaves (splits add 3 leaves, so theta = 32
  stops at 34, as the notes say); leaf weights for Karmarkar-Karp are the leaves' Eq. 2 costs.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numba import njit

from harness.core.events import (
    AND,
    DELETE,
    FAMILY_NAMES,
    INSERT,
    OBJECT,
    RANGE,
    SNAPSHOT,
    Events,
    csr_take,
)
from strategies.base import FitContext, Pairs, Router, Strategy
from strategies.load import routing_terms
from harness.core.allocate import karmarkar_karp

LEAF, SPATIAL, TEXT = 0, 1, 2
LAZY_PAIRS = 1 << 24  # output buffers are sized for the worst case up to this many pairs, then grow
TRACKED = 62  # term positions tracked in a live-term bitmask; later positions are always live
ALL_LIVE = -1  # int64 with every bit set


# --- query distribution statistics J --------------------------------------------------------------


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

    def __init__(self, sample: Events, extent):
        self.sample = sample
        self.objs = np.flatnonzero(sample.kind == OBJECT)
        is_query = (sample.kind == INSERT) | (sample.kind == SNAPSHOT)
        fam = sample.family[is_query]
        self.family_counts = {FAMILY_NAMES.get(int(f), str(int(f))): int(c) for f, c in zip(*np.unique(fam, return_counts=True))}
        self.qs = np.flatnonzero((sample.kind == INSERT) & (sample.family == RANGE))
        self.ox = sample.x[self.objs].astype(np.float64)
        self.oy = sample.y[self.objs].astype(np.float64)
        self.o_off, self.o_val = csr_take(sample.offsets, sample.values, self.objs)
        self.rect = np.stack([sample.xmin[self.qs], sample.ymin[self.qs], sample.xmax[self.qs], sample.ymax[self.qs]], 1).astype(np.float64)
        # Routing entries (query position, term): the least frequent keyword of an AND query, every
        # keyword of an OR query; sorted by query so a query's entries are contiguous.
        e_rows, e_terms = routing_terms(sample, self.qs)
        keep = e_terms >= 0  # a query without keywords has no routing keyword (and matches nothing)
        e_rows, e_terms = e_rows[keep], e_terms[keep]
        e_q = np.searchsorted(self.qs, e_rows)
        order = np.argsort(e_q, kind="stable")
        self.e_q, self.e_t = e_q[order].astype(np.int64), e_terms[order].astype(np.int64)
        self.e_count = np.bincount(self.e_q, minlength=len(self.qs)).astype(np.int64)
        self.e_off = np.concatenate([[0], np.cumsum(self.e_count)]).astype(np.int64)
        self.n_queries = len(self.qs)
        self.lifetime_rate = self._lifetime_rate(sample)
        self.pr_route_len = self._route_len_distribution()
        root = StatsCell((0, 0, 0), tuple(float(v) for v in extent), np.arange(self.n_queries), np.arange(len(self.objs)),
                         len(self.e_q))
        self.cells: dict[tuple[int, int, int], StatsCell] = {root.key: root}

    def _lifetime_rate(self, sample: Events) -> float:
        """mean lifetime / sample span: turns a sample object count into E_{P,O} (Eq. for CRQ)."""
        if len(sample) == 0 or self.n_queries == 0:
            return 1.0
        t0, t1 = float(sample.ts.min()), float(sample.ts.max())
        if t1 <= t0:
            return 1.0
        dels = np.flatnonzero((sample.kind == DELETE) & (sample.family == RANGE))
        end = np.full(self.n_queries, t1)
        if len(dels):
            ids = sample.id[dels]
            order = np.argsort(ids, kind="stable")
            ids, dts = ids[order], sample.ts[dels][order]
            q_ids = sample.id[self.qs]
            pos = np.clip(np.searchsorted(ids, q_ids), 0, len(ids) - 1)
            hit = ids[pos] == q_ids
            end[hit] = dts[pos[hit]]
        life = np.maximum(end - sample.ts[self.qs], 0.0)
        return float(life.mean() / (t1 - t0))

    def _route_len_distribution(self) -> np.ndarray:
        """Pr(l), l = number of routing keywords of a range query (1 for AND, |q.phi| for OR);
        global, like the paper's Pr(|q.phi| = l) (it does not say per cell)."""
        if self.n_queries == 0:
            return np.array([0.0, 1.0])
        return np.bincount(self.e_count).astype(np.float64) / self.n_queries

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


# --- the cost model (Eq. 1-2), one term per query family ------------------------------------------


def _range_term(stats: QueryStats, cell: StatsCell) -> np.ndarray:
    """CRQ: W_crq = p_crq(cell) * F(H) * E_{P,O}, returned as the coefficients of
    p_crq * (E_{P,O} / |O_P|) * F(H), a polynomial in H (the caller multiplies by |O_P|).

    F(H) = sum_l Pr(l) * (1 - (1 - H)^l): the probability that one of the query's l routing
    keywords, each drawn from the cell's M, is among the node's keywords (Eq. 1's assumption).
    """
    p_crq = len(cell.queries) / max(stats.n_queries, 1)
    return text_factor_poly(stats.pr_route_len) * p_crq * stats.lifetime_rate


def text_factor_poly(pr_l: np.ndarray) -> np.ndarray:
    """Coefficients (ascending powers of H) of F(H) = sum_l Pr(l) (1 - (1 - H)^l), Eq. 1's text
    factor under keyword routing (also FG's textual split, strategies/sstd_balance.py)."""
    coef = np.zeros(len(pr_l))
    for l_, p in enumerate(pr_l):
        for j in range(1, l_ + 1):
            coef[j] += p * (-1) ** (j + 1) * math.comb(l_, j)
    return coef


def _not_yet(family: str, sstd_types: str) -> Callable[[QueryStats, StatsCell], np.ndarray]:
    def term(stats, cell):
        raise NotImplementedError(
            f"QT-tree cost model: the {family!r} family (SSTD's {sstd_types}) is not implemented yet; "
            "implemented families: ['range']"
        )
    return term


FAMILY_TERMS: dict[str, Callable[[QueryStats, StatsCell], np.ndarray]] = {
    "range": _range_term,
    "knn": _not_yet("knn", "CKQ/SKQ"),
    "topk": _not_yet("topk", "top-k subscriptions; CTQ/STQ are top-k frequent terms"),
    "snapshot": _not_yet("snapshot", "SRQ/SKQ/STQ"),
}


class CostModel:
    """Eq. 2: W(P) = sum over families f of Pr(f) * W_f(P).

    Every term has the shape K_f(cell) * F_f(H) * |O_P|, so a node's cost is |O_P| times one
    polynomial in H per cell (`poly`), which is what the greedy textual split evaluates. (A later
    family with its own keyword distribution, e.g. SRQ's M_srq, would need its own H.)
    """

    def __init__(self, stats: QueryStats):
        self.stats = stats
        total = sum(stats.family_counts.values())
        self.pr = {f: c / total for f, c in stats.family_counts.items()} if total else {"range": 1.0}
        for f in self.pr:
            if f not in FAMILY_TERMS:
                raise NotImplementedError(f"QT-tree cost model: unknown query family {f!r}")
        self._poly: dict[tuple[int, int, int], np.ndarray] = {}

    def poly(self, cell: StatsCell) -> np.ndarray:
        if cell.key not in self._poly:
            coef = np.zeros(1)
            for f, pr in self.pr.items():
                c = FAMILY_TERMS[f](self.stats, cell) * pr
                coef = np.pad(coef, (0, max(0, len(c) - len(coef)))) + np.pad(c, (0, max(0, len(coef) - len(c))))
            self._poly[cell.key] = coef
        return self._poly[cell.key]

    def cost(self, cell: StatsCell, n_objects: int, n_entries: int, constrained: bool) -> float:
        """W of a node in `cell` holding n_objects objects and n_entries of the cell's routing
        keywords (H = 1 for a node without textual ancestors)."""
        h = 1.0 if not constrained else (n_entries / cell.n_entries if cell.n_entries else 0.0)
        return float(n_objects * _polyval(self.poly(cell), h))


@njit(cache=True)
def _polyval(coef, h):
    v = 0.0
    for j in range(len(coef) - 1, -1, -1):
        v = v * h + coef[j]
    return v


# --- build kernels --------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _fallback_child(w, node):
    """Child of a term the node's sample never saw: a hash of (term, node), spread evenly."""
    h = ((w * 2654435761) ^ (node * 40503)) & 0xFFFFFFFF
    return (h >> 30) & 3


@njit(cache=True)
def _live_pairs(objs, masks, o_off, o_val):
    """(term, local object) of every live term of the node's objects."""
    n = 0
    for i in range(len(objs)):
        o = objs[i]
        for j in range(o_off[o], o_off[o + 1]):
            p = j - o_off[o]
            if p >= TRACKED or (masks[i] >> p) & 1:
                n += 1
    terms = np.empty(n, np.int64)
    local = np.empty(n, np.int64)
    n = 0
    for i in range(len(objs)):
        o = objs[i]
        for j in range(o_off[o], o_off[o + 1]):
            p = j - o_off[o]
            if p >= TRACKED or (masks[i] >> p) & 1:
                terms[n] = o_val[j]
                local[n] = i
                n += 1
    return terms, local


@njit(cache=True)
def _greedy_terms(order, post_off, post_obj, m, n_obj, coef):
    """Assign terms (in `order`) one at a time to the child of least cost increase
    |O_c'| F(H_c + m_w) - |O_c| F(H_c), |O_c'| counting the term's objects new to child c."""
    bits = np.zeros(n_obj, np.int64)
    e = np.zeros(4)
    h = np.zeros(4)
    child = np.zeros(len(m), np.int64)
    new = np.zeros(4)
    for t in order:
        new[:] = 0.0
        for p in range(post_off[t], post_off[t + 1]):
            b = bits[post_obj[p]]
            for c in range(4):
                if not (b >> c) & 1:
                    new[c] += 1.0
        best = 0
        best_d = np.inf
        for c in range(4):
            d = (e[c] + new[c]) * _polyval(coef, h[c] + m[t]) - e[c] * _polyval(coef, h[c])
            if d < best_d:
                best_d = d
                best = c
        child[t] = best
        e[best] += new[best]
        h[best] += m[t]
        for p in range(post_off[t], post_off[t + 1]):
            bits[post_obj[p]] |= 1 << best
    return child


def term_children(terms, local, e_terms, n_obj: int, n_cell_entries: int, coef) -> tuple[np.ndarray, np.ndarray]:
    """The textual split's term -> child assignment (Section 4.1.2, term-level greedy): `terms`,
    `local` are the (live term, local object) pairs of the node's objects, `e_terms` the terms
    of its routing entries, `n_cell_entries` M's normaliser, `coef` the cell's Eq. 2 polynomial
    in H. Returns (terms, child) with the terms sorted. Shared by the build and FG's split."""
    terms = np.asarray(terms, np.int64)
    e_terms = np.asarray(e_terms, np.int64)
    uniq = np.unique(np.concatenate([terms, e_terms]))
    ti = np.searchsorted(uniq, terms)
    order_p = np.argsort(ti, kind="stable")
    post_obj = np.asarray(local, np.int64)[order_p]
    n_post = np.bincount(ti, minlength=len(uniq))
    post_off = np.concatenate([[0], np.cumsum(n_post)]).astype(np.int64)
    m = np.bincount(np.searchsorted(uniq, e_terms), minlength=len(uniq)) / max(n_cell_entries, 1)
    coef = np.asarray(coef, np.float64)
    weight = n_post * np.polyval(coef[::-1], m)
    order = np.lexsort((uniq, -m, -n_post, -weight))  # heaviest terms first, then by id
    child = _greedy_terms(order.astype(np.int64), post_off, post_obj, m.astype(np.float64), int(n_obj), coef)
    return uniq, child


@njit(cache=True)
def _child_masks(objs, masks, o_off, o_val, term_map, node):
    """Live-term masks of the node's objects in each textual child, and which children they reach."""
    n = len(objs)
    out = np.zeros((4, n), np.int64)
    reach = np.zeros((4, n), np.bool_)
    for i in range(n):
        o = objs[i]
        lo, hi = o_off[o], o_off[o + 1]
        if hi == lo:
            reach[0, i] = True  # a term-less object is stored once, in the first child
            out[0, i] = masks[i]
            continue
        for j in range(lo, hi):
            p = j - lo
            if p >= TRACKED or (masks[i] >> p) & 1:
                w = o_val[j]
                c = term_map[w] if w < len(term_map) else _fallback_child(w, node)
                reach[c, i] = True
                if p < TRACKED:
                    out[c, i] |= 1 << p
    return out, reach


# --- routing kernels ------------------------------------------------------------------------------
# A row walks the flattened tree depth-first, continuing into its first child and stacking the
# others. Spatial node: every quadrant the rectangle reaches (a point reaches one: < mid goes
# left/below). Textual node: a term follows one path through consecutive textual nodes (it stays
# live only in the child owning it), so each maximal run of textual nodes is compiled at fit into
# one term -> exit table (`exit_table`, exits are the first non-textual nodes); a row jumps to the
# exits of its live terms, and each exit inherits the live terms that reached it. AND queries have
# one live term, their last (least frequent) one; a row without terms takes the first children.
# Kernels fill caller-owned buffers and stop before a row could overflow them (no reallocation,
# hence no reference counting, inside the loop); the wrapper sizes the buffer for n_workers pairs
# per row (pages never written cost nothing), so it resumes only past LAZY_PAIRS.


@njit(cache=True)
def _route_kernel(rows, begin, points, xmin, ymin, xmax, ymax, offsets, values, last_only, kind, first_child, mid_x,
                  mid_y, exit_off, exit_len, exit_table, empty_exit, leaf_run, exit_worker, node_leaf, leaf_worker, n_workers,
                  out_r, out_w, total):
    """Rows from `begin` on, into out_r/out_w from `total` on; returns (next row, new end).
    `points`: the rows are objects (xmin, ymin is the point; xmax, ymax are not read)."""
    n_nodes = len(kind)
    stamp = np.full(n_workers, -1, np.int64)
    st_node = np.empty(4 * n_nodes + 4, np.int64)
    st_mask = np.empty(4 * n_nodes + 4, np.int64)
    acc = np.zeros(n_nodes, np.int64)
    seen = np.full(n_nodes, -1, np.int64)
    touched = np.empty(n_nodes, np.int64)
    token = 0
    cap = len(out_r)
    for i in range(begin, len(rows)):
        if total + n_workers >= cap:  # a row writes at most n_workers pairs plus one discarded write
            return i, total
        r = rows[i]
        x0 = xmin[r]
        y0 = ymin[r]
        x1 = x0 if points else xmax[r]
        y1 = y0 if points else ymax[r]
        node = 0
        mask = np.int64(ALL_LIVE)
        top = 0
        while True:
            k = kind[node]
            if k == SPATIAL:
                mx = mid_x[node]
                my = mid_y[node]
                fc = first_child[node]
                if points:  # one quadrant
                    node = fc + (1 if x0 >= mx else 0) + (2 if y0 >= my else 0)
                    continue
                nxt = -1
                for c in range(4):
                    ok_x = x1 >= mx if (c & 1) else x0 < mx
                    ok_y = y1 >= my if (c >> 1) else y0 < my
                    if ok_x and ok_y:
                        if nxt < 0:
                            nxt = fc + c
                        else:
                            st_node[top] = fc + c
                            st_mask[top] = mask
                            top += 1
                node = nxt
            elif k == LEAF:
                w = leaf_worker[node_leaf[node]]
                out_r[total] = r  # branch-free duplicate stamp (see the all-leaf run below)
                out_w[total] = w
                total += stamp[w] != i
                stamp[w] = i
                if top == 0:
                    break
                top -= 1
                node = st_node[top]
                mask = st_mask[top]
            else:  # the head of a textual run: jump to the exits of the live terms
                lo = offsets[r]
                hi = offsets[r + 1]
                start = hi - 1 if (last_only[i] and hi > lo) else lo
                if leaf_run[node] and hi > lo:  # every exit is a leaf: emit workers directly
                    off = exit_off[node]
                    length = exit_len[node]
                    for j in range(start, hi):
                        p = j - lo
                        if p < TRACKED and not (mask >> p) & 1:
                            continue
                        t = values[j]
                        if t < length:
                            w = np.int64(exit_worker[off + t])
                        else:
                            e = node
                            while kind[e] == TEXT:
                                e = first_child[e] + _fallback_child(t, e)
                            w = leaf_worker[node_leaf[e]]
                        # branch-free duplicate stamp: always write, advance only for a new worker
                        # (the data-dependent branch measured slower here, ~5 distinct of 7.5 terms)
                        out_r[total] = r
                        out_w[total] = w
                        total += stamp[w] != i
                        stamp[w] = i
                    if top == 0:
                        break
                    top -= 1
                    node = st_node[top]
                    mask = st_mask[top]
                    continue
                token += 1
                n_t = 0
                for j in range(start, hi):
                    p = j - lo
                    if p < TRACKED and not (mask >> p) & 1:
                        continue
                    w = values[j]
                    if w < exit_len[node]:
                        e = np.int64(exit_table[exit_off[node] + w])
                    else:  # past the table: every textual node on the path uses the fallback hash
                        e = node
                        while kind[e] == TEXT:
                            e = first_child[e] + _fallback_child(w, e)
                    if seen[e] != token:
                        seen[e] = token
                        acc[e] = 0
                        touched[n_t] = e
                        n_t += 1
                    if p < TRACKED:
                        acc[e] |= np.int64(1) << p
                if n_t == 0:  # no terms (or, impossibly, no live one): the first children
                    node = empty_exit[node]
                    continue
                for t in range(1, n_t):
                    st_node[top] = touched[t]
                    st_mask[top] = acc[touched[t]]
                    top += 1
                node = touched[0]
                mask = acc[node]
    return len(rows), total


@njit(cache=True)
def _route_points_spatial(rows, x, y, kind, first_child, mid_x, mid_y, node_leaf, leaf_worker):
    """Objects down a tree without textual nodes: one leaf each (the common, fast case)."""
    out = np.empty(len(rows), np.int64)
    for i in range(len(rows)):
        r = rows[i]
        px = x[r]
        py = y[r]
        node = 0
        while kind[node] == SPATIAL:
            node = first_child[node] + (1 if px >= mid_x[node] else 0) + (2 if py >= mid_y[node] else 0)
        out[i] = leaf_worker[node_leaf[node]]
    return out


def _compile_text_runs(kind, first_child, map_off, map_len, term_child):
    """Per textual node that starts a run (its parent is not textual): the exit of every term id
    below the run's longest map, and the exit of a term-less row (first children)."""
    n = len(kind)
    parent_text = np.zeros(n, bool)
    for v in np.flatnonzero(kind == TEXT):
        parent_text[first_child[v]:first_child[v] + 4] = True
    exit_len = np.zeros(n, np.int64)
    tables = []
    empty_exit = np.arange(n, dtype=np.int64)
    leaf_run = np.zeros(n, np.bool_)
    for v in np.flatnonzero((kind == TEXT) & ~parent_text):
        run = [v]
        for u in run:  # grows while iterating: the run's textual nodes
            run.extend(c for c in range(first_child[u], first_child[u] + 4) if kind[c] == TEXT)
        length = int(max(map_len[u] for u in run))
        leaf_run[v] = all(kind[c] == LEAF for u in run for c in range(first_child[u], first_child[u] + 4)
                          if kind[c] != TEXT)
        w = np.arange(length, dtype=np.int64)
        cur = np.full(length, v, np.int64)
        while True:
            t = kind[cur] == TEXT
            if not t.any():
                break
            cu, wu = cur[t], w[t]
            inside = wu < map_len[cu]
            ch = ((((wu * 2654435761) ^ (cu * 40503)) & 0xFFFFFFFF) >> 30).astype(np.int64)
            ch[inside] = term_child[map_off[cu[inside]] + wu[inside]]
            cur[t] = first_child[cu] + ch
        exit_len[v] = length
        tables.append((v, cur))
        e = v
        while kind[e] == TEXT:
            e = first_child[e]
        empty_exit[v] = e
    exit_off = np.zeros(n, np.int64)
    flat = []
    pos = 0
    for v, cur in tables:
        exit_off[v] = pos
        flat.append(cur.astype(np.int32))
        pos += len(cur)
    exit_table = np.concatenate(flat) if flat else np.zeros(0, np.int32)
    return exit_off, exit_len, exit_table, empty_exit, leaf_run


class QTTreeRouter(Router):
    """The flattened QT-tree: per node its kind, first child (children are contiguous), split
    midpoints (spatial) or, at the head of a run of textual nodes, its term -> exit table, and
    leaf -> worker (`leaf_worker`, the movable unit map an adjuster rewrites)."""

    families = frozenset({"range"})

    def __init__(self, n_workers, kind, first_child, mid_x, mid_y, exit_off, exit_len, exit_table, empty_exit,
                 leaf_run, node_leaf, leaf_worker, regions, leaf_cost):
        super().__init__(n_workers)
        self.kind = np.asarray(kind, np.int8)
        self.first_child = np.asarray(first_child, np.int64)
        self.mid_x = np.asarray(mid_x, np.float64)
        self.mid_y = np.asarray(mid_y, np.float64)
        self.exit_off = np.asarray(exit_off, np.int64)
        self.exit_len = np.asarray(exit_len, np.int64)
        self.exit_table = np.asarray(exit_table, np.int32)
        self.empty_exit = np.asarray(empty_exit, np.int64)
        self.leaf_run = np.asarray(leaf_run, np.bool_)  # run heads whose exits are all leaves
        self.node_leaf = np.asarray(node_leaf, np.int64)
        self.leaf_worker = np.asarray(leaf_worker, np.int64)
        self.regions = np.asarray(regions, np.float64).reshape(-1, 4)  # per node (for plots)
        self.leaf_cost = np.asarray(leaf_cost, np.float64)
        self.has_text = bool((self.kind == TEXT).any())
        # Derived from leaf_worker (recomputed when leaves move): the worker of each exit-table
        # entry whose exit is a leaf, so all-leaf runs route like a term -> worker map.
        exits = self.exit_table.astype(np.int64)
        self.exit_worker = np.where(self.kind[exits] == LEAF, self.leaf_worker[self.node_leaf[exits]], -1).astype(np.int32)

    def _route(self, ev: Events, objs: np.ndarray, qs: np.ndarray) -> Pairs:
        """Pairs of objects `objs` and range queries `qs`, written into one output: sized for every
        row reaching n_workers (the worst case; pages never written cost nothing, so no guess of
        the pairs per row, no resumption and no concatenation), grown only past LAZY_PAIRS."""
        objs = np.asarray(objs, np.int64)
        qs = np.asarray(qs, np.int64)
        cap = min((len(objs) + len(qs)) * self.n_workers, LAZY_PAIRS) + self.n_workers + 1
        out_r, out_w = np.empty(cap, np.int64), np.empty(cap, np.int64)
        total = 0
        jobs = ((objs, True, ev.x, ev.y, ev.x, ev.y, np.zeros(len(objs), np.bool_)),
                (qs, False, ev.xmin, ev.ymin, ev.xmax, ev.ymax, ev.op[qs] == AND))
        for rows, points, xmin, ymin, xmax, ymax, last_only in jobs:
            begin = 0
            while begin < len(rows):
                begin, total = _route_kernel(
                    rows, begin, points, xmin, ymin, xmax, ymax, ev.offsets, ev.values, last_only, self.kind,
                    self.first_child, self.mid_x, self.mid_y, self.exit_off, self.exit_len, self.exit_table,
                    self.empty_exit, self.leaf_run, self.exit_worker, self.node_leaf, self.leaf_worker, self.n_workers,
                    out_r, out_w, total)
                if begin < len(rows):  # out of room: double the buffer
                    out_r, out_w = (np.concatenate([a[:total], np.empty(len(a), np.int64)]) for a in (out_r, out_w))
        return out_r[:total], out_w[:total]

    def route(self, ev: Events) -> Pairs:
        if not self.has_text:  # objects reach one leaf each: the spatial kernel, then the queries
            return super().route(ev)
        return self._route(ev, *self.objects_and_queries(ev))

    def route_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        if not self.has_text:
            rows = np.asarray(rows, np.int64)
            return rows, _route_points_spatial(rows, ev.x, ev.y, self.kind, self.first_child, self.mid_x, self.mid_y,
                                               self.node_leaf, self.leaf_worker)
        return self._route(ev, rows, np.zeros(0, np.int64))

    def route_range(self, ev: Events, rows: np.ndarray) -> Pairs:
        return self._route(ev, np.zeros(0, np.int64), rows)

    def with_assignment(self, leaf_worker: np.ndarray) -> QTTreeRouter:
        """The same tree with leaves moved to other workers (for load adjustment)."""
        return QTTreeRouter(self.n_workers, self.kind, self.first_child, self.mid_x, self.mid_y, self.exit_off,
                            self.exit_len, self.exit_table, self.empty_exit, self.leaf_run, self.node_leaf, leaf_worker,
                            self.regions, self.leaf_cost)

    # -- migration units: the leaves (SSTD Section 5 moves leaves; strategies/sstd_balance.py) --------

    @property
    def n_leaves(self) -> int:
        return len(self.leaf_worker)

    def _by_leaf(self) -> QTTreeRouter:
        """This tree with one 'worker' per leaf: the routing kernel then emits leaf ids, so units
        and routing cannot disagree (cached; dropped when pickled)."""
        r = self.__dict__.get("_leaf_router")
        if r is None:
            r = QTTreeRouter(self.n_leaves, self.kind, self.first_child, self.mid_x, self.mid_y, self.exit_off,
                             self.exit_len, self.exit_table, self.empty_exit, self.leaf_run, self.node_leaf,
                             np.arange(self.n_leaves), self.regions, self.leaf_cost)
            self.__dict__["_leaf_router"] = r
        return r

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_leaf_router"}

    def units(self, ev: Events, rows: np.ndarray) -> Pairs:
        """(row, leaf) pairs: the leaves each event reaches (objects: one per live-term exit)."""
        rows = np.asarray(rows, np.int64)
        by_leaf = self._by_leaf()
        is_obj = ev.kind[rows] == OBJECT
        ro, lo = by_leaf.route_objects(ev, rows[is_obj])
        rq, lq = by_leaf.route_queries(ev, rows[~is_obj])
        return np.concatenate([ro, rq]), np.concatenate([lo, lq])

    def unit_owner(self) -> np.ndarray:
        return self.leaf_worker.copy()

    def with_unit_owner(self, owner: np.ndarray) -> QTTreeRouter:
        owner = np.asarray(owner, np.int64)
        if owner.shape != self.leaf_worker.shape:
            raise ValueError(f"with_unit_owner: {len(owner)} owners for {self.n_leaves} leaves")
        return self.with_assignment(owner)

    def parents(self) -> np.ndarray:
        """Parent of each node (-1 for the root and for nodes no internal node points to)."""
        parent = np.full(len(self.kind), -1, np.int64)
        for v in np.flatnonzero(self.kind != LEAF):
            parent[self.first_child[v]:self.first_child[v] + 4] = v
        return parent

    def term_maps(self, length: int = 0) -> dict[int, np.ndarray]:
        """Per textual node, a term -> child map (int8) over ids [0, max(length, its run's table
        length)) that routes exactly as the compiled exit tables do: the child on each tabled
        term's path, the fallback hash of (term, this node id) elsewhere. With `assemble` this
        rebuilds the tree (FG's split and merge), even after node ids change, for every term id
        below `length`."""
        parent = self.parents()
        is_text = self.kind == TEXT
        out: dict[int, np.ndarray] = {}
        for h in np.flatnonzero(is_text & ~((parent >= 0) & is_text[np.maximum(parent, 0)])):
            run = [int(h)]
            for u in run:  # grows while iterating
                run.extend(c for c in range(self.first_child[u], self.first_child[u] + 4) if is_text[c])
            n_tab = int(self.exit_len[h])
            w_all = np.arange(max(int(length), n_tab), dtype=np.int64)
            for v in run:
                out[v] = fallback_children(w_all, v)
            cur = self.exit_table[self.exit_off[h]:self.exit_off[h] + n_tab].astype(np.int64)
            w = np.arange(n_tab, dtype=np.int64)
            while True:  # climb every tabled term's path from its exit to the head, one level a step
                act = cur != h
                if not act.any():
                    break
                cu, wu = cur[act], w[act]
                p = parent[cu]
                for v in np.unique(p):
                    sel = p == v
                    out[int(v)][wu[sel]] = cu[sel] - self.first_child[v]
                cur[act] = p
        return out

    def describe(self) -> dict:
        leaves = np.flatnonzero(self.kind == LEAF)
        return {
            **super().describe(),
            "splits": {"spatial": int((self.kind == SPATIAL).sum()), "text": int((self.kind == TEXT).sum())},
            "leaves": [
                {"leaf": int(self.node_leaf[i]), "worker": int(self.leaf_worker[self.node_leaf[i]]),
                 "region": self.regions[i].tolist(), "cost": float(self.leaf_cost[self.node_leaf[i]])}
                for i in leaves
            ],
        }


def fallback_children(w: np.ndarray, node: int) -> np.ndarray:
    """`_fallback_child` over an array of term ids (int8 children)."""
    w = np.asarray(w, np.int64)
    return ((((w * 2654435761) ^ (int(node) * 40503)) & 0xFFFFFFFF) >> 30).astype(np.int8)


def assemble(n_workers, kind, first_child, mid_x, mid_y, regions, term_maps: dict[int, np.ndarray], leaf_worker,
             leaf_cost) -> QTTreeRouter:
    """A router from a node table (children contiguous, root first; leaf ids = leaves in node
    order) and per textual node a term -> child map: how FG rebuilds a split/merged tree."""
    kind = np.asarray(kind, np.int64)
    first_child = np.asarray(first_child, np.int64)
    n = len(kind)
    map_len = np.zeros(n, np.int64)
    for v, m in term_maps.items():
        map_len[v] = len(m)
    map_off = np.concatenate([[0], np.cumsum(map_len)[:-1]]).astype(np.int64)
    parts = [np.asarray(term_maps[v], np.int64) for v in range(n) if map_len[v]]
    term_child = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    node_leaf = np.full(n, -1, np.int64)
    leaves = np.flatnonzero(kind == LEAF)
    node_leaf[leaves] = np.arange(len(leaves))
    return QTTreeRouter(n_workers, kind, first_child, mid_x, mid_y,
                        *_compile_text_runs(kind, first_child, map_off, map_len, term_child), node_leaf, leaf_worker,
                        regions, leaf_cost)


# --- construction (Algorithm 1) -------------------------------------------------------------------


@dataclass
class _Node:
    cell: StatsCell
    constrained: bool  # has a textual ancestor (H < 1 possible)
    objs: np.ndarray  # object positions reaching the node
    masks: np.ndarray  # their live-term masks
    ents: np.ndarray  # routing entries reaching the node
    cost: float = 0.0
    depth: int = 0
    kind: int = LEAF
    first_child: int = -1
    term_map: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))


class QTTreeBuilder:
    """Algorithm 1 over a sample; `split_kinds` restricts the splits (the ablations)."""

    def __init__(self, stats: QueryStats, model: CostModel, split_kinds: tuple[str, ...]):
        self.stats, self.model, self.split_kinds = stats, model, split_kinds
        self.nodes: list[_Node] = []
        self.cost_trace: list[float] = []  # total leaf cost after each split (for tests/plots)

    def _make(self, cell, constrained, objs, masks, ents, depth) -> _Node:
        node = _Node(cell, constrained, objs, masks, ents, depth=depth)
        node.cost = self.model.cost(cell, len(objs), len(ents), constrained)
        return node

    def spatial_children(self, node: _Node) -> list[_Node]:
        st = self.stats
        cells = st.children(node.cell.key)
        mx, my = node.cell.mid
        quad = (st.oy[node.objs] >= my) * 2 + (st.ox[node.objs] >= mx)
        eq = st.e_q[node.ents]
        ex = (st.rect[eq, 0] < mx, st.rect[eq, 2] >= mx)
        ey = (st.rect[eq, 1] < my, st.rect[eq, 3] >= my)
        out = []
        for c in range(4):
            sel = quad == c
            out.append(self._make(cells[c], node.constrained, node.objs[sel], node.masks[sel],
                                  node.ents[ex[c & 1] & ey[c >> 1]], node.depth + 1))
        return out

    def text_children(self, node: _Node, node_id: int) -> tuple[list[_Node], np.ndarray]:
        st = self.stats
        terms, local = _live_pairs(node.objs, node.masks, st.o_off, st.o_val)
        e_terms = st.e_t[node.ents]
        uniq, child = term_children(terms, local, e_terms, len(node.objs), node.cell.n_entries, self.model.poly(node.cell))
        length = int(uniq[-1]) + 1 if len(uniq) else 0
        w_all = np.arange(length, dtype=np.int64)
        term_map = ((((w_all * 2654435761) ^ (node_id * 40503)) & 0xFFFFFFFF) >> 30).astype(np.int8)
        term_map[uniq] = child
        masks, reach = _child_masks(node.objs, node.masks, st.o_off, st.o_val, term_map, node_id)
        e_child = term_map[e_terms] if length else np.zeros(0, np.int8)
        out = [self._make(node.cell, True, node.objs[reach[c]], masks[c][reach[c]], node.ents[e_child == c], node.depth + 1)
               for c in range(4)]
        return out, term_map

    def choose(self, node: _Node, options: list[tuple]) -> tuple:
        """Algorithm 1, line 8: the option whose children cost least; ties go spatial (listed
        first). A subclass may choose otherwise (e.g. FG's Eq. 3 heuristic, or tests)."""
        return min(options, key=lambda o: sum(c.cost for c in o[1]))

    def build(self, n_leaves: int) -> list[_Node]:
        st = self.stats
        root = self._make(st.cell((0, 0, 0)), False, np.arange(len(st.objs)), np.full(len(st.objs), ALL_LIVE, np.int64),
                          np.arange(len(st.e_q)), 0)
        self.nodes = [root]
        heap = [(-root.cost, 0)]
        leaves = 1
        total = root.cost
        self.cost_trace = [total]
        while leaves < n_leaves:
            _, nid = heapq.heappop(heap)
            node = self.nodes[nid]
            options = []
            if "spatial" in self.split_kinds:
                options.append((SPATIAL, self.spatial_children(node), None))
            if "text" in self.split_kinds:
                options.append((TEXT, *self.text_children(node, nid)))
            kind, children, term_map = self.choose(node, options)
            node.kind, node.first_child = kind, len(self.nodes)
            if term_map is not None:
                node.term_map = term_map
            for c in children:
                heapq.heappush(heap, (-c.cost, len(self.nodes)))
                self.nodes.append(c)
            node.objs = node.masks = node.ents = None  # type: ignore[assignment]  # free memory
            leaves += 3
            total += sum(c.cost for c in children) - node.cost
            self.cost_trace.append(total)
        return self.nodes


class QTTreeStrategy(Strategy):
    name = "qttree"
    families = frozenset({"range"})
    unit_router = True  # leaves are the migration units (SSTD Section 5; strategies/sstd_balance.py)
    split_kinds: ClassVar[tuple[str, ...]] = ("spatial", "text")

    @dataclass
    class Params:
        theta: int = 64  # the threshold on the number of leaves (SSTD default 64)

    def build(self, sample: Events, n_workers: int, params: Any, context: FitContext) -> QTTreeBuilder:
        stats = QueryStats(sample, context.extent)
        builder = QTTreeBuilder(stats, CostModel(stats), self.split_kinds)
        builder.build(max(int(params.theta), int(n_workers), 1))
        return builder

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        return to_router(self.build(sample, n_workers, params, context).nodes, n_workers)


def to_router(nodes: list[_Node], n_workers: int) -> QTTreeRouter:
    """Flatten a built tree (children contiguous, root first) and allocate its leaves by KK."""
    n = len(nodes)
    kind = np.array([nd.kind for nd in nodes], np.int64)
    node_leaf = np.full(n, -1, np.int64)
    leaves = np.flatnonzero(kind == LEAF)
    node_leaf[leaves] = np.arange(len(leaves))
    leaf_cost = np.array([nodes[i].cost for i in leaves], np.float64)
    map_len = np.array([len(nd.term_map) for nd in nodes], np.int64)
    map_off = np.concatenate([[0], np.cumsum(map_len)[:-1]]).astype(np.int64)
    term_child = np.concatenate([nd.term_map for nd in nodes]).astype(np.int64)
    first_child = np.array([nd.first_child for nd in nodes], np.int64)
    return QTTreeRouter(
        n_workers, kind, first_child, [nd.cell.mid[0] for nd in nodes], [nd.cell.mid[1] for nd in nodes],
        *_compile_text_runs(kind, first_child, map_off, map_len, term_child), node_leaf,
        karmarkar_karp(leaf_cost, n_workers), [nd.cell.region for nd in nodes], leaf_cost,
    )
