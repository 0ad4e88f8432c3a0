"""The kdt-tree's sample and load model (PS2Stream, Chen et al., Section IV-B): the fit sample in
gridt cell coordinates, the text similarity sim_t of Algorithm 1's phase 1, and the tree's nodes
with their load (Definition 1), the measure every choice of the partitioning compares
(strategies/ps2stream/kdt_partition.py).

Decisions where the paper is silent (each also in the notes file):
- Load of a leaf: Definition 1 with every c = 1, counting the comparisons where GI2 makes them:
  sum over its gridt cells and terms of f_o(c, t) * f_q(c, t) (objects of the cell holding t times
  queries over the cell posted under t: Definition 3 per posting list), plus the objects and the
  queries the leaf receives. A text leaf receives the queries over its region whose routing term
  (least frequent keyword of a conjunct) is in its term set, and the objects there holding one of
  those queries' routing terms (gridt drops the others); its worker posts an OR query under every
  keyword and probes every term of an object, which is what the count charges. The cruder
  region-wide product n_o * n_q made space cuts always win, the per-cell product text cuts always
  (measured); this model makes the choice turn on duplication, as the paper's Figure 2 argues.
- sim_t: cosine of the term-count vector of O_n and the keyword-count vector of Q_n; 1 when
  either side is empty (nothing to gain from text-partitioning).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from harness.core.events import Events, csr_take
from harness.core.grid import UniformGrid
from strategies.load import routing_terms, sample_parts


# --- the sample in cell coordinates ----------------------------------------------------------------

@dataclass
class Sample:
    """The fit sample: objects (cell coordinates, terms) and queries (cell ranges, keywords, the
    terms each is indexed under), all term lists as CSR over int64."""

    nx: int
    ny: int
    ox: np.ndarray
    oy: np.ndarray
    o_ptr: np.ndarray
    o_val: np.ndarray
    qx0: np.ndarray
    qx1: np.ndarray
    qy0: np.ndarray
    qy1: np.ndarray
    k_ptr: np.ndarray  # all keywords (text similarity)
    k_val: np.ndarray
    r_ptr: np.ndarray  # routing terms (load, routing)
    r_val: np.ndarray
    vocab: int

    @property
    def n_objects(self) -> int:
        return len(self.ox)

    @property
    def n_queries(self) -> int:
        return len(self.qx0)

    @classmethod
    def of(cls, ev: Events, grid: UniformGrid) -> Sample:
        objs, qs = sample_parts(ev)
        cells = grid.cells_of(ev.x[objs], ev.y[objs])
        o_ptr, o_val = csr_take(ev.offsets, ev.values, objs)
        rng = grid.cell_ranges(ev.xmin[qs], ev.ymin[qs], ev.xmax[qs], ev.ymax[qs])
        k_ptr, k_val = csr_take(ev.offsets, ev.values, qs)
        r_rows, r_terms = routing_terms(ev, qs)  # rows of qs (AND first, then OR): regroup per query
        pos = np.searchsorted(qs, r_rows)
        order = np.lexsort((r_terms, pos))
        r_ptr = np.zeros(len(qs) + 1, np.int64)
        np.cumsum(np.bincount(pos, minlength=len(qs)), out=r_ptr[1:])
        vals = [o_val, k_val]
        vocab = int(max((int(v.max()) for v in vals if len(v)), default=-1)) + 1
        return cls(grid.nx, grid.ny, cells % grid.nx, cells // grid.nx, o_ptr, o_val.astype(np.int64),
                   rng[:, 0].copy(), rng[:, 1].copy(), rng[:, 2].copy(), rng[:, 3].copy(), k_ptr,
                   k_val.astype(np.int64), r_ptr, r_terms[order].astype(np.int64), max(vocab, 1))


def gather(ptr: np.ndarray, val: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(owner, value) pairs of the CSR rows idx."""
    new_ptr, values = csr_take(ptr, val, idx)
    return np.repeat(idx, np.diff(new_ptr)), values


def present(a: np.ndarray, n: int) -> np.ndarray:
    """Which of 0..n-1 occur in a (a boolean mask; ids are small, so no sort; a scatter of True,
    not a bincount, which counts into eight bytes per id)."""
    mask = np.zeros(n, np.bool_)
    mask[a] = True
    return mask


def key_counts(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys and their counts by sort plus a neighbour mask."""
    keys = np.sort(keys)
    if len(keys) == 0:
        return keys, np.zeros(0, np.int64)
    start = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    return keys[start], np.diff(np.append(start, len(keys)))


MAX_EXPAND_CELLS = 64  # range queries cover a few cells (STS: at most 9 of 62 km); a kNN ball may cover thousands


def _weighted_counts(keys: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys and their summed weights (counts when every weight is 1)."""
    if len(keys) == 0:
        return keys, np.zeros(0)
    if (weight == 1.0).all():  # counts: an unstable sort is exact and several times faster
        keys, counts = key_counts(keys)
        return keys, counts.astype(np.float64)
    order = np.argsort(keys, kind="stable")
    keys, weight = keys[order], weight[order]
    start = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    return keys[start], np.add.reduceat(weight, start)


@njit(cache=True)
def _cell_term_keys(qt, ax0, ax1, ay0, ay1, nx, ncell, total):
    """term * ncell + cell for every cell of every query's window, query by query, row by row."""
    out = np.empty(total, np.int64)
    k = 0
    for i in range(len(qt)):
        for y in range(ay0[i], ay1[i] + 1):
            for x in range(ax0[i], ax1[i] + 1):
                out[k] = qt[i] * ncell + y * nx + x
                k += 1
    return out


def posting_products(s: Sample, region, qo, qt, oo, ot):
    """The GI2 comparisons of a node: for every (cell, term) of the region, f_o(c, t) * f_q(c, t),
    the objects of cell c holding term t times the queries over c indexed under t. (qo, qt) are
    (query, routing term) pairs, (oo, ot) (object, term) pairs. Returns (term, cell, product)."""
    ncell = s.nx * s.ny
    x0, x1, y0, y1 = region
    ax0, ax1 = np.maximum(s.qx0[qo], x0), np.minimum(s.qx1[qo], x1)
    ay0, ay1 = np.maximum(s.qy0[qo], y0), np.minimum(s.qy1[qo], y1)
    w = ax1 - ax0 + 1
    n = np.maximum(w, 0) * np.maximum(ay1 - ay0 + 1, 0)
    weight = np.ones(len(qo))
    big = np.flatnonzero(n > MAX_EXPAND_CELLS)
    if len(big):  # a query over very many cells (a kNN ball) is sampled on a centred window, scaled up
        half = int(np.sqrt(MAX_EXPAND_CELLS)) // 2
        cx, cy = (ax0[big] + ax1[big]) // 2, (ay0[big] + ay1[big]) // 2
        ax0, ax1, ay0, ay1 = ax0.copy(), ax1.copy(), ay0.copy(), ay1.copy()
        ax0[big], ax1[big] = np.maximum(ax0[big], cx - half), np.minimum(ax1[big], cx + half)
        ay0[big], ay1[big] = np.maximum(ay0[big], cy - half), np.minimum(ay1[big], cy + half)
        w = ax1 - ax0 + 1
        n_window = np.maximum(w, 0) * np.maximum(ay1 - ay0 + 1, 0)
        weight[big] = n[big] / np.maximum(n_window[big], 1)
        n = n_window
    qkeys, qcnt = _weighted_counts(_cell_term_keys(qt.astype(np.int64), ax0, ax1, ay0, ay1, s.nx, ncell, int(n.sum())),
                                   np.repeat(weight, n))
    okeys, ocnt = key_counts(ot * ncell + s.oy[oo] * s.nx + s.ox[oo])
    if len(qkeys) == 0 or len(okeys) == 0:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0)
    pos = np.minimum(np.searchsorted(qkeys, okeys), len(qkeys) - 1)
    hit = qkeys[pos] == okeys
    keys = okeys[hit]
    return keys // ncell, keys % ncell, (ocnt[hit] * qcnt[pos[hit]]).astype(np.float64)


def text_similarity(s: Sample, objs: np.ndarray, qrys: np.ndarray) -> float:
    """sim_t(O_n, Q_n): cosine of the objects' term counts and the queries' keyword counts (1 when
    either side is empty: nothing there to gain from text-partitioning)."""
    _, ot = gather(s.o_ptr, s.o_val, objs)
    _, qt = gather(s.k_ptr, s.k_val, qrys)
    if len(ot) == 0 or len(qt) == 0:
        return 1.0
    a = np.bincount(ot, minlength=s.vocab).astype(np.float64)
    b = np.bincount(qt, minlength=s.vocab).astype(np.float64)
    return float(a @ b / np.sqrt((a @ a) * (b @ b)))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of two count vectors (exposed for tests)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    den = np.sqrt((a @ a) * (b @ b))
    return 1.0 if den == 0 else float(a @ b / den)


# --- kdt-tree nodes ---------------------------------------------------------------------------------

class Node:
    """A kdt-tree node: a region of gridt cells (ix0, ix1, iy0, iy1 inclusive) and a term set (None
    = every term, a space node; else the sorted terms of a text leaf). `objs` / `qrys` are the
    sample objects inside the region and the queries overlapping it; `routed` = (objects, queries)
    the node actually receives. `base` caches the region's gathered term pairs, shared by text
    siblings (same region)."""

    __slots__ = ("_base", "_load", "_routed", "label", "objs", "qrys", "region", "s", "splittable", "terms")

    def __init__(self, s: Sample, region, objs, qrys, terms=None, label="s", routed=None, base=None):
        self.s = s
        self.region = tuple(int(v) for v in region)
        self.objs = objs
        self.qrys = qrys
        self.terms = terms
        self.label = label
        self._routed = routed
        self._load = None
        self._base = base
        self.splittable = True

    @property
    def base(self):
        """(query, routing term) and (object, term) pairs of every query / object of the region."""
        if self._base is None:
            s = self.s
            self._base = (*gather(s.r_ptr, s.r_val, self.qrys), *gather(s.o_ptr, s.o_val, self.objs))
        return self._base

    def pairs(self):
        """What the node's worker indexes and probes: (query, posting term) pairs of the queries it
        receives (all their GI2 postings: an OR query under every keyword), (object, term) pairs
        of the objects it receives (all their terms: GI2 probes each), and `used`, the routing
        terms that bring queries here (a mask over the vocabulary). A space node receives every
        query over its region; a text node those with a routing term in its set. Objects are
        received when they hold a term in `used` (gridt drops the others)."""
        s = self.s
        qo, qt, oo, ot = self.base
        if self.terms is None:
            used = present(qt, s.vocab)
        else:
            mine = np.zeros(s.vocab, bool)
            mine[self.terms] = True
            keep = mine[qt]
            used = present(qt[keep], s.vocab)
            got = present(qo[keep], s.n_queries)[qo]
            qo, qt = qo[got], qt[got]
        got = present(oo[used[ot]], s.n_objects)[oo]
        return qo, qt, oo[got], ot[got], used

    @property
    def routed(self) -> tuple[np.ndarray, np.ndarray]:
        if self._routed is None:
            qo, _, oo, _, _ = self.pairs()
            s = self.s
            self._routed = (np.flatnonzero(present(oo, s.n_objects)), np.flatnonzero(present(qo, s.n_queries)))
        return self._routed

    @property
    def ro(self) -> np.ndarray:
        return self.routed[0]

    @property
    def rq(self) -> np.ndarray:
        return self.routed[1]

    @property
    def load(self) -> float:
        """Definition 1 with c = 1: GI2 comparisons + objects received + queries received."""
        if self._load is None:
            qo, qt, oo, ot, _ = self.pairs()
            s = self.s
            if self._routed is None:
                self._routed = (np.flatnonzero(present(oo, s.n_objects)), np.flatnonzero(present(qo, s.n_queries)))
            prod = posting_products(s, self.region, qo, qt, oo, ot)[2].sum()
            self._load = float(prod) + len(self._routed[0]) + len(self._routed[1])
        return self._load

    @property
    def n_cells(self) -> int:
        x0, x1, y0, y1 = self.region
        return (x1 - x0 + 1) * (y1 - y0 + 1)

    def child(self, region, terms=None, routed=None, same_region=False) -> Node:
        if same_region:
            return Node(self.s, region, self.objs, self.qrys, terms, self.label, routed, self._base)
        s = self.s
        x0, x1, y0, y1 = region
        o, q = self.objs, self.qrys
        o = o[(s.ox[o] >= x0) & (s.ox[o] <= x1) & (s.oy[o] >= y0) & (s.oy[o] <= y1)]
        q = q[(s.qx0[q] <= x1) & (s.qx1[q] >= x0) & (s.qy0[q] <= y1) & (s.qy1[q] >= y0)]
        return Node(s, region, o, q, self.terms if terms is None else terms, self.label, routed)
