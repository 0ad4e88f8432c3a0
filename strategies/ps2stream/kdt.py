"""PS2Stream's hybrid partitioning as a strategy: the kdt-tree (Chen et al., Section IV-B,
Algorithm 1 "Partition Workload", strategies/ps2stream/kdt_partition.py) fitted on a sample and
laid onto the cells of the gridt index (Section IV-C, strategies/ps2stream/gridt.py) that routes
the stream. The partitioning never sees the router; this module joins them (build_gridt).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core.events import INSERT, Events, csr_of, splitmix64
from harness.core.grid import UniformGrid
from strategies.base import FitContext, Router, Strategy
from strategies.ps2stream.gridt import GridtRouter
from strategies.ps2stream.kdt_load import Sample
from strategies.ps2stream.kdt_partition import KdtPlan, balance_factor, partition_workload


def build_gridt(grid: UniformGrid, plan: KdtPlan, n_workers: int) -> GridtRouter:
    """Cells of space leaves get the leaf's worker; cells of text leaves a term map, one per
    distinct set of covering text leaves (their term sets are disjoint: two leaves over one cell
    part at a text split)."""
    nx, ny = grid.nx, grid.ny
    cell_worker = np.full((ny, nx), -1, np.int64)
    text = [i for i, n in enumerate(plan.leaves) if n.terms is not None]
    sig = np.zeros((ny, nx), np.uint64)  # per cell: a hash of the set of text leaves covering it
    n_text = np.zeros((ny, nx), np.int64)
    for i, n in enumerate(plan.leaves):
        x0, x1, y0, y1 = n.region
        if n.terms is None:
            cell_worker[y0:y1 + 1, x0:x1 + 1] = plan.assign[i]
    if text:
        h = splitmix64(np.asarray(text, np.int64))
        with np.errstate(over="ignore"):
            for i, hv in zip(text, h):
                x0, x1, y0, y1 = plan.leaves[i].region
                sig[y0:y1 + 1, x0:x1 + 1] += hv
                n_text[y0:y1 + 1, x0:x1 + 1] += 1
    sig = sig.ravel()
    is_text = n_text.ravel() > 0
    cell_tmap = np.full(nx * ny, -1, np.int64)
    tm_terms, tm_workers, tmc, units = [], [], [], []
    if is_text.any():
        _, first, inv = np.unique(sig[is_text], return_index=True, return_inverse=True)
        cell_tmap[is_text] = inv
        text_cells = np.flatnonzero(is_text)
        regions = np.array([plan.leaves[i].region for i in text])
        for j, f in enumerate(first):
            c = text_cells[f]
            cx, cy = c % nx, c // nx
            cover = [text[k] for k in np.flatnonzero((regions[:, 0] <= cx) & (regions[:, 1] >= cx)
                                                     & (regions[:, 2] <= cy) & (regions[:, 3] >= cy))]
            terms = np.concatenate([plan.leaves[i].terms for i in cover])
            workers = np.concatenate([np.full(len(plan.leaves[i].terms), plan.assign[i]) for i in cover])
            order = np.argsort(terms, kind="stable")
            if len(terms) > 1 and np.any(np.diff(terms[order]) == 0):
                raise AssertionError("kdt: text leaves over one cell share a term")
            tm_terms.append(terms[order])
            tm_workers.append(workers[order])
            tmc.append(np.unique(plan.assign[cover]))
            units.append(sum(plan.leaves[i].load for i in cover) / max(len(terms), 1))
    cell_worker = cell_worker.ravel()
    if np.any((cell_worker < 0) & ~is_text) or np.any((cell_worker >= 0) & is_text):
        raise AssertionError("kdt: leaves must tile the grid, each cell under one space leaf or text leaves only")
    leaves = [
        {"region": list(n.region), "worker": int(plan.assign[i]), "kind": "space" if n.terms is None else "text",
         "terms": None if n.terms is None else len(n.terms), "label": n.label, "load": n.load}
        for i, n in enumerate(plan.leaves)
    ]
    bf = balance_factor(plan.part_load)
    info = {
        "leaves": leaves,
        "partition_load": plan.part_load.tolist(),
        "balance_factor": bf if np.isfinite(bf) else None,
        "phase1": {"n_t": plan.n_t, "n_s": plan.n_s},
        "dp_parts": plan.dp_parts,
        "sigma_splits": plan.sigma_splits,
    }
    tm_ptr, tm_key = csr_of(tm_terms)
    tmc_ptr, tmc_worker = csr_of(tmc)
    return GridtRouter(n_workers, grid, cell_worker, cell_tmap, tm_ptr, tm_key, csr_of(tm_workers)[1],
                       tmc_ptr, tmc_worker, np.asarray(units, np.float64), plan.part_load, info)


class KdtStrategy(Strategy):
    name = "kdt"
    families = frozenset({"range", "frequent_terms"})
    filters_objects = True  # gridt drops an object whose terms no query of its cell is indexed under
    unit_router = True  # gridt cells and text parts are migration units (strategies/ps2stream/gridt.py)

    @dataclass
    class Params:
        delta: float = 0.5  # text similarity threshold (line 5); the paper gives no value
        sigma: float = 1.5  # load balance constraint L_max / L_min (line 21), "a small constant > 1"
        theta: int = 256  # maximum number of kdt-tree leaves (line 26)
        sim_tolerance: float = 0.05  # "|alpha - sim_t(O_n, Q_n)| ~ 0" (line 9)
        min_split_objects: int = 64  # phase 1: a node with fewer sample objects is not split
        cells_per_side: int = 64  # gridt granularity (the grid baseline's and GI2's 2^6)

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        grid = UniformGrid.over(context.extent, params.cells_per_side)
        s = Sample.of(sample, grid)
        plan = partition_workload(s, n_workers, params.delta, params.sigma, params.theta, params.sim_tolerance,
                                  params.min_split_objects)
        router = build_gridt(grid, plan, n_workers)
        router.observe_inserts(sample, np.flatnonzero(sample.kind == INSERT))  # H2 from the sample's queries
        return router
