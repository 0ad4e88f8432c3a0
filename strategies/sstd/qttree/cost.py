"""SSTD's cost model (Eq. 1-2), one term per query family, and the textual split's term -> child
assignment it drives (Section 4.1.2). Each term is Pr(family) * p_family(cell) * F(H) * E: Eq. 1's
form, with H the mass of M on the node's keywords. The continuous range (CRQ) and kNN (CKQ) terms
exist; the other families raise.

CRQ text factor (docs/decisions.md): the paper's W_crq has none (CRQs reach every textual
child). Under keyword routing a CRQ only reaches a child if a routing keyword is there, so W_crq
gets Eq. 1's factor F(H) = sum_l Pr(l) (1 - (1 - H)^l), l = number of routing keywords (1 for
AND), each drawn independently from the cell's M, as Eq. 1 assumes.

CKQ (SSTD Sec. 4.1.1): W_ckq(P) = Pr(d(q, P) < d(q, q.R_k)) * E_{P,O}, no text factor, because
SSTD routes a CKQ to every worker. Under ckq_routing: ball a CKQ is routed by its keywords like a
CRQ, so it gets the CRQ's factor F(H) (docs/decisions.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numba import njit

from strategies.sstd.qttree.stats import QueryStats, StatsCell


def _share(stats: QueryStats, cell: StatsCell, family: str) -> float:
    """p_family(cell): the fraction of the family's sample queries whose region reaches the cell."""
    mine = stats.is_knn[cell.queries] if family == "knn" else ~stats.is_knn[cell.queries]
    return int(mine.sum()) / max(stats.n_by_family[family], 1)


def _range_term(stats: QueryStats, cell: StatsCell) -> np.ndarray:
    """CRQ: W_crq = p_crq(cell) * F(H) * E_{P,O}, returned as the coefficients of
    p_crq * (E_{P,O} / |O_P|) * F(H), a polynomial in H (the caller multiplies by |O_P|).

    F(H) = sum_l Pr(l) * (1 - (1 - H)^l): the probability that one of the query's l routing
    keywords, each drawn from the cell's M, is among the node's keywords (Eq. 1's assumption).
    """
    return text_factor_poly(stats.pr_route_len) * _share(stats, cell, "range") * stats.lifetime["range"]


def _knn_term(stats: QueryStats, cell: StatsCell) -> np.ndarray:
    """CKQ: W_ckq = p_ckq(cell) * E_{P,O} (the polynomial 1 in H: every textual child holds the
    CKQ), or with the CRQ's F(H) when CKQs are routed by their keywords."""
    text = text_factor_poly(stats.pr_route_len) if stats.knn_by_keywords else np.ones(1)
    return text * _share(stats, cell, "knn") * stats.lifetime["knn"]


def text_factor_poly(pr_l: np.ndarray) -> np.ndarray:
    """Coefficients (ascending powers of H) of F(H) = sum_l Pr(l) (1 - (1 - H)^l), Eq. 1's text
    factor under keyword routing (also FG's textual split, strategies/sstd/fgtree.py)."""
    coef = np.zeros(len(pr_l))
    for l_, p in enumerate(pr_l):
        for j in range(1, l_ + 1):
            coef[j] += p * (-1) ** (j + 1) * math.comb(l_, j)
    return coef


def _not_yet(family: str, sstd_types: str) -> Callable[[QueryStats, StatsCell], np.ndarray]:
    def term(stats, cell):
        raise NotImplementedError(
            f"QT-tree cost model: the {family!r} family (SSTD's {sstd_types}) is not implemented yet; "
            "implemented families: ['knn', 'range']"
        )
    return term


FAMILY_TERMS: dict[str, Callable[[QueryStats, StatsCell], np.ndarray]] = {
    "range": _range_term,
    "knn": _knn_term,
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
