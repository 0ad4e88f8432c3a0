"""cSkyband's price of a scored pair (`index.topk.pair_cost`), paired: Skype Fig. 14's EMP ratio and
Table 4's buffers at PAIR_COST 75, 150 and 300 against the Skyband baseline, on skype_reevaluation's
workloads (one worker, `hash`), in process.

The preset's runs at each value (ADR-0079) are made
one after another, and on a shared machine their clocks are not comparable: the same cSkyband run
read AMP 236 us at one time and 664 us at another. Here the four settings run in turn within each
round (75, 150, 300, skyband; rounds repeated), so every ratio is of two runs measured seconds
apart, and its median over rounds is reported with the rounds. The counts (re-evaluations, buffer
sizes) do not depend on the clock. Every setting must give the same top-k results (a threshold only
changes what a buffer keeps beyond the top-k): the script stops if the digests differ.

    python benchmarks/pair_cost_ablation.py --rounds 5 --results /work/res-pc/150 [--datasets synthetic,geonames]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_strategies import compose, load_stream, run_in_process  # noqa: E402

SETTINGS = {"cskyband@75": {"reevaluation": "cskyband", "pair_cost": 75.0},
            "cskyband@150": {"reevaluation": "cskyband", "pair_cost": 150.0},
            "cskyband@300": {"reevaluation": "cskyband", "pair_cost": 300.0},
            "skyband": {"reevaluation": "skyband"}}


def one_run(cfg, ds, events, warmup, setting: dict) -> dict:
    """The measured epoch's figures of one setting: EMP, AMP (us), re-evaluations, buffer mean, the
    result digest, and the worker's busy CPU time."""
    from strategies.base import FitContext

    context = FitContext(ds.extent, ds.vocab.column("df").to_numpy().astype(np.float64), int(cfg.seed))
    index = {k: dict(v) for k, v in dict(cfg.index).items()}
    index["topk"] = {**index.get("topk", {}), **setting}
    _, last = run_in_process(events, warmup, "hash", 1, context, index, {}, 1)
    st = last.worker_stats[0]
    return {"emp_us": st["expiry_s"] / max(st["expiries"], 1) * 1e6, "amp_us": st["arrival_s"] / max(st["objects"], 1) * 1e6,
            "reevaluations": int(st["reevaluations"]), "buffer": st["buffered"] / max(st.get("kept", 0), 1),
            "busy_s": st["busy_s"], "digest": (int(last.result_count), int(last.result_hash))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--results", required=True, help="a results folder whose cache holds the preset's data")
    ap.add_argument("--datasets", default="synthetic,geonames,synthetic_long")
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    args = ap.parse_args()
    report = {}
    for name in args.datasets.split(","):
        cfg = compose("skype_reevaluation", [f"dataset={name}", "workload=topk_q", "strategy=hash"], args.results)
        ds, events, warmup = load_stream(cfg, Path(args.results))
        runs = {s: [] for s in SETTINGS}
        for r in range(args.rounds):
            for label, setting in SETTINGS.items():
                t0 = time.perf_counter()
                runs[label].append(one_run(cfg, ds, events, warmup, setting))
                print(f"{name} round {r + 1}/{args.rounds} {label}: EMP {runs[label][-1]['emp_us']:.1f} us "
                      f"({time.perf_counter() - t0:.0f}s)", flush=True)
        digests = {label: {x["digest"] for x in xs} for label, xs in runs.items()}
        if len(set().union(*digests.values())) != 1:
            raise SystemExit(f"{name}: the settings gave different top-k results: {digests}")
        base = np.array([x["emp_us"] for x in runs["skyband"]])
        out = {}
        for label, xs in runs.items():
            emp = np.array([x["emp_us"] for x in xs])
            out[label] = {"emp_us_median": float(np.median(emp)), "amp_us_median": float(np.median([x["amp_us"] for x in xs])),
                          "reevaluations": xs[0]["reevaluations"], "buffer_mean": round(xs[0]["buffer"], 2),
                          "skyband_emp_over_this": [round(float(b / e), 2) for b, e in zip(base, emp)],
                          "skyband_emp_over_this_median": round(float(np.median(base / emp)), 2)}
        report[name] = out
        print(json.dumps({name: out}, indent=1), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
