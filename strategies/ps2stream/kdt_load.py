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

from dataclasses import dataclass, field

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
    loads: dict = field(default_factory=dict)  # (region, term set) -> (load, routed): Node.load's memo

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


MAX_EXPAND_CELLS = 64  # range queries cover a few cells (STS: at most 9 of 62 km); a kNN ball may cover thousands


@njit(cache=True)
def _received(qrys, objs, r_ptr, r_val, o_ptr, o_val, mine, every, vocab):
    """A node's worker's pairs (Node.pairs) in one compiled pass over the CSR rows, in the order
    of qrys and objs: the queries with a routing term in `mine` (every term when `every`) with all
    their routing pairs, the objects holding a term that brings a query here with all their terms,
    the used-term mask, and the received query and object ids."""
    used = np.zeros(vocab, np.bool_)
    q_in = np.zeros(len(qrys), np.bool_)
    n_qp = 0
    for i in range(len(qrys)):
        q = qrys[i]
        for j in range(r_ptr[q], r_ptr[q + 1]):
            if every or mine[r_val[j]]:
                q_in[i] = True
                used[r_val[j]] = True
        if q_in[i]:
            n_qp += r_ptr[q + 1] - r_ptr[q]
    o_in = np.zeros(len(objs), np.bool_)
    n_op = 0
    for i in range(len(objs)):
        o = objs[i]
        for j in range(o_ptr[o], o_ptr[o + 1]):
            if used[o_val[j]]:
                o_in[i] = True
                n_op += o_ptr[o + 1] - o_ptr[o]
                break
    qo, qt, rq = _kept_pairs(qrys, q_in, n_qp, r_ptr, r_val)
    oo, ot, ro = _kept_pairs(objs, o_in, n_op, o_ptr, o_val)
    return qo, qt, oo, ot, used, rq, ro


@njit(cache=True)
def _kept_pairs(items, keep, n_pairs, ptr, val):
    """(item, value) pairs of the kept items' CSR rows, in order, and the kept items."""
    owner, value = np.empty(n_pairs, np.int64), np.empty(n_pairs, np.int64)
    kept = np.empty(keep.sum(), np.int64)
    k = n = 0
    for i in range(len(items)):
        if keep[i]:
            it = items[i]
            kept[n] = it
            n += 1
            for j in range(ptr[it], ptr[it + 1]):
                owner[k], value[k] = it, val[j]
                k += 1
    return owner, value, kept


@njit(cache=True, inline="always")
def _window(q, x0, x1, y0, y1, qx0, qx1, qy0, qy1, half):
    """A query's cells inside the region; a window over more than MAX_EXPAND_CELLS cells (a kNN
    ball) shrinks to a centred one, weighted by how many cells it stands for."""
    ax0, ax1 = max(qx0[q], x0), min(qx1[q], x1)
    ay0, ay1 = max(qy0[q], y0), min(qy1[q], y1)
    n = max(ax1 - ax0 + 1, 0) * max(ay1 - ay0 + 1, 0)
    weight = 1.0
    if n > MAX_EXPAND_CELLS:
        cx, cy = (ax0 + ax1) // 2, (ay0 + ay1) // 2
        ax0, ax1 = max(ax0, cx - half), min(ax1, cx + half)
        ay0, ay1 = max(ay0, cy - half), min(ay1, cy + half)
        n_window = max(ax1 - ax0 + 1, 0) * max(ay1 - ay0 + 1, 0)
        weight = n / max(n_window, 1)
    return ax0, ax1, ay0, ay1, weight


@njit(cache=True)
def _products(x0, x1, y0, y1, qo, qt, oo, ot, qx0, qx1, qy0, qy1, ox, oy, nx, ncell):
    """posting_products' counts in one pass: f_q(c, t) into an open-addressing table keyed by
    term * ncell + cell, then each object pair adds to f_o(c, t) where f_q is there. A hash, not
    numpy's sort of every key: the keys are counted once and only the matches are sorted."""
    half = int(np.sqrt(MAX_EXPAND_CELLS)) // 2
    total = 0
    for i in range(len(qo)):
        ax0, ax1, ay0, ay1, _ = _window(qo[i], x0, x1, y0, y1, qx0, qx1, qy0, qy1, half)
        total += max(ax1 - ax0 + 1, 0) * max(ay1 - ay0 + 1, 0)
    bits = 1
    while (1 << bits) < 2 * total + 2:
        bits += 1
    size = 1 << bits
    shift = np.uint64(64 - bits)
    mult = np.uint64(0x9E3779B97F4A7C15)
    mask = size - 1
    keys = np.full(size, -1, np.int64)
    fq = np.zeros(size)
    fo = np.zeros(size, np.int64)
    for i in range(len(qo)):
        ax0, ax1, ay0, ay1, weight = _window(qo[i], x0, x1, y0, y1, qx0, qx1, qy0, qy1, half)
        base = qt[i] * ncell
        for y in range(ay0, ay1 + 1):
            for x in range(ax0, ax1 + 1):
                key = base + y * nx + x
                h = np.int64((np.uint64(key) * mult) >> shift)
                while keys[h] != key and keys[h] != -1:
                    h = (h + 1) & mask
                keys[h] = key
                fq[h] += weight
    hit = np.empty(len(oo) if total else 0, np.int64)  # the slots objects matched, each once
    n_hit = 0
    for i in range(len(hit)):
        key = ot[i] * ncell + oy[oo[i]] * nx + ox[oo[i]]
        h = np.int64((np.uint64(key) * mult) >> shift)
        while keys[h] != key and keys[h] != -1:
            h = (h + 1) & mask
        if keys[h] == key:
            if fo[h] == 0:
                hit[n_hit] = h
                n_hit += 1
            fo[h] += 1
    hit = hit[:n_hit]
    hit = hit[np.argsort(keys[hit])]
    found = keys[hit]
    return found // ncell, found % ncell, fo[hit] * fq[hit]


def posting_products(s: Sample, region, qo, qt, oo, ot):
    """The GI2 comparisons of a node: for every (cell, term) of the region, f_o(c, t) * f_q(c, t),
    the objects of cell c holding term t times the queries over c indexed under t. (qo, qt) are
    (query, routing term) pairs, (oo, ot) (object, term) pairs. Returns (term, cell, product),
    by term then cell."""
    x0, x1, y0, y1 = (int(v) for v in region)
    i64 = lambda a: np.asarray(a, np.int64)  # noqa: E731
    return _products(x0, x1, y0, y1, i64(qo), i64(qt), i64(oo), i64(ot), s.qx0, s.qx1, s.qy0, s.qy1, s.ox, s.oy,
                     s.nx, s.nx * s.ny)


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
    sample objects inside the region and the queries overlapping it (both ascending); `routed` =
    (objects, queries) the node actually receives."""

    __slots__ = ("_load", "_routed", "label", "objs", "qrys", "region", "s", "splittable", "terms")

    def __init__(self, s: Sample, region, objs, qrys, terms=None, label="s", routed=None):
        self.s = s
        self.region = tuple(int(v) for v in region)
        self.objs = objs
        self.qrys = qrys
        self.terms = terms
        self.label = label
        self._routed = routed
        self._load = None
        self.splittable = True

    def pairs(self):
        """What the node's worker indexes and probes: (query, posting term) pairs of the queries it
        receives (all their GI2 postings: an OR query under every keyword), (object, term) pairs
        of the objects it receives (all their terms: GI2 probes each), and `used`, the routing
        terms that bring queries here (a mask over the vocabulary). A space node receives every
        query over its region; a text node those with a routing term in its set. Objects are
        received when they hold a term in `used` (gridt drops the others)."""
        s = self.s
        mine = np.zeros(s.vocab if self.terms is not None else 0, np.bool_)
        if self.terms is not None:
            mine[self.terms] = True
        qo, qt, oo, ot, used, rq, ro = _received(np.asarray(self.qrys, np.int64), np.asarray(self.objs, np.int64),
                                                 s.r_ptr, s.r_val, s.o_ptr, s.o_val, mine, self.terms is None, s.vocab)
        if self._routed is None:
            self._routed = (ro, rq)
        return qo, qt, oo, ot, used

    @property
    def routed(self) -> tuple[np.ndarray, np.ndarray]:
        if self._routed is None:
            known = self.s.loads.get(self.key)
            if known is None:
                self.pairs()
            else:
                self._routed = known[1]
        return self._routed

    @property
    def key(self) -> tuple:
        """The node's identity for the memo: its region and term set decide its objects and queries."""
        return self.region, None if self.terms is None else np.asarray(self.terms, np.int64).tobytes()

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
            key = self.key
            if key not in self.s.loads:  # the DP's dry runs and the sigma loop cut the same nodes again
                qo, qt, oo, ot, _ = self.pairs()
                prod = posting_products(self.s, self.region, qo, qt, oo, ot)[2].sum()
                self.s.loads[key] = (float(prod) + len(self._routed[0]) + len(self._routed[1]), self._routed)
            self._load, routed = self.s.loads[key]
            if self._routed is None:
                self._routed = routed
        return self._load

    @property
    def n_cells(self) -> int:
        x0, x1, y0, y1 = self.region
        return (x1 - x0 + 1) * (y1 - y0 + 1)

    def child(self, region, terms=None, routed=None, same_region=False) -> Node:
        if same_region:
            return Node(self.s, region, self.objs, self.qrys, terms, self.label, routed)
        s = self.s
        x0, x1, y0, y1 = region
        o, q = self.objs, self.qrys
        o = o[(s.ox[o] >= x0) & (s.ox[o] <= x1) & (s.oy[o] >= y0) & (s.oy[o] <= y1)]
        q = q[(s.qx0[q] <= x1) & (s.qx1[q] >= x0) & (s.qy0[q] <= y1) & (s.qy1[q] >= y0)]
        return Node(s, region, o, q, self.terms if terms is None else terms, self.label, routed)
