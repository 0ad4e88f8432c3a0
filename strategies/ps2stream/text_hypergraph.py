"""Hypergraph-based text partitioning, PS2Stream's second text baseline (Sec. VI-B, after [27]).

PS2Stream says only that the algorithm "constructs a hypergraph based on the co-occurrence of
terms and partitions that hypergraph" (ref [27]: Cambazoglu et al., term-based inverted index
partitioning, TWEB 2013: terms are vertices weighted by their load, queries are nets, and a k-way
partition minimising the connectivity metric keeps co-requested terms on one server). Here:

- vertices: the terms seen in the sample, weighted by `load.term_loads` (n_o * n_q + n_o + n_q);
- nets: one per sample item that is multicast over its terms by `TermMapRouter`: every object
  (sent to the workers of all its terms) and every OR subscription (one conjunct per keyword).
  An AND subscription goes to one worker whatever the partition, so it adds vertex weight but no
  net. Identical term sets are merged into one net weighted by their count, so the connectivity
  metric sum((lambda - 1) * weight) is exactly the number of extra copies those items cause;
- partitioner: KaHyPar (direct k-way, km1 objective, configuration strategies/kahypar_km1.ini),
  balance within `epsilon`, deterministic for a seed.

Two reductions keep KaHyPar fast and the hypergraph linear in the sample (ADR-0027): hub terms (in more than `hub_degree` nets, or heavier than half a worker's
fair share) are placed first by LPT and left out of the nets, since nearly every net holding them
is cut anyway and their degree makes KaHyPar's refinement superlinear (measured: 20k nets with
the Zipf head kept took 65-300 s); and at most `max_nets` sample items (a seeded random subset)
build the nets, so KaHyPar's time is bounded (about 0.5 s at the default 5000). KaHyPar then
places the other terms within each worker's spare capacity: (1 + epsilon) times the level their
load fills the workers to on top of the hubs (water filling), minus the hubs it holds. Terms left
without a net, and all of them when the hypergraph is too small for KaHyPar (no net, or fewer
than two vertices per block), fill the workers by LPT; terms unseen in the sample are spread by
LPT on their document frequency, as text_frequency does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from harness.core.events import Events, csr_take
from harness.core import allocate
from strategies.base import FitContext, Router, Strategy
from strategies.load import term_loads
from strategies.routers.termmap import PartitionedTermRouter, object_terms_for
from strategies.ps2stream.textpart import dedup_sets, drop_terms, sample_items, spread_unseen, water_level

KAHYPAR_INI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kahypar_km1.ini")
_WEIGHT_SCALE = float(1 << 30)  # KaHyPar weights are int32: scale loads so every sum fits


# --- the hypergraph ------------------------------------------------------------------------------

@dataclass
class Hypergraph:
    """Terms `vertices[v]` with `vertex_weight[v]`; nets over local vertex ids, with weights."""

    vertices: np.ndarray
    vertex_weight: np.ndarray
    net_offsets: np.ndarray
    net_pins: np.ndarray
    net_weight: np.ndarray

    @property
    def n_nets(self) -> int:
        return len(self.net_offsets) - 1


def build_hypergraph(offsets, values, loads, exclude) -> Hypergraph:
    """Nets = the item term sets without the `exclude`d terms, of two or more pins, identical sets
    merged; vertices = the terms that still have a net."""
    off, val = drop_terms(offsets, values, exclude)
    multi = np.flatnonzero(np.diff(off) >= 2)
    off, val = csr_take(off, val, multi)
    off, val, w = dedup_sets(off, val, np.ones(len(off) - 1))
    vertices = np.unique(val).astype(np.int64)
    local = np.searchsorted(vertices, val).astype(np.int64)
    return Hypergraph(vertices, loads[vertices], off, local, w)


def kahypar_blocks(hg: Hypergraph, caps: np.ndarray, seed: int) -> tuple[np.ndarray, int]:
    """KaHyPar's block of every vertex with block b's weight capped at caps[b] (same unit as the
    vertex weights), and the connectivity metric of the result (weighted extra copies)."""
    import kahypar  # imported here: only this strategy needs the native library

    k = len(caps)
    scale = _WEIGHT_SCALE / max(float(caps.sum()), float(hg.vertex_weight.sum()), 1e-300)
    node_w = np.maximum(1, np.rint(hg.vertex_weight * scale)).astype(np.int64)
    cap_w = np.floor(caps * scale).astype(np.int64)
    deficit = int(node_w.sum() - cap_w.sum())
    if deficit >= 0:  # rounding only; KaHyPar exits the process when caps cannot hold the weight
        cap_w += deficit // k + 1
    net_w = np.maximum(1, np.rint(hg.net_weight)).astype(np.int64)
    h = kahypar.Hypergraph(
        len(hg.vertices), hg.n_nets, hg.net_offsets.tolist(), hg.net_pins.tolist(), k, net_w.tolist(), node_w.tolist()
    )
    ctx = kahypar.Context()
    ctx.loadINIconfiguration(KAHYPAR_INI)
    ctx.setK(k)
    ctx.setEpsilon(0.0)  # the per-block caps below carry the imbalance allowance
    ctx.setCustomTargetBlockWeights(cap_w.tolist())
    ctx.setSeed(int(seed) % 2_147_483_647)
    ctx.suppressOutput(True)
    kahypar.partition(h, ctx)
    blocks = np.fromiter((h.blockID(v) for v in range(len(hg.vertices))), np.int64, len(hg.vertices))
    return blocks, int(kahypar.connectivityMinusOne(h))


def hypergraph_partition(sample: Events, loads: np.ndarray, n_workers: int, epsilon: float, hub_degree: int,
                         max_nets: int, seed: int) -> tuple[np.ndarray, dict]:
    """term -> worker for the terms with load > 0 (-1 elsewhere), and a description of the fit."""
    k = int(n_workers)
    vocab = len(loads)
    term_worker = np.full(vocab, -1, np.int64)
    seen = loads > 0
    if not seen.any():
        return term_worker, {"method": "empty sample"}
    totals = np.zeros(k, np.float64)
    if k == 1:
        term_worker[seen] = 0
        totals[0] = loads.sum()
        return term_worker, {"method": "one worker", "term_load_per_worker": totals.tolist()}

    offsets, values = sample_items(sample)
    n_items = len(offsets) - 1
    if n_items > max_nets:
        rows = np.sort(np.random.default_rng(seed).choice(n_items, size=max_nets, replace=False))
        offsets, values = csr_take(offsets, values, rows)
        n_items = max_nets
    degree = np.bincount(values, minlength=vocab)[:vocab]
    fair = loads.sum() / k
    hub = seen & ((degree > hub_degree) | (loads > 0.5 * fair))
    hubs = np.flatnonzero(hub)
    term_worker[hubs] = allocate.lpt_onto(loads[hubs], totals)

    hg = build_hypergraph(offsets, values, loads, ~seen | hub)
    # each worker's room: up to the level the non-hub load would fill the workers to, plus epsilon
    level = water_level(totals, float(loads.sum() - totals.sum()))
    caps = np.maximum((1.0 + epsilon) * level - totals, 0.0)
    blocks = np.flatnonzero(caps > 0)
    info = {"hubs": len(hubs), "vertices": len(hg.vertices), "nets": int(hg.n_nets),
            "pins": len(hg.net_pins)}
    if hg.n_nets == 0 or len(blocks) < 2 or len(hg.vertices) < 2 * len(blocks):
        info["method"] = "lpt fallback: hypergraph too small for KaHyPar"
        term_worker[hg.vertices] = allocate.lpt_onto(hg.vertex_weight, totals)
    else:
        part, km1 = kahypar_blocks(hg, caps[blocks], seed)
        term_worker[hg.vertices] = blocks[part]
        np.add.at(totals, blocks[part], hg.vertex_weight)
        info["method"] = "kahypar"
        info["km1"] = km1
    rest = np.flatnonzero(seen & (term_worker < 0))  # terms with no net left: balance filler
    term_worker[rest] = allocate.lpt_onto(loads[rest], totals)
    info["term_load_per_worker"] = totals.tolist()
    return term_worker, info


class HypergraphTextStrategy(Strategy):
    name = "text_hypergraph"
    families = frozenset({"range", "topk"})
    filters_objects = True  # object_terms="live": an object no subscription's routing term holds goes nowhere

    @dataclass
    class Params:
        epsilon: float = 0.03  # allowed imbalance over the water level (KaHyPar's usual 3%)
        hub_degree: int = 50  # terms in more nets than this are placed by LPT before KaHyPar
        max_nets: int = 5_000  # sample items that build the nets (a seeded subset beyond this)
        # "live": an object to the workers of its terms that routed a subscription before it
        # (Definition 2, ps2stream.txt l.102; H2, l.197); "all": to those of all its terms
        object_terms: str = "live"

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        loads = term_loads(sample, context.vocab_size)
        term_worker, info = hypergraph_partition(
            sample, loads, n_workers, params.epsilon, params.hub_degree, params.max_nets, context.seed
        )
        spread_unseen(term_worker, context.term_df, n_workers)
        return PartitionedTermRouter(n_workers, term_worker, info,
                                     object_terms_for(self.name, params.object_terms, sample, context))
