"""The A-Grid router: objects to their cell's partition (filtered by the partition's keyword
summary), query rectangles by neighbour search; fine cells are its migration units (Tornado's
rebalancing moves them, strategies/tornado/adjust.py)."""

from __future__ import annotations

import numpy as np
from numba import njit

from harness.core.events import AND, INSERT, RANGE, Events
from harness.core.grid import UniformGrid
from strategies.base import Pairs, Router
from strategies.tornado.agrid_kernels import (EMPTY, N_HOT, NEVER, neighbour_search, route_points, summary_pairs,
                                              table_insert_min)

# --- migration units (adjusters) ----------------------------------------------------------------


@njit(cache=True)
def _owner_rects(cell_part, owner, nx, ny):
    """Tile the grid into rectangles of cells sharing (partition, owner): greedy in row-major order,
    each rectangle as wide, then as tall, as it can be. A partition whose cells share one owner
    comes back unchanged. Rows: x0, y0, x1, y1, owner."""
    done = np.zeros(nx * ny, np.bool_)
    out = np.empty((nx * ny, 5), np.int64)
    n = 0
    for y in range(ny):
        for x in range(nx):
            c = y * nx + x
            if done[c]:
                continue
            p = cell_part[c]
            w = owner[c]
            x1 = x
            while x1 + 1 < nx and not done[c + x1 + 1 - x] and cell_part[c + x1 + 1 - x] == p \
                    and owner[c + x1 + 1 - x] == w:
                x1 += 1
            y1 = y
            while y1 + 1 < ny:
                base = (y1 + 1) * nx
                ok = True
                for xx in range(x, x1 + 1):
                    if done[base + xx] or cell_part[base + xx] != p or owner[base + xx] != w:
                        ok = False
                        break
                if not ok:
                    break
                y1 += 1
            for yy in range(y, y1 + 1):
                for xx in range(x, x1 + 1):
                    done[yy * nx + xx] = True
            out[n, 0] = x
            out[n, 1] = y
            out[n, 2] = x1
            out[n, 3] = y1
            out[n, 4] = w
            n += 1
    return out[:n]


def _overlap_pairs(new_rect: np.ndarray, new_cell_part: np.ndarray, old_rect: np.ndarray,
                   old_cell_part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(new partition, old partition) pairs that share at least one cell: a rectangle test when the
    pair matrix is small, else the distinct (new, old) labels of the cells."""
    n_new, n_old = len(new_rect), len(old_rect)
    if n_new * n_old <= 4 * len(new_cell_part):
        a, b = new_rect[:, None, :], old_rect[None, :, :]
        ov = (a[..., 0] <= b[..., 2]) & (b[..., 0] <= a[..., 2]) & (a[..., 1] <= b[..., 3]) & (b[..., 1] <= a[..., 3])
        return np.nonzero(ov)
    key = np.unique(new_cell_part.astype(np.int64) * n_old + old_cell_part)
    return key // n_old, key % n_old


# --- router --------------------------------------------------------------------------------------


class AGridRouter(Router):
    """The A-Grid: cell -> partition, partition rectangles (the paper's Partitions Map),
    partition -> worker, and the seq-stamped keyword summaries of each partition."""

    def __init__(self, n_workers: int, grid: UniformGrid, part_rect: np.ndarray, part_worker: np.ndarray,
                 summaries: bool = True, part_cost: np.ndarray | None = None):
        super().__init__(n_workers)
        self.grid = grid
        self.summaries = bool(summaries)
        self.part_cost = np.zeros(len(part_rect)) if part_cost is None else np.asarray(part_cost, np.float64)
        self.sum_table = np.full((16, 2), EMPTY, np.int64)  # (partition << 32 | term, first seq)
        self.sum_count = 0
        self.set_partitions(part_rect, part_worker)

    # partitions ---------------------------------------------------------------------------------

    def set_partitions(self, part_rect: np.ndarray, part_worker: np.ndarray) -> None:
        """Install a tiling (inclusive cell rectangles x0, y0, x1, y1) and rebuild cell -> partition.

        For adjusters: summaries are keyed by partition id, so a partition that takes over cells
        must also receive the summary of their old owner (`copy_summary`, paper section 4.4)."""
        rect = np.ascontiguousarray(part_rect, np.int64).reshape(-1, 4)
        self.part_rect = rect
        self.px0, self.py0, self.px1, self.py1 = (np.ascontiguousarray(rect[:, k]) for k in range(4))
        self.part_worker = np.ascontiguousarray(part_worker, np.int64)
        cells = np.full((self.grid.ny, self.grid.nx), -1, np.int32)
        for pid, (x0, y0, x1, y1) in enumerate(rect.tolist()):
            cells[y0 : y1 + 1, x0 : x1 + 1] = pid
        if (cells < 0).any():
            raise ValueError("partitions do not cover the fine grid")
        self.cell_part = cells.ravel()
        self.hot = np.full(len(rect) * N_HOT, NEVER, np.int64)  # first seq of (partition, hot term)
        part, term, seq = self.summary_entries()
        self._update_hot(part, term, seq)

    def _update_hot(self, part: np.ndarray, term: np.ndarray, seq: np.ndarray) -> None:
        sel = (term < N_HOT) & (part < self.n_partitions)
        np.minimum.at(self.hot, part[sel] * N_HOT + term[sel], seq[sel])

    @property
    def n_partitions(self) -> int:
        return len(self.part_rect)

    # summaries ----------------------------------------------------------------------------------

    def _shift(self) -> int:
        return 65 - len(self.sum_table).bit_length()

    def add_summary_entries(self, keys: np.ndarray, seqs: np.ndarray) -> None:
        """Insert (partition << 32 | term) keys first seen at `seqs`; keeps the earliest seq."""
        if len(keys) == 0:
            return
        need = self.sum_count + len(keys)  # an upper bound: some keys may already be present
        if need * 2 > len(self.sum_table):  # keep the load factor <= 1/2: grow and rehash
            cap = 1 << max(4, int(need * 2 - 1).bit_length())
            old = self.sum_table[self.sum_table[:, 0] != EMPTY]
            self.sum_table = np.full((cap, 2), EMPTY, np.int64)
            self.sum_count = table_insert_min(self.sum_table, old[:, 0].copy(), old[:, 1].copy(), self._shift())
        keys, seqs = np.asarray(keys, np.int64), np.asarray(seqs, np.int64)
        self.sum_count += table_insert_min(self.sum_table, keys, seqs, self._shift())
        self._update_hot(keys >> 32, keys & 0xFFFFFFFF, seqs)

    def summary_entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(partition, term, seq) of every summary entry, sorted by partition then term."""
        live = self.sum_table[self.sum_table[:, 0] != EMPTY]
        k, s = live[:, 0], live[:, 1]
        order = np.argsort(k, kind="stable")
        k, s = k[order], s[order]
        return k >> 32, k & 0xFFFFFFFF, s

    def copy_summary(self, src: int, dst: int) -> None:
        """summary(dst) |= summary(src), seqs kept (paper section 4.4, for shifts and merges)."""
        part, term, seq = self.summary_entries()
        sel = part == src
        self.add_summary_entries((np.int64(dst) << 32) | term[sel], seq[sel])

    def observe_inserts(self, ev: Events, rows: np.ndarray) -> None:
        """Add each range insertion's summary terms to every partition its rectangle overlaps,
        stamped with its seq (the paper's forward propagation, made exact per event)."""
        if not self.summaries or len(rows) == 0:
            return
        rows = np.asarray(rows, np.int64)
        rows = rows[(ev.kind[rows] == INSERT) & (ev.family[rows] == RANGE)]
        pr, pp = self._search(ev, rows, emit_partitions=True)
        keys, seqs = summary_pairs(pr, pp, ev.offsets, ev.values, ev.op, ev.seq, AND)
        self.add_summary_entries(keys, seqs)

    # routing ------------------------------------------------------------------------------------

    def _search(self, ev: Events, rows: np.ndarray, emit_partitions: bool) -> Pairs:
        return neighbour_search(np.asarray(rows, np.int64), ev.xmin, ev.ymin, ev.xmax, ev.ymax, *self.grid.args,
                                 self.cell_part, self.px0, self.py0, self.px1, self.py1, self.part_worker,
                                 self.n_workers, emit_partitions)

    def route_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        rows = np.asarray(rows, np.int64)
        return route_points(rows, ev.x, ev.y, ev.seq, ev.offsets, ev.values, *self.grid.args, self.cell_part,
                             self.part_worker, self.summaries, self.hot, N_HOT, self.sum_table, self._shift())

    def store_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        """Every object to its partition's worker, summaries aside: a snapshot query reaches every
        partition its rectangle overlaps, whatever subscriptions there were when the object came."""
        rows = np.asarray(rows, np.int64)
        return route_points(rows, ev.x, ev.y, ev.seq, ev.offsets, ev.values, *self.grid.args, self.cell_part,
                            self.part_worker, False, self.hot, N_HOT, self.sum_table, self._shift())

    def route_range(self, ev: Events, rows: np.ndarray) -> Pairs:
        return self._search(ev, rows, emit_partitions=False)

    def route_frequent_terms(self, ev: Events, rows: np.ndarray) -> Pairs:
        """A top-k-terms query to every partition its rectangle overlaps (summaries never apply)."""
        return self._search(ev, rows, emit_partitions=False)

    def range_partitions(self, ev: Events, rows: np.ndarray) -> Pairs:
        """(row, partition) pairs: every partition each rectangle overlaps (for adjusters, tests)."""
        return self._search(ev, rows, emit_partitions=True)

    # migration units (strategies/adjust_base.py) --------------------------------------------------

    def units(self, ev: Events, rows: np.ndarray) -> Pairs:
        """Fine cells: an object's cell, every cell a rectangle overlaps (the paper migrates cells)."""
        return self.grid.units(ev, rows)

    def unit_owner(self) -> np.ndarray:
        return self.part_worker[self.cell_part]

    def with_unit_owner(self, owner: np.ndarray) -> AGridRouter:
        """Cells reassigned to `owner`. A partition whose cells all get one worker keeps its
        rectangle (only part_worker changes); one whose cells are spread is cut into rectangles of
        constant owner (`_owner_rects`), so arbitrary per-cell adjusters stay valid, at the price of
        more partitions. Summaries follow the cells (`with_partitions`)."""
        owner = np.asarray(owner, np.int64)
        if owner.shape != (self.grid.n_cells,):
            raise ValueError(f"owner has shape {owner.shape}, expected ({self.grid.n_cells},)")
        first = owner[self.py0 * self.grid.nx + self.px0]  # owner of each partition's top-left cell
        if (owner == first[self.cell_part]).all():
            return self.with_partitions(self.part_rect, first, self.part_cost)
        rects = _owner_rects(self.cell_part.astype(np.int64), owner, self.grid.nx, self.grid.ny)
        old_pid = self.cell_part[rects[:, 1] * self.grid.nx + rects[:, 0]]
        area = (rects[:, 2] - rects[:, 0] + 1) * (rects[:, 3] - rects[:, 1] + 1)
        old_area = (self.px1 - self.px0 + 1) * (self.py1 - self.py0 + 1)
        cost = self.part_cost[old_pid] * area / old_area[old_pid] if len(self.part_cost) == self.n_partitions else None
        return self.with_partitions(rects[:, :4], rects[:, 4], cost)

    def with_partitions(self, part_rect: np.ndarray, part_worker: np.ndarray,
                        part_cost: np.ndarray | None = None) -> AGridRouter:
        """A new router on the same fine grid with another tiling. Each new partition's summary is
        the union of the summaries of every old partition it shares a cell with, seqs kept: the
        paper's "the entire textual summary of X is copied" (section 4.4), applied to whatever
        moved. Queries a worker holds for a cell were summarised in the cell's old partition, so an
        object never misses one; stale extra terms only cost false positives."""
        new = AGridRouter(self.n_workers, self.grid, part_rect, part_worker, self.summaries, part_cost)
        area = int(((new.px1 - new.px0 + 1) * (new.py1 - new.py0 + 1)).sum())
        if area != self.grid.n_cells:  # set_partitions rejects gaps; equal area then rules out overlaps
            raise ValueError(f"partitions overlap: their areas sum to {area} cells, the grid has {self.grid.n_cells}")
        part, term, seq = self.summary_entries()
        if len(part) == 0:
            return new
        ni, oi = _overlap_pairs(new.part_rect, new.cell_part, self.part_rect, self.cell_part.astype(np.int64))
        bounds = np.searchsorted(part, np.arange(self.n_partitions + 1))
        start, count = bounds[oi], np.diff(bounds)[oi]
        total = int(count.sum())
        ends = np.cumsum(count)
        idx = np.repeat(start - (ends - count), count) + np.arange(total)
        keys = (np.repeat(np.asarray(ni, np.int64), count) << 32) | term[idx]
        new.add_summary_entries(keys, seq[idx])
        return new

    def describe(self) -> dict:
        g = self.grid
        cw, ch = 1.0 / g.inv_cw, 1.0 / g.inv_ch
        part, _, _ = self.summary_entries()
        n_terms = np.bincount(part, minlength=self.n_partitions) if len(part) else np.zeros(self.n_partitions, int)
        parts = []
        for pid, (x0, y0, x1, y1) in enumerate(self.part_rect.tolist()):
            parts.append({
                "pid": pid, "worker": int(self.part_worker[pid]), "cells": [x0, y0, x1, y1],
                "region": [g.x0 + x0 * cw, g.y0 + y0 * ch, g.x0 + (x1 + 1) * cw, g.y0 + (y1 + 1) * ch],
                "cost": float(self.part_cost[pid]) if pid < len(self.part_cost) else 0.0,
                "summary_terms": int(n_terms[pid]),
            })
        return {**super().describe(), "grid": [g.nx, g.ny], "cell_km": [cw, ch], "summaries": self.summaries,
                "partitions": parts}


