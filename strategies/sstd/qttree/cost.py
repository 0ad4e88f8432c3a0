"""`qttree_termmap`'s cost model (`qttree`'s, as the paper writes it, is paper_cost.py): SSTD's
Eq. 1-2, one term per query type, and the textual split's term -> child
assignment it drives (Section 4.1.2). Each term is Pr(type) * p_type(cell) * F(H) * E: Eq. 1's
form, with H the mass of M on the node's keywords, for SSTD's six types (stats.TYPES): continuous
range, kNN and top-k terms (CRQ, CKQ, CTQ) and their snapshot forms (SRQ, SKQ, STQ).

Text factor (ADR-0019): the paper's W_crq has none (CRQs reach every textual child).
Under keyword routing a CRQ or SRQ only reaches a child if a routing keyword is there, so they get
Eq. 1's factor F(H) = sum_l Pr(l) (1 - (1 - H)^l), l = number of routing keywords (1 for AND),
each drawn independently from the cell's M, as Eq. 1 assumes. kNN types get it only when routed by
their keywords (ckq_routing: ball); SSTD sends them to every worker (factor 1). Top-k-terms types
have no keywords and reach every textual child (factor 1), as W_stq and W_ctq have none.

Time factor: E_{P,O} for the continuous types (mean lifetime x objects per time unit), and for
the snapshot ones the objects within the mean look-back (stats.time_share): SSTD's |O| for
W_srq, W_skq and W_stq read as the objects a snapshot query can see (spec 4.6).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from strategies.sstd.qttree.stats import KNN_TYPES, TYPE_NAMES, QueryStats, StatsCell


def _share(stats: QueryStats, cell: StatsCell, qtype: str) -> float:
    """p_type(cell): the fraction of the type's sample queries whose region reaches the cell."""
    code = TYPE_NAMES.index(qtype)
    return int((stats.qtype[cell.queries] == code).sum()) / max(stats.type_counts.get(qtype, 0), 1)


def type_term(stats: QueryStats, cell: StatsCell, qtype: str) -> np.ndarray:
    """W_type of a cell as the coefficients of p_type * time_share * F(H), a polynomial in H (the
    caller multiplies by |O_P|)."""
    keyworded = qtype in ("crq", "srq") or (qtype in KNN_TYPES and stats.knn_by_keywords)
    text = text_factor_poly(stats.pr_route_len) if keyworded else np.ones(1)
    return text * _share(stats, cell, qtype) * stats.time_share[qtype]


def text_factor_poly(pr_l: np.ndarray) -> np.ndarray:
    """Coefficients (ascending powers of H) of F(H) = sum_l Pr(l) (1 - (1 - H)^l), Eq. 1's text
    factor under keyword routing (also FG's textual split, strategies/sstd/fgtree.py)."""
    coef = np.zeros(len(pr_l))
    for l_, p in enumerate(pr_l):
        for j in range(1, l_ + 1):
            coef[j] += p * (-1) ** (j + 1) * math.comb(l_, j)
    return coef


class CostModel:
    """Eq. 2: W(P) = sum over query types t of Pr(t) * W_t(P).

    Every term has the shape K_f(cell) * F_f(H) * |O_P|, so a node's cost is |O_P| times one
    polynomial in H per cell (`poly`), which is what the greedy textual split evaluates. (A later
    family with its own keyword distribution, e.g. SRQ's M_srq, would need its own H.)
    """

    def __init__(self, stats: QueryStats):
        self.stats = stats
        if stats.other_families:
            raise NotImplementedError(f"QT-tree cost model: no term for the {stats.other_families[0]!r} query family; "
                                      "it has SSTD's six types: range, knn and terms queries, continuous or snapshot")
        total = sum(stats.type_counts.values())
        self.pr = {t: c / total for t, c in stats.type_counts.items()} if total else {"crq": 1.0}
        self._poly: dict[tuple[int, int, int], np.ndarray] = {}

    def poly(self, cell: StatsCell) -> np.ndarray:
        if cell.key not in self._poly:
            coef = np.zeros(1)
            for t, pr in self.pr.items():
                c = type_term(self.stats, cell, t) * pr
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
