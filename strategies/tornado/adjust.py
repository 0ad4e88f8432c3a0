"""Tornado's load adjustment of the A-Grid (Mahmood et al., Tornado, sections 4.2 to 4.4).

After each epoch (our reporting period) the adjuster reads the per-fine-cell statistics, takes
the costliest partition X and weighs the paper's incremental operations; the number of
partitions and the partition -> worker map never change, only rectangles move:

- split/merge (section 4.2, Fig. 3): X splits at the cut minimising |cost(X1) - cost(X2)|, found
  from X's row and column aggregates in O(m + n) (section 4.3, `best_split`); two mergeable
  partitions Y, Z (sharing an entire side, so Y u Z is a rectangle; neither is X) merge into Y, and
  Z's worker, now free, hosts X2 (the half with fewer queries, notes A13). C_r = Eq. 4,
  C_t = beta (queryCount(X2) + queryCount(Z)) = Eq. 5.
- horizontal / vertical shift (Fig. 4a, b): X gives strips along an entirely shared side to its
  neighbour B (both stay rectangles, notes A12). Decided, as the paper's routing unit does, on the
  estimates C_r = cost(X) - (cost(X) + cost(B)) / 2 and C_t = beta queryCount(X) C_r / cost(X);
  then the strips are moved one by one until the two costs are as near equal as they get.
- corner shift (Fig. 4c, the L re-cut of notes A12): B touches X along part of one of X's sides,
  aligned with one end of it, so X u B is an L; X gives B the block of X spanning B's extent and
  the L is re-cut the other way (at most 8 per partition, no free coordinate, exact C_r and C_t).

Tornado picks the operation with the largest C_r among those with C_r > C_t, at most one per
epoch (section 4.2). Costs are per fine cell: the monitor's `checks` (the workers' work per
object, 1 + candidate checks, i.e. Eq. 1 plus the object count) plus the cell's query updates,
the additive terms the initial partitioning (`agrid_build.cell_costs`) also uses. queryCount of a
region = the sum of its cells' stored queries (the paper's query aggregates, notes A23), so beta
is a cost (work units) per transferred query-cell posting, compared with one epoch's C_r. New
partitions inherit the summaries of the cells they take over
(`AGridRouter.with_partitions`, section 4.4). Decisions: ADR-0013, ADR-0014;
paper: ../shared/papers/tornado.txt; the notes A12, A13, A23: ../shared/papers/notes/tornado.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from strategies.adjust_base import (
    Adjuster,
    EpochStats,
    MigrationPlan,
    moves_between,
)
from strategies.tornado.agrid_router import AGridRouter
from strategies.base import Router

COST_COLUMNS = ("checks", "load", "busy_s")
SIDES = ("right", "left", "below", "above")


# --- statistics ----------------------------------------------------------------------------------


def cell_stats(stats: EpochStats, n_cells: int, cost: str = "checks") -> tuple[np.ndarray, np.ndarray]:
    """(cost, queryCount) per fine cell from the epoch's unit statistics (unit = fine cell id).

    cost "checks": checks + updates (the monitor's checks are the work per object, 1 + candidate
    checks: Eq. 1 plus the objects; updates add the insertion work, as fit's cell costs do);
    "load": the monitor's load column (PS2Stream Definition 3); "busy_s": measured time."""
    if cost not in COST_COLUMNS:
        raise ValueError(f"tornado: unknown cost {cost!r}; valid: {', '.join(COST_COLUMNS)}")
    u = stats.units
    if len(u) == 0:
        return np.zeros(n_cells), np.zeros(n_cells)
    unit = u["unit"].to_numpy(np.int64)
    ok = (unit >= 0) & (unit < n_cells)
    value = u["checks"].to_numpy(np.float64) + u["updates"].to_numpy(np.float64) if cost == "checks" \
        else u[cost].to_numpy(np.float64)
    # summed over workers like adjust_base.unit_table, by bincount (the groupby costs 10x more on 1M cells)
    c = np.bincount(unit[ok], weights=value[ok], minlength=n_cells)
    q = np.bincount(unit[ok], weights=u["queries"].to_numpy(np.float64)[ok], minlength=n_cells)
    return c, q


class Aggregates:
    """Summed-area table of a per-cell quantity: the sum over any cell rectangle in O(1)."""

    def __init__(self, values: np.ndarray, nx: int, ny: int):
        self.grid2d = np.asarray(values, np.float64).reshape(ny, nx)
        self.sat = np.zeros((ny + 1, nx + 1))
        self.sat[1:, 1:] = self.grid2d.cumsum(axis=0).cumsum(axis=1)

    def sum(self, rects: np.ndarray) -> np.ndarray | float:
        """Sum over inclusive rectangles x0, y0, x1, y1 (one (4,) or an (n, 4) array)."""
        r = np.asarray(rects, np.int64)
        x0, y0, x1, y1 = r[..., 0], r[..., 1], r[..., 2], r[..., 3]
        s = self.sat
        return s[y1 + 1, x1 + 1] - s[y0, x1 + 1] - s[y1 + 1, x0] + s[y0, x0]

    def columns(self, rect) -> np.ndarray:
        """Column aggregates of a rectangle (section 4.3): one sum per column, left to right."""
        x0, y0, x1, y1 = (int(v) for v in rect)
        return self.grid2d[y0 : y1 + 1, x0 : x1 + 1].sum(axis=0)

    def rows(self, rect) -> np.ndarray:
        """Row aggregates of a rectangle: one sum per row, top to bottom."""
        x0, y0, x1, y1 = (int(v) for v in rect)
        return self.grid2d[y0 : y1 + 1, x0 : x1 + 1].sum(axis=1)


# --- the split position (section 4.3) ------------------------------------------------------------


def best_split(col_agg: np.ndarray, row_agg: np.ndarray) -> tuple[int, int, float, float] | None:
    """The cut minimising |cost(X1) - cost(X2)| over every vertical and horizontal position, from
    the column and row aggregates alone: (axis, k, cost(X1), cost(X2)), axis 0 = vertical cut after
    column k (X1 = the first k + 1 columns), axis 1 = horizontal cut after row k. None for a
    single cell. O(m + n): one prefix sum per axis; the paper's scan up to O_half stops at the same
    minimum (prefix sums of non-negative costs are monotone). Ties: the cut nearest the middle of
    its axis, then vertical before horizontal."""
    best = None
    for axis, agg in ((0, np.asarray(col_agg, np.float64)), (1, np.asarray(row_agg, np.float64))):
        n = len(agg)
        if n < 2:
            continue
        first = np.cumsum(agg)[:-1]
        total = float(agg.sum())
        diff = np.abs(2.0 * first - total)
        k = np.arange(n - 1)
        off_mid = np.abs((k + 0.5) - (n - 1) / 2.0) / n
        j = int(np.lexsort((off_mid, diff))[0])
        cand = (float(diff[j]), float(off_mid[j]), axis, int(j), float(first[j]), total - float(first[j]))
        if best is None or cand[:2] < best[:2]:
            best = cand
    return None if best is None else best[2:]


def split_rect(rect, axis: int, k: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    x0, y0, x1, y1 = (int(v) for v in rect)
    if axis == 0:
        return (x0, y0, x0 + k, y1), (x0 + k + 1, y0, x1, y1)
    return (x0, y0, x1, y0 + k), (x0, y0 + k + 1, x1, y1)


# --- geometry: neighbours, merges, shifts --------------------------------------------------------


def mergeable_pairs(rects: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(i, j) with j right of or below i and sharing i's entire side: i u j is a rectangle."""
    x0, y0, x1, y1 = (rects[:, k] for k in range(4))
    right = (x1[:, None] + 1 == x0[None, :]) & (y0[:, None] == y0[None, :]) & (y1[:, None] == y1[None, :])
    below = (y1[:, None] + 1 == y0[None, :]) & (x0[:, None] == x0[None, :]) & (x1[:, None] == x1[None, :])
    return np.nonzero(right | below)


def touching(rects: np.ndarray, x: int, side: str) -> np.ndarray:
    """Partitions adjacent to partition x across one of its sides (sharing at least one cell edge)."""
    x0, y0, x1, y1 = (rects[:, k] for k in range(4))
    X = rects[x]
    over_y = (y0 <= X[3]) & (X[1] <= y1)
    over_x = (x0 <= X[2]) & (X[0] <= x1)
    adj = {"right": (x0 == X[2] + 1) & over_y, "left": (x1 == X[0] - 1) & over_y,
           "below": (y0 == X[3] + 1) & over_x, "above": (y1 == X[1] - 1) & over_x}[side]
    return np.flatnonzero(adj)


def _along(rect, side: str) -> tuple[int, int]:
    """A rectangle's extent along the direction of a side (y for right/left, x for below/above)."""
    return (int(rect[1]), int(rect[3])) if side in ("right", "left") else (int(rect[0]), int(rect[2]))


def strips_toward(agg: Aggregates, rect, side: str) -> np.ndarray:
    """Strip aggregates of rect ordered from `side` inwards (the strips a shift moves first)."""
    a = agg.columns(rect) if side in ("right", "left") else agg.rows(rect)
    return a[::-1] if side in ("right", "below") else a


def shifted_rects(X, B, side: str, k: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """X and B after X gives its k strips nearest `side` to B (B shares X's entire side)."""
    x0, y0, x1, y1 = (int(v) for v in X)
    b0, c0, b1, c1 = (int(v) for v in B)
    if side == "right":
        return (x0, y0, x1 - k, y1), (x1 - k + 1, c0, b1, c1)
    if side == "left":
        return (x0 + k, y0, x1, y1), (b0, c0, x0 + k - 1, c1)
    if side == "below":
        return (x0, y0, x1, y1 - k), (b0, y1 - k + 1, b1, c1)
    return (x0, y0 + k, x1, y1), (b0, c0, b1, y0 + k - 1)


def corner_rects(X, B, side: str):
    """The L re-cut (notes A12): B touches X on `side` along a strictly shorter extent aligned with
    one end of X's side. Returns (block X gives, X', B') or None when X u B is not such an L."""
    x0, y0, x1, y1 = (int(v) for v in X)
    b0, c0, b1, c1 = (int(v) for v in B)
    lo, hi = _along(X, side)
    blo, bhi = _along(B, side)
    if not ((blo == lo and bhi < hi) or (bhi == hi and blo > lo)):
        return None
    at_start = blo == lo
    if side in ("right", "left"):
        block = (x0, c0, x1, c1)
        x_new = (x0, c1 + 1, x1, y1) if at_start else (x0, y0, x1, c0 - 1)
        b_new = (x0, c0, b1, c1) if side == "right" else (b0, c0, x1, c1)
    else:
        block = (b0, y0, b1, y1)
        x_new = (b1 + 1, y0, x1, y1) if at_start else (x0, y0, b0 - 1, y1)
        b_new = (b0, y0, b1, c1) if side == "below" else (b0, c0, b1, y1)
    return block, x_new, b_new


# --- candidates ----------------------------------------------------------------------------------


@dataclass
class Candidate:
    """One operation: the values the decision uses (c_r, c_t: exact, or the paper's estimate for
    horizontal/vertical shifts), the exact ones, and the new rectangles of the partitions it changes."""

    op: str
    c_r: float
    c_t: float
    exact_c_r: float
    exact_c_t: float
    changes: dict[int, tuple[int, int, int, int]]
    info: dict[str, Any]


class TornadoAdjuster(Adjuster):
    """`tornado`: split/merge, horizontal/vertical and corner shifts of A-Grid partitions."""

    name = "tornado"
    strategies = frozenset({"agrid"})

    @dataclass
    class Params:
        beta: float = 1.0  # cost (work units) per transferred query-cell posting; the paper gives no value
        cost: str = "checks"  # per-cell cost: checks (Eq. 1 + objects) + updates, load, busy_s
        split_merge: bool = True
        shift: bool = True  # horizontal and vertical shifts
        corner_shift: bool = True
        min_reduction: float = 0.0  # also require C_r > this fraction of cost(X) (not in the paper)

    def __init__(self, params: Any, n_workers: int, context, strategy: str):
        super().__init__(params, n_workers, context, strategy)
        self.check_params(params)
        self.last: dict[str, Any] = {}  # the last decision (for logs and tests)

    @classmethod
    def check_params(cls, params: Any) -> None:
        if params.cost not in COST_COLUMNS:
            raise ValueError(f"tornado: unknown cost {params.cost!r}; valid: {', '.join(COST_COLUMNS)}")
        if params.beta < 0:
            raise ValueError(f"tornado: beta must be >= 0, got {params.beta}")

    # candidates -----------------------------------------------------------------------------------

    def candidates(self, rects: np.ndarray, cost: Aggregates, qcount: Aggregates) -> list[Candidate]:
        """Every operation relieving the costliest partition X, in the order split/merge, shifts, corners."""
        pc = np.asarray(cost.sum(rects), np.float64)
        pq = np.asarray(qcount.sum(rects), np.float64)
        x = int(np.argmax(pc))
        out: list[Candidate] = []
        if self.params.split_merge:
            out += self._split_merge(x, rects, pc, pq, cost, qcount)
        if self.params.shift:
            out += self._shifts(x, rects, pc, pq, cost, qcount)
        if self.params.corner_shift:
            out += self._corners(x, rects, pc, pq, cost, qcount)
        return out

    def _split_merge(self, x, rects, pc, pq, cost: Aggregates, qcount: Aggregates) -> list[Candidate]:
        split = best_split(cost.columns(rects[x]), cost.rows(rects[x]))
        if split is None:
            return []
        axis, k, c1, c2 = split
        h1, h2 = split_rect(rects[x], axis, k)
        q1, q2 = float(qcount.sum(np.array(h1))), float(qcount.sum(np.array(h2)))
        # X2 = the half with fewer queries moves to the freed worker (notes A13); X1 keeps X's pid.
        (keep, keep_c), (move, move_c, move_q) = ((h1, c1), (h2, c2, q2)) if q2 <= q1 else ((h2, c2), (h1, c1, q1))
        i, j = mergeable_pairs(rects)
        sel = (i != x) & (j != x)
        i, j = i[sel], j[sel]
        # Z = the one of the pair with fewer queries: its cells go to Y, its worker hosts X2.
        z = np.where(pq[j] < pq[i], j, i)
        y = np.where(z == j, i, j)
        c_r = pc[x] - np.maximum(max(c1, c2), pc[y] + pc[z])
        c_t = self.params.beta * (move_q + pq[z])
        out = []
        for n in range(len(i)):
            Y, Z = int(y[n]), int(z[n])
            merged = tuple(int(v) for v in (min(rects[Y, 0], rects[Z, 0]), min(rects[Y, 1], rects[Z, 1]),
                                            max(rects[Y, 2], rects[Z, 2]), max(rects[Y, 3], rects[Z, 3])))
            out.append(Candidate("split_merge", float(c_r[n]), float(c_t[n]), float(c_r[n]), float(c_t[n]),
                                 {x: keep, Z: move, Y: merged},
                                 {"x": x, "y": Y, "z": Z, "axis": "vertical" if axis == 0 else "horizontal",
                                  "cut": int(k), "cost_x1": float(keep_c), "cost_x2": float(move_c),
                                  "query_count_x2": move_q, "query_count_z": float(pq[Z])}))
        return out

    def _shifts(self, x, rects, pc, pq, cost: Aggregates, qcount: Aggregates) -> list[Candidate]:
        out = []
        X = rects[x]
        cx, qx, beta = float(pc[x]), float(pq[x]), self.params.beta
        for side in SIDES:
            for b in touching(rects, x, side):
                b = int(b)
                if _along(rects[b], side) != _along(X, side):  # must share X's entire side
                    continue
                strips = strips_toward(cost, X, side)
                if len(strips) < 2:  # X cannot give a strip and stay non-empty
                    continue
                moved = np.cumsum(strips)[:-1]  # cost moved with k = 1 .. depth - 1 strips
                after = np.maximum(cx - moved, pc[b] + moved)
                k = int(np.argmin(after)) + 1
                q_moved = float(np.cumsum(strips_toward(qcount, X, side))[k - 1])
                est_r = cx - (cx + pc[b]) / 2.0
                est_t = beta * qx * est_r / cx if cx > 0 else 0.0
                x_new, b_new = shifted_rects(X, rects[b], side, k)
                out.append(Candidate("shift", est_r, est_t, cx - float(after[k - 1]), beta * q_moved,
                                     {x: x_new, b: b_new},
                                     {"x": x, "b": b, "side": side, "strips": k, "cost_moved": float(moved[k - 1]),
                                      "query_count_moved": q_moved}))
        return out

    def _corners(self, x, rects, pc, pq, cost: Aggregates, qcount: Aggregates) -> list[Candidate]:
        out = []
        X = rects[x]
        cx, beta = float(pc[x]), self.params.beta
        for side in SIDES:
            for b in touching(rects, x, side):
                b = int(b)
                cut = corner_rects(X, rects[b], side)
                if cut is None:
                    continue
                block, x_new, b_new = cut
                m = float(cost.sum(np.array(block)))
                qm = float(qcount.sum(np.array(block)))
                c_r = cx - max(cx - m, float(pc[b]) + m)
                out.append(Candidate("corner_shift", c_r, beta * qm, c_r, beta * qm, {x: x_new, b: b_new},
                                     {"x": x, "b": b, "side": side, "cost_moved": m, "query_count_moved": qm}))
        return out

    # decision -------------------------------------------------------------------------------------

    def choose(self, cands: list[Candidate], cost_x: float) -> Candidate | None:
        """Largest C_r with C_r > C_t (section 4.2); ties: smaller C_t, then enumeration order. A
        horizontal/vertical shift whose exact strip position cannot lower cost(X) is left out."""
        floor = self.params.min_reduction * cost_x
        ok = [c for c in cands if c.c_r > c.c_t and c.c_r > floor and c.exact_c_r > 0]
        if not ok:
            return None
        return min(ok, key=lambda c: (-c.c_r, c.c_t))

    def adjust(self, router: Router, stats: EpochStats) -> MigrationPlan | None:
        if not isinstance(router, AGridRouter):
            raise TypeError(f"tornado adjusts A-Grid routers only, got {type(router).__name__}")
        g = router.grid
        c, q = cell_stats(stats, g.n_cells, self.params.cost)
        cost, qcount = Aggregates(c, g.nx, g.ny), Aggregates(q, g.nx, g.ny)
        rects = router.part_rect
        pc = np.asarray(cost.sum(rects), np.float64)
        cands = self.candidates(rects, cost, qcount) if len(rects) > 1 and pc.max(initial=0.0) > 0 else []
        best = self.choose(cands, float(pc.max(initial=0.0)))
        self.last = {"epoch": stats.epoch, "candidates": len(cands), "cost_max": float(pc.max(initial=0.0)),
                     "cost_mean": float(pc.mean()) if len(pc) else 0.0, "chosen": None if best is None else best.op}
        if best is None:
            return None
        new_rects = rects.copy()
        for pid, r in best.changes.items():
            new_rects[pid] = r
        new_cost = np.asarray(cost.sum(new_rects), np.float64)
        new_router = router.with_partitions(new_rects, router.part_worker, new_cost)
        unit, src, dst = moves_between(router.unit_owner(), new_router.unit_owner())
        info = {"operation": best.op, "c_r": best.c_r, "c_t": best.c_t, "c_r_exact": best.exact_c_r,
                "c_t_exact": best.exact_c_t, "cost_max_before": float(pc.max()),
                "cost_max_after": float(new_cost.max()), "cells_moved": len(unit), **best.info}
        self.last.update(info)
        return MigrationPlan(new_router, unit, src, dst, info)
