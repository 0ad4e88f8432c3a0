"""Plots: per run (worker load bars, latency CDF) and from the runs table (throughput vs workers,
per-worker load, latency distribution). PNG files; matplotlib without a display."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from harness.report import metrics, results  # noqa: E402
from harness.report.style import legend_outside, style  # noqa: E402


def line_with_interval(ax, s: pd.DataFrame, x: str, metric: str, label: str) -> None:
    """A strategy's line in its own style, with error bars where the runs repeated (metric_ci_lo/hi)."""
    y = s[metric].to_numpy(float) * metrics.scale(metric)
    kw = {**style(label), "label": label, "ms": 4, "lw": 1.2}
    lo, hi = f"{metric}_ci_lo", f"{metric}_ci_hi"
    if lo in s and hi in s and s[lo].notna().any():
        err = [y - s[lo].to_numpy(float) * metrics.scale(metric), s[hi].to_numpy(float) * metrics.scale(metric) - y]
        ax.errorbar(s[x], y, yerr=[abs(e) for e in err], capsize=2, elinewidth=0.8, **kw)
    else:
        ax.plot(s[x], y, **kw)


def save_figure(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")  # a legend outside the axes stays in the picture
    plt.close(fig)
    return path


def _load_bars(ax, workers: pd.DataFrame, title: str) -> None:
    ax.bar(workers["worker"], workers["load"], color="tab:blue")
    mean = workers["load"].mean()
    ax.axhline(mean, color="tab:red", lw=1, ls="--", label="mean")
    ax.set_xlabel("worker")
    ax.set_ylabel("load L_i")
    ax.set_title(title, fontsize=9)


def _latency_cdf(ax, latency_ms: np.ndarray, label: str) -> None:
    x = np.sort(latency_ms)
    ax.plot(x, np.linspace(0, 1, len(x)), label=label)


def run_plots(run_dir: Path, workers: pd.DataFrame, latency: pd.DataFrame | None,
              epochs: pd.DataFrame | None = None) -> list[Path]:
    out = []
    fig, ax = plt.subplots(figsize=(6, 3.2))
    _load_bars(ax, workers, f"per-worker load ({run_dir.name})")
    out.append(save_figure(fig, run_dir / "plots" / "worker_load.png"))
    if latency is not None and len(latency):
        fig, ax = plt.subplots(figsize=(5, 3.2))
        _latency_cdf(ax, latency["latency_ms"].to_numpy(), run_dir.name)
        ax.set_xscale("log")
        ax.set_xlabel("latency (ms, queue model)")
        ax.set_ylabel("share of events")
        out.append(save_figure(fig, run_dir / "plots" / "latency_cdf.png"))
    if epochs is not None and len(epochs) > 1:
        out.append(save_figure(epoch_series(epochs, run_dir.name), run_dir / "plots" / "epochs.png"))
    return out


EPOCH_PANELS = ("throughput_eps", "load_max_min", "migrated_queries")  # metrics, labelled by the registry


def epoch_series(epochs: pd.DataFrame, title: str, by: str | None = None):
    """Throughput, balance and migrated queries per epoch; one line per value of `by`."""
    fig, axes = plt.subplots(1, len(EPOCH_PANELS), figsize=(4.4 * len(EPOCH_PANELS), 3.2))
    groups = list(epochs.groupby(by)) if by else [(None, epochs)]
    for ax, col in zip(axes, EPOCH_PANELS):
        for i, (name, g) in enumerate(groups):
            g = g.sort_values("epoch")
            y = g[col].replace([np.inf, -np.inf], np.nan) * metrics.scale(col) if col in g else np.zeros(len(g))
            if col == "migrated_queries":
                width = 0.8 / len(groups)
                ax.bar(g["epoch"] - 0.4 + width * (i + 0.5), y, width=width, label=name)
            else:
                ax.plot(g["epoch"], y, marker="o", ms=3, label=name)
        ax.set_xlabel("epoch")
        ax.set_ylabel(metrics.label(col))
        if metrics.metric(col).log:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
    if by:
        axes[0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def summary_plots(root: Path, table: pd.DataFrame | None = None) -> list[Path]:
    """The sweep's figures from results/runs.parquet into results/plots/."""
    runs = results.read_runs_table(root) if table is None else table
    runs = results.labelled(runs[runs["status"] == "ok"])
    runs["strategy"] = runs["variant"]
    for col in ("x", "facet"):  # runs that changed a swept knob belong to their experiment's figures
        if col in runs:
            runs = runs[runs[col].isna()]
    out_dir = root / "plots"
    out: list[Path] = []
    # latest run per (dataset, workload, strategy, workers); a panel needs two worker counts
    runs = runs.sort_values("started_at").groupby(["dataset", "workload", "strategy", "workers"]).tail(1)
    groups = [(k, g) for k, g in runs.groupby(["dataset", "workload"]) if g["workers"].nunique() > 1]
    if not groups:
        return out
    cols = min(3, len(groups))
    rows = -(-len(groups) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows), squeeze=False)
    for ax in axes.flat[len(groups):]:
        ax.set_visible(False)
    for ax, ((dataset, workload), g) in zip(axes.flat, groups):
        for strategy, s in g.groupby("strategy"):
            line_with_interval(ax, s.sort_values("workers"), "workers", "throughput_eps", strategy)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("workers")
        ax.set_ylabel(metrics.label("throughput_eps"))
        ax.set_title(f"{workload} on {dataset}", fontsize=10)
        ax.grid(alpha=0.3)
    legend_outside(fig, axes.flat)
    out.append(save_figure(fig, out_dir / "throughput_vs_workers.png"))

    # per-worker load of the largest worker count per strategy (the scenario with most runs)
    (dataset, workload), g = max(groups, key=lambda kg: len(kg[1]))
    w = g["workers"].max()
    g = g[g["workers"] == w]
    fig, axes = plt.subplots(1, len(g), figsize=(3.2 * len(g), 3), squeeze=False)
    for ax, (_, r) in zip(axes[0], g.iterrows()):
        workers = results.run_frame(r, "workers")
        if workers is not None:
            _load_bars(ax, workers, f"{r['strategy']} ({workload}, {w} workers)")
    out.append(save_figure(fig, out_dir / "worker_load.png"))

    # latency distribution per strategy (same selection)
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for _, r in g.iterrows():
        latency = results.run_frame(r, "latency")
        if latency is not None:
            _latency_cdf(ax, latency["latency_ms"].to_numpy(), r["strategy"])
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms, queue model)")
    ax.set_ylabel("share of events")
    ax.set_title(f"latency distribution ({workload}, {w} workers)", fontsize=10)
    ax.legend(fontsize=8)
    out.append(save_figure(fig, out_dir / "latency_distribution.png"))
    return out


def plots_of_run(run_dir: Path) -> list[Path]:
    """A run's own plots drawn from its folder (a sweep does not draw them: run_plots)."""
    workers = run_dir / "workers.parquet"
    if not workers.exists():
        raise FileNotFoundError(f"{run_dir} has no workers.parquet (a failed run has no per-worker figures)")
    latency, epochs = run_dir / "latency.parquet", run_dir / "epochs.parquet"
    return run_plots(run_dir, pd.read_parquet(workers), pd.read_parquet(latency) if latency.exists() else None,
                     pd.read_parquet(epochs) if epochs.exists() else None)


def main(argv: list[str] | None = None) -> None:
    """`python -m harness.report.plots`: the runs table's plots; `--run DIR...`: those runs' own."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m harness.report.plots", description=main.__doc__)
    parser.add_argument("--run", nargs="+", type=Path, default=[], metavar="DIR", help="run folders (results/runs/*)")
    args = parser.parse_args(argv)
    paths = [p for d in args.run for p in plots_of_run(d)] if args.run else summary_plots(results.results_root())
    for path in paths:
        print(f"plot: {path}")


if __name__ == "__main__":
    main()
