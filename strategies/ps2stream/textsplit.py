"""Phase I of PS2Stream's local adjustment (Chen et al., Section V-A): text split / merge of gridt cells.

Only gridt routers can cut a space cell by text, so this is the gridt-specific half of the local
adjustment: a hot space cell's terms are split in two (one part moving to the least loaded
worker), or a text part is merged into the cell's part on that worker. `CellProfile` gives the
Definition 3 loads that decide whether an operation lowers the total load; the functions return
builders, so a new router is made only for an accepted operation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core import allocate
from harness.core.events import DELETE, INSERT, OBJECT, RANGE, Events, csr_take
from strategies.adjust_base import EpochStats
from strategies.load import routing_terms
from strategies.ps2stream.gridt import GridtRouter
from strategies.ps2stream.gridt_keys import TERM_BITS, TERM_MASK


@dataclass
class CellProfile:
    """What Phase I knows about one cell: (item, term) pairs of the epoch's objects in it, of the
    live subscriptions over it (their routing terms) and of the epoch's inserts/deletes over it."""

    obj: tuple[np.ndarray, np.ndarray]
    sub: tuple[np.ndarray, np.ndarray]
    upd: tuple[np.ndarray, np.ndarray]

    @classmethod
    def of(cls, router: GridtRouter, stats: EpochStats, cell: int) -> CellProfile:
        g = router.grid
        cx, cy = cell % g.nx, cell // g.nx

        def over(ev: Events, kinds) -> tuple[np.ndarray, np.ndarray]:
            rows = np.flatnonzero(np.isin(ev.kind, kinds) & (ev.family == RANGE))
            rng = g.cell_ranges(ev.xmin[rows], ev.ymin[rows], ev.xmax[rows], ev.ymax[rows])
            rows = rows[(rng[:, 0] <= cx) & (rng[:, 1] >= cx) & (rng[:, 2] <= cy) & (rng[:, 3] >= cy)]
            return routing_terms(ev, rows)

        rec = stats.recent
        objs = np.flatnonzero(rec.kind == OBJECT)
        objs = objs[g.cells_of(rec.x[objs], rec.y[objs]) == cell]
        ptr, terms = csr_take(rec.offsets, rec.values, objs)
        obj = (np.repeat(objs, np.diff(ptr)), terms.astype(np.int64))
        return cls(obj, over(stats.live, [INSERT]), over(rec, [INSERT, DELETE]))

    def load(self, terms: np.ndarray) -> tuple[float, int]:
        """Definition 3 load of the part holding `terms` (plus its objects and updates, as the
        monitor's unit load), and its size in stored subscriptions."""
        def distinct(pairs):
            return len(np.unique(pairs[0][np.isin(pairs[1], terms)]))
        n_o, n_q, n_u = distinct(self.obj), distinct(self.sub), distinct(self.upd)
        return float(n_o * n_q + n_o + n_u), n_q

    def term_loads(self, terms: np.ndarray) -> np.ndarray:
        """Per term: f_o * f_q + f_o + f_q (what the text split balances, as kdt's PartitionNode)."""
        def freq(t):
            return np.bincount(np.searchsorted(terms, t[np.isin(t, terms)]), minlength=len(terms)).astype(np.float64)
        f_o, f_q = freq(self.obj[1]), freq(self.sub[1])
        return f_o * f_q + f_o + f_q


def _append_map(router: GridtRouter, terms, slots, seqs, workers, unit: float):
    """Layout arrays with one new term map appended (its id is the largest, so keys stay sorted)."""
    j = len(router.tmc_ptr) - 1
    order = np.argsort(terms)
    return {
        "tm_key": np.concatenate([router.tm_key, (np.int64(j) << TERM_BITS) | np.asarray(terms, np.int64)[order]]),
        "tm_slot": np.concatenate([router.tm_slot, np.asarray(slots, np.int64)[order]]),
        "tm_seq": np.concatenate([router.tm_seq, np.asarray(seqs, np.int64)[order]]),
        "tmc_ptr": np.append(router.tmc_ptr, router.tmc_ptr[-1] + len(workers)),
        "tmc_worker": np.concatenate([router.tmc_worker, np.asarray(workers, np.int64)]),
        "tm_unit": np.append(router.tm_unit, unit),
    }, j


def _h2_terms(router: GridtRouter, cell: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = router.h2_ptr[cell], router.h2_ptr[cell + 1]
    return router.h2_key[lo:hi] & TERM_MASK, router.h2_seq[lo:hi]


def text_split(router: GridtRouter, cell: int, prof: CellProfile, w_o: int, w_l: int):
    """Cut a space cell's terms (those its subscriptions are indexed under, H2) in two by LPT on
    their loads; the part with fewer subscriptions becomes slot 1, on w_l. Returns (a function
    building the new router, (load before, load of the kept part, load of the moved part), 1), or
    None when the cell has fewer than two terms. The router is built only for an accepted split."""
    terms, seqs = _h2_terms(router, cell)
    if len(terms) < 2:
        return None
    bins = allocate.lpt_spread(prof.term_loads(terms), 2)
    parts = [prof.load(terms[bins == b]) for b in range(2)]
    move = 1 if parts[1][1] <= parts[0][1] else 0
    slots = (bins == move).astype(np.int64)  # slot 0 stays on w_o, slot 1 moves
    unit = float(router.tm_unit.mean()) if len(router.tm_unit) else 1.0
    arrays, j = _append_map(router, terms, slots, seqs, [w_o, w_l], unit)
    cell_worker, cell_tmap = router.cell_worker.copy(), router.cell_tmap.copy()
    cell_worker[cell], cell_tmap[cell] = -1, j
    build = lambda: router.with_layout(cell_worker, cell_tmap, **arrays)  # noqa: E731 - only if accepted
    return build, (prof.load(terms)[0], parts[1 - move][0], parts[move][0]), 1


def text_merge(router: GridtRouter, cell: int, slot: int, into: int, prof: CellProfile):
    """Merge text part `slot` of a cell into its part `into` (on w_l). Returns (a function building
    the new router, (L_a, L_b, L_merged), the merged part's slot in the new router)."""
    j = int(router.cell_tmap[cell])
    lo, hi = router.tm_ptr[j], router.tm_ptr[j + 1]
    terms, slots, seqs = router.tm_key[lo:hi] & TERM_MASK, router.tm_slot[lo:hi], router.tm_seq[lo:hi]
    h2, _ = _h2_terms(router, cell)
    t_a, t_b = np.intersect1d(terms[slots == slot], h2), np.intersect1d(terms[slots == into], h2)
    loads = (prof.load(t_a)[0], prof.load(t_b)[0], prof.load(np.union1d(t_a, t_b))[0])
    workers = router.tmc_worker[router.tmc_ptr[j]:router.tmc_ptr[j + 1]]
    new_slots = np.where(slots == slot, into, slots)
    new_slots = new_slots - (new_slots > slot)
    keep = np.delete(workers, slot)
    target = into - (into > slot)
    cell_worker, cell_tmap = router.cell_worker.copy(), router.cell_tmap.copy()
    if len(keep) == 1:  # one part left: the cell is a space cell again
        cell_worker[cell], cell_tmap[cell] = keep[0], -1
        return (lambda: router.with_layout(cell_worker, cell_tmap, router.tm_key, router.tm_slot, router.tm_seq,
                                           router.tmc_ptr, router.tmc_worker, router.tm_unit)), loads, 0
    arrays, jn = _append_map(router, terms, new_slots, seqs, keep, float(router.tm_unit[j]))
    cell_tmap[cell] = jn
    return (lambda: router.with_layout(cell_worker, cell_tmap, **arrays)), loads, target
