"""SSTD's cost model as the paper states it (Sec. 4.1.1, Eq. 1-2), for the one-copy QT-tree:

    W(P) = sum_t Pr(t) W_t(P),  W_srq = p_srq * Pr(q.phi in P.phi) * |O|,  W_skq likewise with M_skq,
    W_stq = p_stq |O|,  W_crq = p_crq E_{P,O},  W_ckq = p_ckq E_{P,O},  W_ctq = p_ctq E_{P,O}.

- Eq. 1: Pr(q.phi in P.phi) = sum_l Pr(|q.phi| = l) H^l with H = sum of M's masses over P.phi, the
  keywords of P's objects (l.136-147), per type (M_srq, M_skq: the keyword frequencies of the
  type's queries overlapping the cell, l.136). An OR query needs one keyword in P.phi:
  1 - (1 - H)^l (the paper's queries are AND; the harness's workloads may set op: or).
- W_crq has no text factor (l.167): queries reach every textual child (l.225), so none is added.
- Time: J is fitted on the six-type historical sample (history.py), whose queries all take the
  paper's default duration tau = 72 h (l.320 (iv)): E_{P,O} = tau E_P and a snapshot query's |O|
  (the objects within its look-back) are then the same factor, common to all six terms, and
  dropped (it changes no comparison and no Karmarkar-Karp allocation).
- H is computed for every node from its objects' keywords, textual ancestors or not (l.136:
  "P.phi ... the set of keywords extracted from O").
"""

from __future__ import annotations

from math import comb

import numpy as np

from harness.core.events import OR
from strategies.sstd.qttree.cost import _share
from strategies.sstd.qttree.stats import TYPE_NAMES, QueryStats, StatsCell

TEXT_TYPES = ("srq", "skq")  # the types Eq. 1's factor applies to (W_srq, W_skq)


def eq1_poly(lengths: np.ndarray, is_or: np.ndarray) -> np.ndarray:
    """Coefficients (ascending powers of H) of sum_l Pr(l) H^l over AND queries plus
    sum_l Pr(l) (1 - (1 - H)^l) over OR ones (Eq. 1); no queries: the constant 0."""
    lengths = np.asarray(lengths, np.int64)
    if len(lengths) == 0:
        return np.zeros(1)
    coef = np.zeros(int(lengths.max()) + 1)
    for l_, o in zip(lengths.tolist(), np.asarray(is_or, bool).tolist()):
        if o:  # 1 - (1 - H)^l = sum_{j>=1} (-1)^(j+1) C(l, j) H^j
            for j in range(1, l_ + 1):
                coef[j] += (-1) ** (j + 1) * comb(l_, j)
        else:
            coef[l_] += 1.0
    return coef / len(lengths)


class PaperCostModel:
    """Eq. 2 over J (`stats`, built from the six-type historical sample) with `pr` = Pr(type)."""

    def __init__(self, stats: QueryStats, pr: dict[str, float] | None = None):
        self.stats = stats
        if stats.other_families:
            raise NotImplementedError(f"QT-tree cost model: no term for the {stats.other_families[0]!r} query family; "
                                      "it has SSTD's six types: range, knn and terms queries, continuous or snapshot")
        total = sum(stats.type_counts.values())
        self.pr = pr if pr is not None else ({t: c / total for t, c in stats.type_counts.items()} if total else {})
        ev = stats.sample
        rows = stats.qs
        self.q_len = (ev.offsets[rows + 1] - ev.offsets[rows]).astype(np.int64)
        self.f = {}
        for t in TEXT_TYPES:
            mine = stats.qtype == TYPE_NAMES.index(t)
            self.f[t] = eq1_poly(self.q_len[mine], ev.op[rows[mine]] == OR)
        self.width = max(len(c) for c in self.f.values())
        self._cell: dict = {}

    def cell_terms(self, cell: StatsCell):
        """(c0, poly_srq, poly_skq, M terms, M_srq masses, M_skq masses) of a cell: c0 the types
        without a text factor, the polynomials (length `width`) Pr(t) p_t F_t(H), and M over the
        union of both types' keywords (sorted)."""
        if cell.key in self._cell:
            return self._cell[cell.key]
        st, ev = self.stats, self.stats.sample
        c0 = sum(self.pr.get(t, 0.0) * _share(st, cell, t) for t in TYPE_NAMES if t not in TEXT_TYPES)
        polys, masses = [], []
        for t in TEXT_TYPES:
            coef = np.zeros(self.width)
            f = self.f[t] * self.pr.get(t, 0.0) * _share(st, cell, t)
            coef[:len(f)] = f
            polys.append(coef)
            qs = st.qs[cell.queries[st.qtype[cell.queries] == TYPE_NAMES.index(t)]]
            starts, ends = ev.offsets[qs], ev.offsets[qs + 1]
            idx = np.repeat(starts - np.concatenate([[0], np.cumsum(ends - starts)[:-1]]), ends - starts) + \
                np.arange(int((ends - starts).sum()))
            masses.append(ev.values[idx].astype(np.int64))
        terms = np.unique(np.concatenate(masses))
        m = [np.bincount(np.searchsorted(terms, v), minlength=len(terms)) / max(len(v), 1) for v in masses]
        out = (float(c0), polys[0], polys[1], terms, m[0].astype(np.float64), m[1].astype(np.float64))
        self._cell[cell.key] = out
        return out

    def h_of(self, cell: StatsCell, keywords: np.ndarray) -> tuple[float, float]:
        """(H_srq, H_skq) of a node in `cell` whose objects carry `keywords` (distinct)."""
        _, _, _, terms, ms, mk = self.cell_terms(cell)
        pos = np.searchsorted(terms, keywords)
        hit = pos < len(terms)
        hit[hit] = terms[pos[hit]] == keywords[hit]
        return float(ms[pos[hit]].sum()), float(mk[pos[hit]].sum())

    def cost(self, cell: StatsCell, n_objects: int, keywords: np.ndarray) -> float:
        """W of a node in `cell` holding n_objects objects carrying `keywords` (Eq. 2)."""
        c0, ps, pk, _, _, _ = self.cell_terms(cell)
        hs, hk = self.h_of(cell, keywords)
        return float(n_objects * (c0 + np.polyval(ps[::-1], hs) + np.polyval(pk[::-1], hk)))
