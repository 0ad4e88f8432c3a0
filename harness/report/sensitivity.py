"""Network sensitivity (the network_sensitivity preset): each run re-evaluated at several link
bandwidths (network.sweep_bandwidths_bps, after the run: the model needs no new measurement), a
figure of throughput against bandwidth per strategy, and a table of how the ranking moves."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from harness.report import metrics
from harness.report.plots import plt
from harness.report.style import legend_outside, style

COMPUTE = "compute only"


def _bw_label(bw: float) -> str:
    if bw <= 0:
        return "unlimited"
    for unit, size in (("Gbps", 1e9), ("Mbps", 1e6), ("kbps", 1e3)):
        if bw >= size:
            return f"{bw / size:g} {unit}"
    return f"{bw:g} bps"


def by_bandwidth(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (run, bandwidth): variant, scenario, workers, bandwidth (bits/s, 0: unlimited, -1:
    compute only) and throughput."""
    rows = []
    for _, r in runs.iterrows():
        base = {"variant": r["variant"], "scenario": r["scenario"], "workers": r["workers"]}
        rows.append({**base, "bandwidth": -1.0, "throughput": r.get("throughput_compute_eps")})
        curve = r.get("throughput_by_bandwidth")
        if isinstance(curve, str) and curve:
            rows += [{**base, "bandwidth": float(bw), "throughput": v} for bw, v in json.loads(curve).items()]
    if not rows or all(r["bandwidth"] < 0 for r in rows):
        raise ValueError("no run has throughput_by_bandwidth: set network.sweep_bandwidths_bps (the "
                         "network_sensitivity preset does)")
    return pd.DataFrame(rows)


def _columns(frame: pd.DataFrame) -> list[float]:
    """Compute only, unlimited, then bandwidths from the largest down (the order a reader tightens them)."""
    bws = sorted(frame["bandwidth"].unique().tolist(), key=lambda b: (b >= 0, b != 0, -b))
    return bws


def bandwidth_lines(runs: pd.DataFrame, title: str):
    """Throughput against link bandwidth, a line per strategy, a panel per (scenario, workers); the
    compute-only figure and unlimited bandwidth on the left, bandwidth falling to the right."""
    frame = by_bandwidth(runs)
    cols = _columns(frame)
    panels = list(frame.groupby(["scenario", "workers"]))
    n = len(panels)
    fig, axes = plt.subplots(-(-n // 2), min(n, 2), figsize=(5.4 * min(n, 2), 3.6 * -(-n // 2)), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    scale = metrics.scale("throughput_eps")
    for ax, ((scenario, workers), g) in zip(axes.flat, panels):
        for variant, s in g.groupby("variant"):
            s = s.set_index("bandwidth").reindex(cols)
            ax.plot(range(len(cols)), s["throughput"].to_numpy(float) * scale, label=variant, ms=4, lw=1.2,
                    **style(variant))
        ax.set_xticks(range(len(cols)), [COMPUTE if b < 0 else _bw_label(b) for b in cols], rotation=30,
                      ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel(metrics.label("throughput_network_eps"), fontsize=8)
        ax.set_title(f"{scenario}, {workers} workers", fontsize=9)
        ax.grid(alpha=0.3, which="both")
    legend_outside(fig, list(axes.flat))
    fig.suptitle(title, fontsize=11)
    return fig


def ranking_markdown(runs: pd.DataFrame) -> str:
    """Per (scenario, workers): each strategy's rank (1 = fastest) compute-only and at each bandwidth,
    and the strategies whose rank moved."""
    frame = by_bandwidth(runs)
    cols = _columns(frame)
    out = []
    for (scenario, workers), g in frame.groupby(["scenario", "workers"]):
        table = g.pivot_table(index="variant", columns="bandwidth", values="throughput", aggfunc="last")[cols]
        ranks = table.rank(ascending=False, method="min")
        ranks = ranks.sort_values(cols[0])
        head = [COMPUTE if b < 0 else _bw_label(b) for b in cols]
        out += [f"### {scenario}, {workers} workers", "",
                "| strategy | " + " | ".join(head) + " |", "|---|" + "---|" * len(cols)]
        for variant, row in ranks.iterrows():
            cells = [f"{int(r)} ({metrics.show('throughput_eps', table.loc[variant, b])})" if np.isfinite(r) else "-"
                     for b, r in row.items()]
            out.append(f"| {variant} | " + " | ".join(cells) + " |")
        moved = [v for v, row in ranks.iterrows() if row.nunique() > 1]
        out += ["", f"Rank changed for {len(moved)} of {len(ranks)} strategies"
                + (f": {', '.join(moved)}." if moved else "."), ""]
    return "\n".join(out)
