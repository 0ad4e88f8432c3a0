"""What a load adjustment's stall costs PS2Stream's Fig. 16 (kdt with and without GR on the Q3
drift), in process: the preset's stream run without adjustment; with GR as the runs charge it
(the overloaded worker stalls for its Phase I trials and Phase II selection, `stall_s`, plus its
migration work); with GR charged the whole plan step (`select_s`: also the load model and the
harness building the new router, as runs were charged before 2026-11-28); and with GR charged
the Phase II selection alone (`select_cells_s`).
Per run: the throughput over the measured epochs (events over the sum of each epoch's busiest
worker time, stalls included), each epoch's busiest worker and stall, and the plan steps' time.
Every run must equal the oracle.

    PYTHONPATH=. python benchmarks/adjustment_stall.py --results <folder with the preset's cache> [epochs.size=120000]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_strategies import compose, load_stream  # noqa: E402


def run(cfg, ds, events, warmup, adjust: str, stall: str) -> dict:
    from harness.engine import epochs, loop
    from harness.engine.simulate import simulate
    from strategies.base import FitContext

    original = epochs.migration_pause

    def charged(step, mig):
        info = {k: v for k, v in step.plan.info.items() if k != "stall_s"}
        seconds = step.select_s if stall == "plan step" else float(info.get("select_cells_s", 0.0))
        return original(epochs.Step(dataclasses.replace(step.plan, info=info), seconds), mig)

    context = FitContext(ds.extent, ds.vocab.column("df").to_numpy().astype(np.float64), int(cfg.seed))
    params = dict(cfg.adjust.params) if adjust != "none" else None
    loop.migration_pause = original if stall == "as run" else charged
    try:
        sim = simulate(events, warmup, str(cfg.strategy.name), int(cfg.workers), epoch_events=float(cfg.epochs.size),
                       adjust=adjust, adjust_params=params, context=context,
                       index_params={k: dict(v) for k, v in dict(cfg.index).items()})
    finally:
        loop.migration_pause = original
    if not sim.exact:
        raise SystemExit(f"{adjust}: the in-process run's results differ from the oracle")
    rows = sim.epochs
    n = sum(r["events"] for r in rows)
    return {"throughput": n / sum(r["events"] / r["throughput_eps"] for r in rows),
            "busy_max_ms": [round(r["busy_max_s"] * 1e3, 1) for r in rows],
            "stall_ms": [round(r.get("pause_max_s", 0.0) * 1e3, 1) for r in rows],
            "plan_ms": [round(r.get("select_s", 0.0) * 1e3, 1) for r in rows if r.get("select_s")],
            "phase1_ms": [round(p.info.get("phase1_s", 0.0) * 1e3, 1) for p in sim.plans],
            "load_max_min": round(rows[-1]["load_max_min"], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", required=True)
    ap.add_argument("--preset", default="ps2stream_adjustment")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides for every run (e.g. epochs.size=120000)")
    args = ap.parse_args()
    base = None
    for label, adjust, stall in (("kdt", "none", "as run"), ("kdt + gr (Phase I and selection stall, as run)", "gr",
                                                            "as run"),
                                 ("kdt + gr (the whole plan step stalls)", "gr", "plan step"),
                                 ("kdt + gr (the selection alone stalls)", "gr", "selection")):
        cfg = compose(args.preset, [f"adjust={adjust}", *args.overrides], args.results)
        ds, events, warmup = load_stream(cfg, Path(args.results))
        out = run(cfg, ds, events, warmup, adjust, stall)
        base = base or out["throughput"]
        print(f"{label}: {out['throughput']:,.0f} events/s (x{out['throughput'] / base:.2f}); busiest worker per "
              f"epoch {out['busy_max_ms']} ms, stall {out['stall_ms']} ms; plan steps {out['plan_ms']} ms (Phase I "
              f"{out['phase1_ms']} ms); "
              f"last epoch's load max/min {out['load_max_min']}", flush=True)


if __name__ == "__main__":
    main()
