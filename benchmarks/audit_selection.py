"""PS2Stream's four Phase II selections (DP, GR, SI, RA) on the same cells: the paper times them
"on the same worker with the same cells" (Figs. 12a, 13) and compares the data each moves (Figs.
12b, 14). The preset's runs cannot: each adjuster changes the state the next epoch starts from,
so after the first adjustment they see different cells. Here the preset's stream runs in process
with GR, every Phase II input (the overloaded worker's candidate cells: load L_g, size S_g, and
tau) is kept, and all four registered adjusters' selections are applied to each, timed as the
runs time them (`Ps2Adjuster.timed_select`). Printed per live-query count: the candidates, each method's cells, bytes moved and
median time, GR's saving over SI and RA, and how strongly size follows load (Spearman), which is
what decides whether "smallest size for the load" can save anything over "largest first".

    PYTHONPATH=. python benchmarks/audit_selection.py --results <folder with the preset's cache> \
        [--preset ps2stream_migration --queries 10000,40000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_strategies import compose, load_stream  # noqa: E402


def phase2_inputs(cfg, ds, events, warmup) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """(L_g, S_g, tau) of every Phase II selection GR makes on the preset's stream, in process."""
    from harness.engine.simulate import simulate
    from strategies.base import FitContext
    from strategies.ps2stream import adjust

    kept = []
    original = adjust.Ps2Adjuster.timed_select

    def keep(self, load, size, tau, info):
        kept.append((np.array(load, np.float64), np.array(size, np.float64), float(tau)))
        return original(self, load, size, tau, info)

    context = FitContext(ds.extent, ds.vocab.column("df").to_numpy().astype(np.float64), int(cfg.seed))
    adjust.Ps2Adjuster.timed_select = keep
    try:
        sim = simulate(events, warmup, str(cfg.strategy.name), int(cfg.workers), epoch_events=float(cfg.epochs.size),
                       adjust="gr", adjust_params=dict(cfg.adjust.params), context=context,
                       index_params={k: dict(v) for k, v in dict(cfg.index).items()})
    finally:
        adjust.Ps2Adjuster.timed_select = original
    if not sim.exact:
        raise SystemExit("the in-process run's results differ from the oracle")
    return kept


def adjusters(cfg, ds):
    """The four registered Phase II adjusters with their default parameters, as the runs build them."""
    from strategies.adjust_base import get_adjuster
    from strategies.base import FitContext

    context = FitContext(ds.extent, ds.vocab.column("df").to_numpy().astype(np.float64), int(cfg.seed))
    return {name: get_adjuster(name)(get_adjuster(name).make_params({}), int(cfg.workers), context,
                                     str(cfg.strategy.name)) for name in ("dp", "gr", "si", "ra")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", required=True)
    ap.add_argument("--preset", default="ps2stream_migration")
    ap.add_argument("--queries", default="10000,40000")
    args = ap.parse_args()
    for mu in args.queries.split(","):
        cfg = compose(args.preset, [f"workload.queries={mu}", "adjust=gr"], args.results)
        ds, events, warmup = load_stream(cfg, Path(args.results))
        inputs = phase2_inputs(cfg, ds, events, warmup)
        print(f"\n{args.preset}, mu = {mu}: {len(inputs)} Phase II selection(s) by GR in process")
        for i, (load, size, tau) in enumerate(inputs):
            cand = load > 0
            rho = spearmanr(load[cand], size[cand]).statistic if cand.sum() > 2 else float("nan")
            print(f"  selection {i + 1}: {len(load)} cells ({int(cand.sum())} with load), tau = {tau:.4g} of "
                  f"{load.sum():.4g}; Spearman(load, size) = {rho:.2f}")
            moved = {}
            for name, adj in adjusters(cfg, ds).items():
                info: dict = {}
                chosen = adj.timed_select(load, size, tau, info)  # as the runs time it
                moved[name] = float(size[chosen].sum())
                print(f"    {name}: {len(chosen)} cells, {moved[name]:,.0f} bytes, load {load[chosen].sum():.4g}, "
                      f"median {info['select_cells_s'] * 1e3:.3f} ms [{info['select_cells_s_ci_lo'] * 1e3:.3f}-"
                      f"{info['select_cells_s_ci_hi'] * 1e3:.3f}]")
            if moved["gr"] > 0:
                print(f"    GR moves x{moved['si'] / moved['gr']:.2f} less than SI, x{moved['ra'] / moved['gr']:.2f} "
                      f"less than RA (the paper: 1.43-1.67x)")


if __name__ == "__main__":
    main()
