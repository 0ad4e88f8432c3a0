"""gridt: PS2Stream's dispatcher index (Chen et al., Section IV-C, "Index Structure on Dispatchers").

A uniform grid whose cells carry the kdt-tree's partitioning, so the dispatcher never walks the
tree. Each cell has two term -> worker maps:

- H1 (every term -> worker), looked up by queries. A cell inside a space leaf maps every term to
  that leaf's worker (`cell_worker[c] >= 0`); a cell inside a text-split region maps terms to the
  workers of the region's text leaves (`cell_tmap[c]` = id of a term map shared by all cells
  covered by the same set of text leaves, so a later adjuster can give one cell its own map).
- H2 (terms that occur in queries of the cell -> worker), looked up by objects: an object goes to
  the workers H2 gives for its terms and is dropped when none of its terms is in H2, because then
  no query of its cell can match it.

Queries are indexed under the least frequent keyword of each conjunct: an AND query under its
largest term id, an OR query under each keyword. Both maps are flat sorted int64 keys (owner << 32
| term, owner = cell for H2, term map for H1) with CSR pointers per owner, searched by binary
search in numba; objects test the 64 most frequent term ids in a dense per-cell seq table first
(most object terms are frequent; a binary search per term would dominate routing). A per-cell
filter comes before both: a bit per frequent term, and 512 bits for the others (term mod 512),
so that a term the cell has no query for, the common case, costs one bit test in a small table.

Growth with subscriptions (`observe_inserts`): each (cell, routing term) pair that a new query
brings enters H2 with the seq of the first query that brought it; an object at seq s uses only
entries with seq < s (a query inserted after the object cannot match it). A term that a text
region's map does not know yet is assigned at its first query, in seq order, to the least loaded
of the region's text workers (load = the fit-time partition load plus, per new term, the region's
mean load per term), and keeps that worker for good, so insertions, deletions and objects agree.
H2 never shrinks on deletion (a documented superset). A query whose term map entry is missing
because `observe_inserts` never saw it falls back to a fixed hash of the term over the region's
text workers; only the contract (observe before routing) makes object routing exact.

This module is the router: the index's state, its growth policy and migration units. Its compiled
kernels are in gridt_route.py (routing) and gridt_grow.py (H2 growth), its key arrays in
gridt_keys.py.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from harness.core import kernels
from harness.core.events import INSERT, OBJECT, RANGE, SNAPSHOT, TERMS, Events, csr_take, splitmix64
from strategies.base import Pairs, Router
from harness.core.grid import UniformGrid
from strategies.routers.live_terms import merge_first_seqs
from strategies.ps2stream.gridt_grow import assign_new_terms, expand_h2_keys, merge_h2, object_tables
from strategies.ps2stream.gridt_keys import (
    TERM_BITS,
    TERM_MASK,
    first_per_key,
    owner_ptr,
    slots_of_workers,
    sorted_find,
    sorted_insert,
)
from strategies.ps2stream.gridt_route import (
    FILTER_WORDS,
    fill_points_h2,
    fill_rects_h1,
    points_h2_bound,
    rect_workers,
    rects_h1_bound,
)

WIDE_SHARE = 0.5  # a subscription over more than this share of the cells is wide (_observe_wide) ...
WIDE_MIN_CELLS = 1024  # ... and over more cells than this (a coarse grid keeps its exact H2 entries)
OBSERVE_CHUNK_BITS = 40  # observe_inserts packs a query's position in its chunk into this many bits at most


class GridtRouter(Router):
    """The gridt index over a cell -> (worker | term map) partition; see the module docstring.

    The partition is explicit and movable: `cell_worker` (space cells), `cell_tmap` plus the term
    maps (text cells; `tmc_*` lists each map's workers). H1 of text cells is `tm_key` = term map
    << 32 | term (sorted) -> `tm_worker`, with the seq each entry appeared at (`tm_seq`; fit-time
    entries: the minimum int64); H2 is `h2_key` = cell << 32 | term (sorted) -> `h2_worker`, with
    `h2_seq`. `tm_ptr` / `h2_ptr` are their per-owner CSR pointers, `h2_low` and `h2_filter` the
    tables of the object fast path. `plan` holds the kdt-tree leaves the router was built from (for describe and
    adjusters), not dispatcher state. `tm_slot` gives each H1 entry's position in its map's worker
    list (its slot): the migration units are space cells and the slots of text cells (see units).
    """

    def __init__(self, n_workers: int, grid: UniformGrid, cell_worker: np.ndarray, cell_tmap: np.ndarray,
                 tm_ptr: np.ndarray, tm_term: np.ndarray, tm_worker: np.ndarray, tmc_ptr: np.ndarray,
                 tmc_worker: np.ndarray, tm_unit: np.ndarray, worker_load: np.ndarray, plan: dict | None = None):
        """Term maps come as CSR: map j holds the sorted terms tm_term[tm_ptr[j]:tm_ptr[j+1]]."""
        super().__init__(n_workers)
        i64 = lambda a: np.ascontiguousarray(a, np.int64)
        self.grid = grid
        self.cell_worker = i64(cell_worker)
        self.cell_tmap = i64(cell_tmap)
        if np.any((self.cell_worker < 0) == (self.cell_tmap < 0)):
            raise ValueError("gridt: every cell needs a worker or a term map, not both")
        tm_ptr = i64(tm_ptr)
        n_maps = len(tm_ptr) - 1
        owner = np.repeat(np.arange(n_maps, dtype=np.int64), np.diff(tm_ptr))
        self.tm_key = (owner << TERM_BITS) | i64(tm_term)
        if np.any(np.diff(self.tm_key) <= 0):
            raise ValueError("gridt: term map terms must be sorted and distinct")
        self.tm_worker = i64(tm_worker)
        self.tm_seq = np.full(len(self.tm_key), np.iinfo(np.int64).min, np.int64)
        self.tm_ptr = owner_ptr(self.tm_key, n_maps)
        self.tmc_ptr = i64(tmc_ptr)
        self.tmc_worker = i64(tmc_worker)
        if np.any(np.diff(self.tmc_ptr) <= 0):
            raise ValueError("gridt: every term map needs at least one worker")
        self.tm_slot = slots_of_workers(owner, self.tm_worker, self.tmc_ptr, self.tmc_worker)
        self.tm_unit = np.ascontiguousarray(tm_unit, np.float64)
        self.worker_load = np.array(worker_load, np.float64)
        self.h2_key = np.zeros(0, np.int64)
        self.h2_worker = np.zeros(0, np.int64)
        self.h2_seq = np.zeros(0, np.int64)
        # routing terms of subscriptions covering most of the grid (a kNN subscription without a
        # ball covers all of it): an object holding one, after the subscription's seq, goes to
        # every worker instead of H2 holding the term in every cell (sorted by term; first seq)
        self.wide_term = np.zeros(0, np.int64)
        self.wide_seq = np.zeros(0, np.int64)
        self._index_h2()
        self.plan = plan or {}
        self._unit_cache: dict = {}

    @property
    def has_text_cells(self) -> bool:
        return bool((self.cell_tmap >= 0).any())

    @property
    def tm_term(self) -> np.ndarray:
        return self.tm_key & TERM_MASK

    @property
    def h2_term(self) -> np.ndarray:
        return self.h2_key & TERM_MASK

    def _index_h2(self) -> None:
        self.h2_ptr = owner_ptr(self.h2_key, self.grid.n_cells)
        self.h2_low, self.h2_filter = object_tables(self.h2_ptr, self.h2_key, self.h2_seq)
        self.h2_max_seq = int(self.h2_seq.max()) if len(self.h2_seq) else int(np.iinfo(np.int64).min)
        self._age_h2()
        self.__dict__.setdefault("_unit_cache", {}).pop("h2_unit", None)

    def _age_h2(self) -> None:
        """Every entry so far becomes old: `h2_old` holds the frequent-term bits of each cell's
        entries with seq <= h2_old_seq (an upper bound of their seqs), which objects after it test
        without the seq table."""
        self.h2_old = np.ascontiguousarray(self.h2_filter[::FILTER_WORDS])
        self.h2_old_seq = self.h2_max_seq

    # -- growth ------------------------------------------------------------------------------------

    def observe_inserts(self, ev: Events, rows: np.ndarray) -> None:
        rows = np.asarray(rows, np.int64)
        rows = rows[(ev.kind[rows] == INSERT) & (ev.family[rows] == RANGE)]
        if len(rows) == 0:
            return
        cell_bits = max(self.grid.n_cells - 1, 1).bit_length()
        # each expand_h2_keys key packs (cell, 32-bit term, position in the chunk) into 63 bits
        chunk = 1 << min(63 - cell_bits - 32, OBSERVE_CHUNK_BITS)
        if chunk < 2:
            raise ValueError(f"gridt: a grid of {self.grid.n_cells} cells exceeds the 63-bit keys of H2 growth "
                             f"(at most 2^30 cells)")
        self._age_h2()
        cells = self.grid.cell_ranges(ev.xmin[rows], ev.ymin[rows], ev.xmax[rows], ev.ymax[rows])
        covered = (cells[:, 1] - cells[:, 0] + 1) * (cells[:, 3] - cells[:, 2] + 1)
        wide = covered > max(WIDE_SHARE * self.grid.n_cells, WIDE_MIN_CELLS)
        if wide.any():
            self._observe_wide(ev, rows[wide])
            rows = rows[~wide]
        for start in range(0, len(rows), chunk):
            self._observe_chunk(ev, rows[start:start + chunk])
        self._unit_cache.pop("h2_unit", None)

    def _observe_wide(self, ev: Events, rows: np.ndarray) -> None:
        """Record the routing terms of subscriptions covering most of the grid, each with the
        first seq at which one appeared (objects before it need not be broadcast)."""
        from strategies.load import routing_terms

        r, t = routing_terms(ev, rows)
        self.wide_term, self.wide_seq = merge_first_seqs(self.wide_term, self.wide_seq, t, ev.seq[r])

    def _observe_chunk(self, ev: Events, rows: np.ndarray) -> None:
        """H2 entries for the (cell, routing term) pairs of the insertions `rows` (see merge_h2)."""
        row_bits = max(len(rows) - 1, 1).bit_length()
        keys = np.sort(expand_h2_keys(rows, ev.op, ev.offsets, ev.values, ev.xmin, ev.ymin, ev.xmax, ev.ymax,
                                      *self.grid.args, row_bits))
        key, worker, seq, ptr = merge_h2(self.h2_ptr, self.h2_key, self.h2_worker, self.h2_seq, keys,
                                         row_bits, ev.seq[rows], self.cell_worker, self.h2_low, self.h2_filter)
        text = np.flatnonzero(worker < 0)  # new entries of text cells: their term's H1 worker
        if len(text):
            worker[text] = self._h1_workers(self.cell_tmap[key[text] >> TERM_BITS], key[text] & TERM_MASK, seq[text])
        self.h2_key, self.h2_worker, self.h2_seq, self.h2_ptr = key, worker, seq, ptr
        self.h2_max_seq = max(self.h2_max_seq, int(ev.seq[rows].max()))

    def _h1_workers(self, tmap: np.ndarray, terms: np.ndarray, seqs: np.ndarray) -> np.ndarray:
        """H1 workers of (term map, term) pairs, assigning the terms a map does not know yet."""
        keys = (tmap << TERM_BITS) | terms
        found = sorted_find(self.tm_key, keys)
        missing = found < 0
        if missing.any():
            k, s = first_per_key(keys[missing], seqs[missing])
            order = np.lexsort((k, s))  # first appearance decides, in seq order
            pos = assign_new_terms(k[order] >> TERM_BITS, self.tmc_ptr, self.tmc_worker, self.worker_load,
                                   self.tm_unit)
            back = np.empty_like(order)
            back[order] = np.arange(len(order))
            pos = pos[back]
            slot = pos - self.tmc_ptr[k >> TERM_BITS]
            self.tm_slot = np.insert(self.tm_slot, np.searchsorted(self.tm_key, k), slot)
            self.tm_key, (self.tm_worker, self.tm_seq) = sorted_insert(
                self.tm_key, (self.tm_worker, self.tm_seq), k, (self.tmc_worker[pos], s))
            self.tm_ptr = owner_ptr(self.tm_key, len(self.tmc_ptr) - 1)
            found = sorted_find(self.tm_key, keys)
        return self.tm_worker[found]

    # -- routing -----------------------------------------------------------------------------------

    def route(self, ev: Events) -> Pairs:
        """Objects by H2 and queries by H1, written into one output (no concatenation); snapshot
        queries by `snapshot_targets`."""
        objs, qs = self.objects_and_queries(ev)
        snap = ev.kind[qs] == SNAPSHOT
        if not snap.any():
            return self._targets(ev, objs, qs, False)
        ro, wo = self._targets(ev, objs, qs[~snap], False)
        rs, ws = self.snapshot_targets(ev, qs[snap])
        return np.concatenate([ro, rs]), np.concatenate([wo, ws])

    def route_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        return self._targets(ev, np.asarray(rows, np.int64), np.zeros(0, np.int64), False)

    def route_range(self, ev: Events, rows: np.ndarray) -> Pairs:
        rows = np.asarray(rows, np.int64)
        snap = ev.kind[rows] == SNAPSHOT
        if snap.any():
            rc, wc = self._targets(ev, np.zeros(0, np.int64), rows[~snap], False)
            rs, ws = self.snapshot_targets(ev, rows[snap])
            return np.concatenate([rc, rs]), np.concatenate([wc, ws])
        return self._targets(ev, np.zeros(0, np.int64), rows, False)

    # -- snapshot queries (SSTD's extension of PS2, Sec. 7.1) ---------------------------------------
    #
    # SSTD ran PS2 with snapshot queries thus: "If o updates the queries on both N1 and N2, o will
    # be sent to both workers, but only one worker selected at random will store o ... q will be
    # sent to both N1 and N2". Here an object also goes to one keeper in its cell (the cell's
    # worker, or in a text cell one of its term map's workers by a hash of the object id: SSTD's
    # random choice made deterministic), whatever H2 holds; a snapshot query goes to every worker
    # of every cell it overlaps, the keeper among them. H2's filtering and the term maps' growth
    # then change nothing a snapshot query sees.

    def _keepers(self, ev: Events, rows: np.ndarray) -> np.ndarray:
        cell = self.grid.cells_of(ev.x[rows], ev.y[rows])
        worker = self.cell_worker[cell].copy()
        text = worker < 0
        if text.any():
            tmap = self.cell_tmap[cell[text]]
            n_slots = self.tmc_ptr[tmap + 1] - self.tmc_ptr[tmap]
            pick = (splitmix64(ev.id[rows[text]]) % n_slots.astype(np.uint64)).astype(np.int64)
            worker[text] = self.tmc_worker[self.tmc_ptr[tmap] + pick]
        return worker

    def store_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        """Where H2 sends each object (subscriptions still match there), and its keeper."""
        rows = np.asarray(rows, np.int64)
        r, w = self.route_objects(ev, rows)
        r = np.concatenate([r, rows])
        w = np.concatenate([w, self._keepers(ev, rows)])
        key = np.unique(r * self.n_workers + w)
        return key // self.n_workers, key % self.n_workers

    def snapshot_targets(self, ev: Events, rows: np.ndarray) -> Pairs:
        """Every worker of every cell a snapshot query's rectangle overlaps, once, by row."""
        return rect_workers(np.unique(np.asarray(rows, np.int64)), ev.xmin, ev.ymin, ev.xmax, ev.ymax,
                            *self.grid.args, self.cell_worker, self.cell_tmap, self.tmc_ptr, self.tmc_worker,
                            self.n_workers)

    route_frequent_terms = snapshot_targets  # top-k-terms queries (SSTD's STQ and CTQ reports): a snapshot's rule

    def _targets(self, ev: Events, objs: np.ndarray, qs: np.ndarray, units: bool) -> Pairs:
        """(row, worker) pairs of objects `objs` (fill_points_h2) and range queries `qs`
        (fill_rects_h1), or with `units` (row, unit) pairs from the same kernels run on unit ids."""
        if units:
            _, unit_base, n_out = self.unit_layout()
            cell_obj = np.where(self.cell_worker >= 0, np.arange(self.grid.n_cells, dtype=np.int64), -1)
            cell_q = np.where(self.cell_tmap < 0, np.arange(self.grid.n_cells, dtype=np.int64), -1)
            h2_target = self._h2_unit()
        else:  # unit_base unread
            unit_base, n_out, cell_obj, cell_q, h2_target = self.cell_tmap, self.n_workers, self.cell_worker, \
                self.cell_worker, self.h2_worker
        if units:  # exact bounds: n_out (the unit count) may be large
            bound = (points_h2_bound(objs, ev.offsets, n_out)
                     + rects_h1_bound(qs, ev.op, ev.offsets, ev.xmin, ev.ymin, ev.xmax, ev.ymax, *self.grid.args, n_out))
        else:  # a space cell's object has one worker, any other event at most n_workers: pages never written
            bound = len(objs) * (n_out if self.has_text_cells else 1) + len(qs) * n_out  # cost nothing
        out_r, out_w = np.empty(bound + 1, np.int64), np.empty(bound + 1, np.int64)  # + 1: a discarded write
        end = fill_points_h2(objs, ev.seq, ev.x, ev.y, ev.offsets, ev.values, *self.grid.args, cell_obj, self.h2_ptr,
                             self.h2_key, h2_target, self.h2_seq, self.h2_low, self.h2_filter, self.h2_old,
                             self.h2_old_seq, n_out, out_r, out_w, 0)
        end = fill_rects_h1(qs, ev.op, ev.offsets, ev.values, ev.xmin, ev.ymin, ev.xmax, ev.ymax, *self.grid.args,
                            cell_q, self.cell_tmap, self.tm_ptr, self.tm_key, self.tm_slot, self.tmc_ptr,
                            self.tmc_worker, unit_base, units, n_out, out_r, out_w, end)
        out_r, out_w = out_r[:end], out_w[:end]
        if len(self.wide_term) and len(objs):
            out_r, out_w = self._broadcast_wide(ev, objs, out_r, out_w, n_out)
        return out_r, out_w

    def _broadcast_wide(self, ev: Events, objs: np.ndarray, out_r, out_w, n_out: int):
        """Objects holding a wide subscription's routing term (after its seq) go to every worker
        (or unit): their other targets are replaced by all of them."""
        o_off, o_terms = csr_take(ev.offsets, ev.values, objs)
        owner = np.repeat(objs, np.diff(o_off))
        at = np.minimum(np.searchsorted(self.wide_term, o_terms), len(self.wide_term) - 1)
        hit = (self.wide_term[at] == o_terms) & (self.wide_seq[at] < ev.seq[owner])
        every = np.unique(owner[hit])
        if len(every) == 0:
            return out_r, out_w
        keep = ~np.isin(out_r, every)
        return (np.r_[out_r[keep], np.repeat(every, n_out)],
                np.r_[out_w[keep], np.tile(np.arange(n_out, dtype=np.int64), len(every))])

    # -- migration units (strategies/adjust_base.py) ------------------------------------------------
    #
    # A space cell c is unit c. A text cell c has one unit per slot of its term map (slot k = the
    # k-th entry of the map's worker list; each term entry records its slot in `tm_slot`): slot 0 is
    # unit c, slot k >= 1 is unit_base[c] + k - 1, numbered after the n_cells cell ids in cell
    # order. So every unit id names a real part and the count is n_cells plus the extra slots.
    # Reassigning the slots of one cell gives it its own copy of its (possibly shared) term map,
    # with the slot -> worker list replaced; H2 entries follow their cell's or term's new worker.

    def unit_layout(self) -> tuple[np.ndarray, np.ndarray, int]:
        """(slots per cell, unit id of each cell's slot 1, number of units)."""
        if "layout" not in self._unit_cache:
            n = self.grid.n_cells
            nslot = np.ones(n, np.int64)
            text = self.cell_tmap >= 0
            nslot[text] = np.diff(self.tmc_ptr)[self.cell_tmap[text]]
            extra = nslot - 1
            base = n + np.cumsum(extra) - extra
            self._unit_cache["layout"] = (nslot, base, int(n + extra.sum()))
        return self._unit_cache["layout"]

    def unit_of(self, cell: np.ndarray, slot: np.ndarray) -> np.ndarray:
        """Unit id of (cell, slot) pairs."""
        cell = np.asarray(cell, np.int64)
        slot = np.asarray(slot, np.int64)
        _, base, _ = self.unit_layout()
        return np.where(slot == 0, cell, base[cell] + slot - 1)

    def unit_cells(self) -> tuple[np.ndarray, np.ndarray]:
        """(cell, slot) of every unit (index = unit id)."""
        nslot, base, n_units = self.unit_layout()
        n = self.grid.n_cells
        cell = np.empty(n_units, np.int64)
        slot = np.zeros(n_units, np.int64)
        cell[:n] = np.arange(n)
        extra = nslot - 1
        owners = np.repeat(np.arange(n, dtype=np.int64), extra)
        cell[n:] = owners
        slot[n:] = np.arange(n_units - n) - (base[owners] - n) + 1
        return cell, slot

    def term_slots(self, tmap: np.ndarray, terms: np.ndarray) -> np.ndarray:
        """Slot of (term map, term) pairs: the map entry's, else the hash fallback of fill_rects_h1."""
        tmap = np.asarray(tmap, np.int64)
        terms = np.asarray(terms, np.int64)
        found = sorted_find(self.tm_key, (tmap << TERM_BITS) | terms)
        fallback = terms % np.diff(self.tmc_ptr)[tmap]
        if len(self.tm_slot) == 0:
            return fallback
        return np.where(found >= 0, self.tm_slot[np.maximum(found, 0)], fallback)

    def unit_owner(self) -> np.ndarray:
        cell, slot = self.unit_cells()
        j = self.cell_tmap[cell]
        text = j >= 0
        owner = self.cell_worker[cell].copy()
        owner[text] = self.tmc_worker[self.tmc_ptr[j[text]] + slot[text]]
        return owner

    def _h2_unit(self) -> np.ndarray:
        """Unit of each H2 entry: its cell, or in a text cell the slot of its term."""
        if "h2_unit" not in self._unit_cache:
            cells = self.h2_key >> TERM_BITS
            j = self.cell_tmap[cells]
            text = j >= 0
            slot = np.zeros(len(cells), np.int64)
            slot[text] = self.term_slots(j[text], self.h2_key[text] & TERM_MASK)
            self._unit_cache["h2_unit"] = self.unit_of(cells, slot)
        return self._unit_cache["h2_unit"]

    def units(self, ev: Events, rows: np.ndarray) -> Pairs:
        """Objects: the units fill_points_h2 would deliver them for (the same kernel, run on unit
        ids); queries: fill_rects_h1 in its units mode. So route == owners(units) exactly, objects included."""
        rows = np.asarray(rows, np.int64)
        is_obj = ev.kind[rows] == OBJECT
        qs = rows[~is_obj]
        wide = (ev.kind[qs] == SNAPSHOT) | (ev.family[qs] == TERMS)  # routed by snapshot_targets
        r, u = self._targets(ev, rows[is_obj], qs[(ev.family[qs] == RANGE) & ~wide], True)
        if not wide.any():
            return r, u
        rs, us = self._snapshot_units(ev, qs[wide])
        return np.concatenate([r, rs]), np.concatenate([u, us])

    def _snapshot_units(self, ev: Events, rows: np.ndarray) -> Pairs:
        """Every unit (slot) of every cell the rectangles overlap: `snapshot_targets` on units."""
        r, c = kernels.rect_cells(np.asarray(rows, np.int64), ev.xmin, ev.ymin, ev.xmax, ev.ymax, *self.grid.args)
        nslot, _, _ = self.unit_layout()
        n = nslot[c]
        slot = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        return np.repeat(r, n), self.unit_of(np.repeat(c, n), slot)

    def with_unit_owner(self, owner: np.ndarray) -> GridtRouter:
        """Space cells take their unit's worker; text cells that share a term map and get the same
        slot -> worker list share one new map (a copy of the old map's entries)."""
        owner = np.asarray(owner, np.int64)
        nslot, base, n_units = self.unit_layout()
        if owner.shape != (n_units,) or (n_units and (owner.min() < 0 or owner.max() >= self.n_workers)):
            raise ValueError(f"gridt: with_unit_owner needs {n_units} workers in [0, {self.n_workers})")
        n = self.grid.n_cells
        space = self.cell_tmap < 0
        cell_worker = np.where(space, owner[:n], -1)
        text = np.flatnonzero(~space)
        if len(text) == 0:
            return self.with_layout(cell_worker, self.cell_tmap, self.tm_key, self.tm_slot, self.tm_seq, self.tmc_ptr,
                                    self.tmc_worker, self.tm_unit)
        ns = nslot[text]
        rows = np.full((len(text), int(ns.max()) + 1), -1, np.int64)  # old map, then the slots' workers
        rows[:, 0] = self.cell_tmap[text]
        rows[:, 1] = owner[text]
        for k in range(1, int(ns.max())):
            has = ns > k
            rows[has, k + 1] = owner[base[text[has]] + k - 1]
        groups, inv = np.unique(rows, axis=0, return_inverse=True)
        cell_tmap = np.full(n, -1, np.int64)
        cell_tmap[text] = inv.ravel()
        old = groups[:, 0]
        g_slots = np.diff(self.tmc_ptr)[old]
        tmc_ptr = np.concatenate([[0], np.cumsum(g_slots)]).astype(np.int64)
        worker_cols = groups[:, 1:]
        tmc_worker = worker_cols[np.arange(worker_cols.shape[1]) < g_slots[:, None]]
        lengths = np.diff(self.tm_ptr)[old]
        start = np.repeat(self.tm_ptr[old] - (np.cumsum(lengths) - lengths), lengths)
        idx = start + np.arange(int(lengths.sum()), dtype=np.int64)
        tm_key = (np.repeat(np.arange(len(groups), dtype=np.int64), lengths) << TERM_BITS) | (self.tm_key[idx]
                                                                                            & TERM_MASK)
        return self.with_layout(cell_worker, cell_tmap, tm_key, self.tm_slot[idx], self.tm_seq[idx], tmc_ptr,
                                tmc_worker, self.tm_unit[old])

    def with_layout(self, cell_worker, cell_tmap, tm_key, tm_slot, tm_seq, tmc_ptr, tmc_worker,
                    tm_unit) -> GridtRouter:
        """A copy with a new cell -> (worker | term map) layout, term maps given by their sorted keys
        (map << 32 | term), slots, seqs and slot -> worker lists. H2 keeps its entries and seqs; each
        entry's worker is recomputed (its space cell's worker, or its term's slot's worker), so
        objects follow the subscriptions wherever the layout put them. Used by with_unit_owner and
        by the adjusters' split/merge (strategies/ps2stream/adjust.py)."""
        i64 = lambda a: np.array(a, np.int64)  # (copies: routers never share mutable state)
        new = copy.copy(self)
        new.cell_worker, new.cell_tmap = i64(cell_worker), i64(cell_tmap)
        new.tm_key, new.tm_slot, new.tm_seq = i64(tm_key), i64(tm_slot), i64(tm_seq)
        new.tmc_ptr, new.tmc_worker = i64(tmc_ptr), i64(tmc_worker)
        new.tm_unit = np.array(tm_unit, np.float64)
        n_maps = len(new.tmc_ptr) - 1
        if np.any((new.cell_worker < 0) & (new.cell_tmap < 0)) or np.any(new.cell_tmap >= n_maps):
            raise ValueError("gridt: every cell needs a worker or an existing term map")
        if np.any(np.diff(new.tmc_ptr) <= 0) or np.any(np.diff(new.tm_key) <= 0):
            raise ValueError("gridt: term maps need workers and sorted, distinct keys")
        maps = new.tm_key >> TERM_BITS
        if len(maps) and (maps[-1] >= n_maps or np.any(new.tm_slot < 0)
                          or np.any(new.tm_slot >= np.diff(new.tmc_ptr)[maps])):
            raise ValueError("gridt: a term map entry names a missing map or slot")
        new.tm_ptr = owner_ptr(new.tm_key, n_maps)
        new.tm_worker = new.tmc_worker[new.tmc_ptr[maps] + new.tm_slot]
        new.worker_load = self.worker_load.copy()
        new.plan = dict(self.plan)
        new._unit_cache = {}
        new.h2_key, new.h2_seq = self.h2_key.copy(), self.h2_seq.copy()
        cells = new.h2_key >> TERM_BITS
        workers = new.cell_worker[cells]
        text = workers < 0
        j = new.cell_tmap[cells[text]]
        workers[text] = new.tmc_worker[new.tmc_ptr[j] + new.term_slots(j, new.h2_key[text] & TERM_MASK)]
        new.h2_worker = workers
        new._index_h2()
        return new

    # -- reporting ---------------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        n_maps = len(self.tm_ptr) - 1
        return {
            **super().describe(),
            "grid": [self.grid.nx, self.grid.ny],
            "cell_worker": self.cell_worker.tolist(),  # -1: a text cell, see cell_tmap
            "cell_tmap": self.cell_tmap.tolist(),
            "term_maps": [
                {"workers": self.tmc_worker[self.tmc_ptr[j]:self.tmc_ptr[j + 1]].tolist(),
                 "terms": int(self.tm_ptr[j + 1] - self.tm_ptr[j])}
                for j in range(n_maps)
            ],
            "text_cells": int((self.cell_tmap >= 0).sum()),
            "h1_entries": len(self.tm_key),
            "h2_entries": len(self.h2_key),
            **self.plan,
        }
