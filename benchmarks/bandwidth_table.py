"""A preset's runs at every bandwidth its network profile swept (issue 40, part 3: is a verdict the
network's or the computation's?), read from a runs table without running anything.

Each run row carries `throughput_by_bandwidth` (the network model re-evaluated at the profile's
`sweep_bandwidths_bps`; "0" = unlimited links, CPU costs and the merge stage still charged), the
compute-only figure and the headline's bottleneck. Prints one row per cell (dataset, workload, workers, x, variant):
the newest ok run (run_anatomy.newest_per_cell). Usage, from the repository root:

    python benchmarks/bandwidth_table.py ps2stream_baselines --runs results/runs.parquet
"""

from __future__ import annotations

import argparse
import json

import pandas as pd
from run_anatomy import newest_per_cell  # a sibling script: run as python benchmarks/bandwidth_table.py


def table(runs: pd.DataFrame, preset: str) -> pd.DataFrame:
    ok = newest_per_cell(runs, preset)
    rows = []
    for r in ok.itertuples():
        by_bw = json.loads(r.throughput_by_bandwidth) if isinstance(r.throughput_by_bandwidth, str) else {}
        row = {"dataset": r.dataset, "workload": r.workload, "workers": r.workers, "x": r.x,
               "facet": getattr(r, "facet", None), "variant": r.variant,
               "compute": r.throughput_compute_eps, "bottleneck": r.bottleneck_resource,
               "merge_s": r.resource_merge_s, "worker_link_s": r.resource_worker_link_s,
               "busy_max_mean": r.busy_max_mean, "code": r.code_version}
        for bw, eps in sorted(by_bw.items(), key=lambda kv: -float(kv[0]) if float(kv[0]) else -1e30):
            row["unlimited" if float(bw) == 0 else f"{float(bw) / 1e9:g} Gbps"] = eps
        rows.append(row)
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("preset")
    ap.add_argument("--runs", default="results/runs.parquet")
    args = ap.parse_args()
    out = table(pd.read_parquet(args.runs), args.preset)
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.float_format", "{:,.3g}".format):
        print(out.to_string(index=False))


if __name__ == "__main__":
    main()
