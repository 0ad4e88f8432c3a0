"""A uniform grid over the dataset's extent: the cell geometry shared by routers and GI2."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core import kernels


@dataclass(frozen=True)
class UniformGrid:
    x0: float
    y0: float
    inv_cw: float  # cells per km along x
    inv_ch: float
    nx: int
    ny: int

    @classmethod
    def over(cls, extent: tuple[float, float, float, float], nx: int, ny: int | None = None) -> "UniformGrid":
        ny = nx if ny is None else ny
        xmin, ymin, xmax, ymax = (float(v) for v in extent)
        w = max(xmax - xmin, 1e-9)
        h = max(ymax - ymin, 1e-9)
        return cls(xmin, ymin, nx / w, ny / h, int(nx), int(ny))

    @property
    def n_cells(self) -> int:
        return self.nx * self.ny

    @property
    def args(self) -> tuple:
        """The geometry as kernel arguments: x0, y0, inv_cw, inv_ch, nx, ny."""
        return (self.x0, self.y0, self.inv_cw, self.inv_ch, self.nx, self.ny)

    def cells_of(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return kernels.points_to_cells(np.asarray(x, np.float64), np.asarray(y, np.float64), *self.args)

    def cell_ranges(self, xmin, ymin, xmax, ymax) -> np.ndarray:
        """(n, 4) array of ix0, ix1, iy0, iy1 per rectangle (inclusive, clamped)."""
        f = lambda a: np.asarray(a, np.float64)  # noqa: E731
        return kernels.rects_to_cell_ranges(f(xmin), f(ymin), f(xmax), f(ymax), *self.args)

    def units(self, ev, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row, cell) migration units of grid-shaped routers: an object's cell, every cell a
        rectangle overlaps."""
        from harness.core.events import OBJECT

        rows = np.asarray(rows, np.int64)
        is_obj = ev.kind[rows] == OBJECT
        objs, qs = rows[is_obj], rows[~is_obj]
        r, c = kernels.rect_cells(qs, ev.xmin, ev.ymin, ev.xmax, ev.ymax, *self.args)
        return np.concatenate([objs, r]), np.concatenate([self.cells_of(ev.x[objs], ev.y[objs]), c])

    def object_counts(self, x, y) -> np.ndarray:
        return np.bincount(self.cells_of(x, y), minlength=self.n_cells).astype(np.float64)

    def overlap_counts(self, xmin, ymin, xmax, ymax) -> np.ndarray:
        """How many rectangles overlap each cell (a 2-d difference array, no per-query loop)."""
        rng = self.cell_ranges(xmin, ymin, xmax, ymax)
        diff = np.zeros((self.ny + 1, self.nx + 1), np.float64)
        np.add.at(diff, (rng[:, 2], rng[:, 0]), 1.0)
        np.add.at(diff, (rng[:, 2], rng[:, 1] + 1), -1.0)
        np.add.at(diff, (rng[:, 3] + 1, rng[:, 0]), -1.0)
        np.add.at(diff, (rng[:, 3] + 1, rng[:, 1] + 1), 1.0)
        return diff.cumsum(axis=0).cumsum(axis=1)[: self.ny, : self.nx].ravel()
