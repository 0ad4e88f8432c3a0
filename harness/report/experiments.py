"""What an experiment preset (conf/experiment/<name>.yaml) leaves behind when its sweep ends: its
figures under results/plots/<name>/ and, for the grand comparison, results/report.md.

A preset names its figures in `experiment.plots`; each name below is one figure drawn from the
sweep's own rows of the runs table (matched by sweep id), so earlier runs never leak in.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from harness.report import metrics, results, sensitivity
from harness.report.claims import report as claims_report
from harness.report.plots import EPOCH_PANELS, line_with_interval, plt, save_figure
from harness.report.style import legend_outside, style


def _label(runs: pd.DataFrame) -> pd.DataFrame:
    runs = results.labelled(runs)
    runs["scenario"] = runs["workload"] + " / " + runs["dataset"]
    return runs


def sweep_rows(root: Path, sweep_id: str | None, name: str) -> pd.DataFrame:
    """The successful runs of this sweep (or, without an id, the latest runs of the experiment)."""
    table = _label(results.read_runs_table(root))
    table = table[table["status"] == "ok"]
    if sweep_id is not None and "sweep_id" in table:
        rows = table[table["sweep_id"] == sweep_id]
    else:
        rows = table[table.get("experiment", pd.Series(index=table.index, dtype=object)) == name]
    if "aa_role" in rows:  # the A/A repeat of the first job is read for its spread alone (harness/report/claims/aa_pairs.py)
        rows = rows[rows["aa_role"].astype(object) != "a2"]
    keys = ["variant", "dataset", "workload", "workers", "x", "facet"]
    rows = rows.assign(**{k: rows[k] if k in rows else None for k in ("x", "facet")})
    return rows.sort_values("started_at").groupby([k for k in keys], dropna=False).tail(1)


def _registered(figures: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    for names in figures.values():
        for name in names:
            metrics.metric(name)  # raises UnknownMetric naming the known ones
    return figures


# the metrics each figure draws (a preset names figures in experiment.plots); checked against the
# registry on import, so a renamed metric fails at once, not when a sweep draws its figures
PLOT_METRICS = _registered({
    "throughput_bars": ("throughput_eps",),
    "latency_bars": ("latency_p50_ms", "latency_p95_ms"),
    "memory_bars": ("dispatcher_bytes", "worker_index_bytes_max"),
    "throughput_vs_x": ("throughput_eps",),
    "bandwidth_lines": ("throughput_by_bandwidth", "throughput_compute_eps"),
    "heatmap": ("throughput_eps",),
    "replication_balance": ("obj_replication", "query_replication", "load_max_min"),
    "epoch_series": EPOCH_PANELS,
    "migration_bars": ("select_cells_s", "select_s", "migration_s", "migrated_bytes", "migrated_queries"),
    "latency_shares": ("latency_share_lt_100ms", "latency_share_100ms_1s", "latency_share_gt_1s"),
    # DkM-SKS (time-stamped kNN streams): Fig. 7, Tables 2-3, Figs. 8-10
    "update_time_bars": ("update_time_ms_per_ts",),
    "spread_bars": ("update_spread_ms_per_ts",),
    "decomposed_bars": ("knn_update_ms_per_ts", "ins_ms_per_ts", "del_ms_per_ts"),
    "update_time_vs_x": ("update_time_ms_per_ts",),
    "spread_vs_x": ("update_spread_ms_per_ts",),
    "timestamp_series": ("update_time_ms_per_ts",),
    # Skype/DSkype (top-k): communication per message, replication ratio, balance (Fig. 21(b), Table
    # 5); re-evaluations and buffer sizes (Fig. 14, Table 4)
    "dskype_bars": ("obj_replication", "stored_replication", "load_max_mean"),
    "replication_vs_x": ("stored_replication",),  # Table 5 against the window (dskype_table5)
    "reevaluations_vs_x": ("reevaluations",),
    "buffer_vs_x": ("buffer_size_mean",),
    "amp_vs_x": ("amp_us",),
    "emp_vs_x": ("emp_us",),
    # SSTD's snapshot queries (Figs. 7-10, 13(a)): their latency, the workers each one reaches, and
    # the objects the workers keep for them and their bytes
    "snapshot_latency_vs_x": ("snapshot_latency_mean_ms",),
    "snapshot_workers_vs_x": ("snapshot_workers_mean",),
    "snapshot_latency_bars": ("snapshot_latency_p50_ms", "snapshot_latency_mean_ms", "snapshot_latency_p95_ms"),
    "stored_bars": ("stored_objects_max", "stored_objects_sum"),
    "stored_bytes_bars": ("stored_bytes_max", "stored_bytes_sum"),
    # issue 16: how a run grows with its size
    "scale_vs_x": ("wall_s", "time_oracle_s", "result_count", "driver_peak_rss_bytes", "executor_peak_rss_bytes"),
})


def _numeric(series: pd.Series) -> pd.Series:
    out = pd.to_numeric(series, errors="coerce")
    return out if out.notna().all() else series


def _grid(n: int, width: float = 4.6, height: float = 3.4):
    cols = min(n, 3)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def _bars(runs: pd.DataFrame, names: tuple[str, ...], title: str):
    """Grouped bars: one panel per (scenario, workers), one group per variant, one bar per metric
    (metrics sharing a display unit, which labels the axis)."""
    units = {metrics.metric(m).shown_unit for m in names}
    if len(units) > 1:
        raise ValueError(f"one axis cannot show {', '.join(names)}: their units differ ({', '.join(units)})")
    ylabel = metrics.label(names[0]) if len(names) == 1 else units.pop()
    panels = list(runs.groupby(["scenario", "workers"]))
    fig, axes = _grid(len(panels))
    for ax, ((scenario, workers), g) in zip(axes, panels):
        g = g.sort_values("variant")
        xs = np.arange(len(g))
        width = 0.8 / len(names)
        for k, col in enumerate(names):
            ax.bar(xs + k * width - 0.4 + width / 2, g[col].to_numpy(float) * metrics.scale(col), width,
                   label=metrics.metric(col).short)
        ax.set_xticks(xs, g["variant"], rotation=45, ha="right", fontsize=8)
        ax.set_title(f"{scenario}, {workers} workers", fontsize=9)
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
    if len(names) > 1:
        axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=11)
    return fig


def _lines(runs: pd.DataFrame, x: str, xlabel: str, title: str, facet: str | None = None, logx: bool = False,
           metric: str = "throughput_eps"):
    """A metric (throughput) vs `x`, one line per variant, one panel per scenario (and facet value)."""
    keys = ["scenario"] + ([facet] if facet else [])
    panels = list(runs.groupby(keys))
    fig, axes = _grid(len(panels))
    for ax, (key, g) in zip(axes, panels):
        for variant, s in g.groupby("variant"):
            line_with_interval(ax, s.assign(_x=_numeric(s[x])).sort_values("_x"), "_x", metric, variant)
        xs = _numeric(g[x])
        if logx:
            ax.set_xscale("log", base=2)
        elif pd.api.types.is_numeric_dtype(xs) and (xs > 0).all() and xs.max() >= 100 * xs.min():
            # x over decades (region areas): a log axis; an x of names (re-evaluation modes) stays categorical
            ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(metrics.label(metric))
        name = key if isinstance(key, str) else " | ".join(str(k) for k in key)
        ax.set_title(name if not facet else name.replace(" | ", f" | {facet}="), fontsize=9)
        ax.grid(alpha=0.3)
    legend_outside(fig, axes)
    fig.suptitle(title, fontsize=11)
    return fig


def _scale_panels(runs: pd.DataFrame, x: str, xlabel: str, title: str):
    """One panel per metric of `scale_vs_x` against the size `x`, log-log, a line per variant: how
    time, results and memory grow."""
    from matplotlib.ticker import NullFormatter

    names = PLOT_METRICS["scale_vs_x"]
    sizes = np.unique(_numeric(runs[x]).dropna().to_numpy(float))
    fig, axes = _grid(len(names))
    for ax, name in zip(axes, names):
        for variant, s in runs.groupby("variant"):
            s = s.assign(_x=_numeric(s[x])).sort_values("_x")
            ax.plot(s["_x"], s[name].astype(float) * metrics.scale(name), label=variant, **style(variant))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(sizes, [_short(v) for v in sizes])  # the measured sizes, not crowded decades
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(xlabel)
        ax.set_ylabel(metrics.label(name), fontsize=8)
        ax.grid(alpha=0.3, which="both")
    legend_outside(fig, axes)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def _short(v: float) -> str:
    """125000 -> 125k, 1000000 -> 1M."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:g}{suffix}"
    return f"{v:g}"


def _stacked(runs: pd.DataFrame, names: tuple[str, ...], title: str):
    """Stacked bars of a decomposition (DkM-SKS Table 3): one panel per (scenario, workers), one bar
    per variant, one segment per part."""
    panels = list(runs.groupby(["scenario", "workers"]))
    fig, axes = _grid(len(panels))
    for ax, ((scenario, workers), g) in zip(axes, panels):
        g = g.sort_values("variant")
        xs = np.arange(len(g))
        base = np.zeros(len(g))
        for col in names:
            v = g[col].to_numpy(float) * metrics.scale(col)
            ax.bar(xs, v, 0.6, bottom=base, label=metrics.metric(col).short)
            base += np.nan_to_num(v)
        ax.set_xticks(xs, g["variant"], rotation=45, ha="right", fontsize=8)
        ax.set_title(f"{scenario}, {workers} workers", fontsize=9)
        ax.set_ylabel("ms per time-stamp")
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=11)
    return fig


def _timestamp_series(runs: pd.DataFrame, title: str):
    """Update time per time-stamp over the stream (DkM-SKS Fig. 7): each run's timestamps.parquet,
    one line per variant, one panel per (scenario, workers)."""
    panels = list(runs.groupby(["scenario", "workers"]))
    fig, axes = _grid(len(panels), width=5.5)
    for ax, ((scenario, workers), g) in zip(axes, panels):
        for _, run in g.sort_values("variant").iterrows():
            ts = results.run_frame(run, "timestamps")
            if ts is None:
                continue
            ax.plot(ts["timestamp"], ts["update_time_ms"], lw=1, label=run["variant"], color=style(run["variant"])["color"])
        ax.set_xlabel("time-stamp")
        ax.set_ylabel("update time (ms)")
        ax.set_yscale("log")
        ax.set_title(f"{scenario}, {workers} workers", fontsize=9)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=11)
    return fig


def relative_to_best(table: pd.DataFrame, name: str) -> pd.DataFrame:
    """Each column against its best value, the direction from the registry: 1 is the best, less is worse."""
    higher = metrics.higher_is_better(name)
    if higher is None:
        raise ValueError(f"{name} has no better direction, so no best")
    return table / table.max(axis=0) if higher else table.min(axis=0) / table


def _heatmap(runs: pd.DataFrame, title: str):
    """Throughput relative to the best strategy of each scenario, one panel per worker count."""
    panels = list(runs.groupby("workers"))
    fig, axes = _grid(len(panels), width=5.2, height=0.35 * runs["variant"].nunique() + 1.8)
    for ax, (workers, g) in zip(axes, panels):
        table = g.pivot_table(index="variant", columns="scenario", values="throughput_eps", aggfunc="last")
        rel = relative_to_best(table, "throughput_eps")
        ax.imshow(rel.to_numpy(float), cmap="viridis", vmin=0, vmax=1, aspect="auto")  # cells carry values
        ax.set_xticks(range(len(rel.columns)), rel.columns, rotation=30, ha="right", fontsize=8)
        ax.set_yticks(range(len(rel.index)), rel.index, fontsize=8)
        for (i, j), v in np.ndenumerate(rel.to_numpy(float)):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="w" if v < 0.6 else "k")
        ax.set_title(f"{workers} workers", fontsize=9)
    fig.suptitle(title, fontsize=11)
    return fig


def _replication_balance(runs: pd.DataFrame, title: str):
    """Per variant: object and query replication and L_max/L_min, median over the sweep with range."""
    names = PLOT_METRICS["replication_balance"]
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 0.3 * runs["variant"].nunique() + 2.5))
    for ax, col in zip(axes, names):
        stats = runs.groupby("variant")[col].agg(["median", "min", "max"]) * metrics.scale(col)
        stats = stats.sort_index(ascending=False)
        stats = stats.replace([np.inf, -np.inf], np.nan)
        y = np.arange(len(stats))
        ax.barh(y, stats["median"], color="tab:blue", alpha=0.8)
        ax.errorbar(stats["median"], y, xerr=[stats["median"] - stats["min"], stats["max"] - stats["median"]],
                    fmt="none", ecolor="k", lw=0.8)
        ax.set_yticks(y, stats.index, fontsize=8)
        ax.set_xlabel(f"{metrics.label(col)}: median, min-max over the sweep")
        if metrics.metric(col).log:
            ax.set_xscale("log")
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(title, fontsize=11)
    return fig


def _epoch_series(runs: pd.DataFrame, title: str, x: str | None):
    """Per-epoch throughput, L_max/L_min and migrated queries of every run (its epochs.parquet)."""
    from harness.report.plots import epoch_series

    frames = []
    for _, r in runs.iterrows():
        epochs = results.run_frame(r, "epochs")
        if epochs is not None:
            label = r["variant"] + (f" ({x}={r['x']})" if x and pd.notna(r.get("x")) else "")
            frames.append(epochs.assign(run=label))
    if not frames:
        raise ValueError("no run of this experiment has per-epoch results (epochs.size=0?)")
    return epoch_series(pd.concat(frames, ignore_index=True), title, by="run")


def _migration_bars(runs: pd.DataFrame, title: str, x: str | None):
    """Per adjuster (and swept x): selection time, migration time and cost per migration."""
    runs = runs.copy()
    if "select_cells_s" not in runs:
        runs["select_cells_s"] = runs["select_s"]
    runs["select_cells_s"] = runs["select_cells_s"].fillna(runs["select_s"])
    n = runs["adjustments"].replace(0, np.nan)
    panels = PLOT_METRICS["migration_bars"]
    for col in panels:  # per adjustment, in the registry's display unit
        runs[col] = runs[col] / n * metrics.scale(col)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 3.4))
    # one bar group per swept x, or per workload when a preset sweeps several (SSTD's two hot spots)
    by = "x" if x else ("workload" if runs["workload"].nunique() > 1 else None)
    groups = list(runs.groupby(by, dropna=False)) if by else [(None, runs)]
    variants = sorted(runs["variant"].unique())
    width = 0.8 / len(groups)
    for ax, col in zip(axes, panels):
        for i, (xv, g) in enumerate(groups):
            g = g.groupby("variant")[col].median().reindex(variants)  # the newest sweep holds one run per cell
            ax.bar(np.arange(len(variants)) - 0.4 + width * (i + 0.5), g.to_numpy(float), width,
                   label=None if xv is None else f"{x or by}={xv}")
        ax.set_xticks(range(len(variants)), variants, rotation=45, ha="right", fontsize=8)
        m = metrics.metric(col)
        ax.set_ylabel(f"{m.short} per adjustment" + (f" ({m.shown_unit})" if m.shown_unit else ""), fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    if by:
        axes[0].legend(fontsize=7)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def _latency_shares(runs: pd.DataFrame, title: str):
    """Share of events with latency < 100 ms, 100 ms - 1 s, > 1 s (PS2Stream Fig. 12c), stacked."""
    labels = runs["variant"] + (" (" + runs["x"].astype(str) + ")" if runs["x"].notna().any() else "")
    shares = PLOT_METRICS["latency_shares"]
    fig, ax = plt.subplots(figsize=(0.6 * len(runs) + 3, 3.6))
    bottom = np.zeros(len(runs))
    for col in shares:
        v = runs[col].to_numpy(float) * metrics.scale(col)
        ax.bar(np.arange(len(runs)), v, bottom=bottom, label=metrics.metric(col).short)
        bottom += np.nan_to_num(v)
    ax.set_xticks(range(len(runs)), labels, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(f"share of events ({metrics.metric(shares[0]).shown_unit})")
    ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


PLOTS = tuple(PLOT_METRICS)


def figures(runs: pd.DataFrame, exp) -> dict[str, object]:
    """The named figures of an experiment (matplotlib figures, not yet saved)."""
    title = exp.title or exp.name
    x = "x" if exp.x else "workers"
    xlabel = exp.x_label or (exp.x or "workers")
    facet = "facet" if exp.facet else None
    makers = {
        "throughput_bars": lambda: _bars(runs, PLOT_METRICS["throughput_bars"], f"{title}: throughput"),
        "latency_bars": lambda: _bars(runs, PLOT_METRICS["latency_bars"], f"{title}: latency (queue model)"),
        "memory_bars": lambda: _bars(runs, PLOT_METRICS["memory_bars"], f"{title}: memory"),
        "throughput_vs_x": lambda: _lines(runs, x, xlabel, f"{title}: throughput", facet,
                                          logx=x == "workers"),
        "heatmap": lambda: _heatmap(runs, f"{title}: throughput relative to the best"),
        "replication_balance": lambda: _replication_balance(runs, f"{title}: replication and balance"),
        "epoch_series": lambda: _epoch_series(runs, f"{title}: per epoch", exp.x),
        "migration_bars": lambda: _migration_bars(runs, f"{title}: load adjustment cost", exp.x),
        "latency_shares": lambda: _latency_shares(runs.sort_values(["variant", "x"]), f"{title}: latency shares"),
        "update_time_bars": lambda: _bars(runs, PLOT_METRICS["update_time_bars"], f"{title}: update time"),
        "spread_bars": lambda: _bars(runs, PLOT_METRICS["spread_bars"], f"{title}: load balance (max - min)"),
        "decomposed_bars": lambda: _stacked(runs, PLOT_METRICS["decomposed_bars"], f"{title}: update time by part"),
        "update_time_vs_x": lambda: _lines(runs, x, xlabel, f"{title}: update time", facet, logx=False,
                                           metric="update_time_ms_per_ts"),
        "spread_vs_x": lambda: _lines(runs, x, xlabel, f"{title}: load balance (max - min)", facet, logx=False,
                                      metric="update_spread_ms_per_ts"),
        "timestamp_series": lambda: _timestamp_series(runs, f"{title}: update time per time-stamp"),
        "scale_vs_x": lambda: _scale_panels(runs, x, xlabel, f"{title}: time, results and memory"),
        "dskype_bars": lambda: _bars(runs, PLOT_METRICS["dskype_bars"],
                                     f"{title}: communication per message, replication ratio, balance"),
        "replication_vs_x": lambda: _lines(runs, x, xlabel, f"{title}: replication ratio", facet,
                                           metric="stored_replication"),
        "reevaluations_vs_x": lambda: _lines(runs, x, xlabel, f"{title}: re-evaluations", facet,
                                             metric="reevaluations"),
        "buffer_vs_x": lambda: _lines(runs, x, xlabel, f"{title}: buffer size", facet, metric="buffer_size_mean"),
        "amp_vs_x": lambda: _lines(runs, x, xlabel, f"{title}: time per arriving message (AMP)", facet,
                                   metric="amp_us"),
        "emp_vs_x": lambda: _lines(runs, x, xlabel, f"{title}: time per expiring message (EMP)", facet,
                                   metric="emp_us"),
        "snapshot_latency_vs_x": lambda: _lines(runs, x, xlabel, f"{title}: snapshot query latency (queue model)",
                                                facet, metric="snapshot_latency_mean_ms"),
        "snapshot_workers_vs_x": lambda: _lines(runs, x, xlabel, f"{title}: workers a snapshot query reaches", facet,
                                                metric="snapshot_workers_mean"),
        "snapshot_latency_bars": lambda: _bars(runs, PLOT_METRICS["snapshot_latency_bars"],
                                               f"{title}: snapshot query latency (queue model)"),
        "stored_bars": lambda: _bars(runs, PLOT_METRICS["stored_bars"], f"{title}: objects kept for snapshot queries"),
        "stored_bytes_bars": lambda: _bars(runs, PLOT_METRICS["stored_bytes_bars"],
                                           f"{title}: bytes kept for snapshot queries"),
        "bandwidth_lines": lambda: sensitivity.bandwidth_lines(runs, f"{title}: throughput against link bandwidth"),
    }
    return {name: makers[name]() for name in exp.plots}


def finish(config, root: Path, sweep_id: str | None) -> list[Path]:
    """Draw the experiment's figures (and the report if the preset asks) from its sweep's runs."""
    exp = config.experiment
    runs = sweep_rows(root, sweep_id, exp.name)
    if runs.empty:
        print(f"experiment {exp.name}: no successful runs to plot")
        return []
    out_dir = root / "plots" / exp.name
    paths = [save_figure(fig, out_dir / f"{name}.png") for name, fig in figures(runs, exp).items()]
    if "bandwidth_lines" in exp.plots:  # the ranking beside its figure
        (out_dir / "ranking.md").write_text(f"# {exp.title or exp.name}: rank by bandwidth\n\n"
                                            + sensitivity.ranking_markdown(runs))
        paths.append(out_dir / "ranking.md")
    paths.append(write_report(root, exp, runs, paths))
    if exp.report:  # the overview of every claim, beside it
        paths.append(claims_report.write_overview(root, results.read_runs_table(root)))
    return paths


SUMMARY = ("obj_replication", "query_replication", "load_max_min", "dispatcher_bytes", "worker_index_bytes_max",
           "build_s")  # the report's median table


def _table(frame: pd.DataFrame, show=lambda col, v: f"{v:.2f}", header=str) -> str:
    """Markdown; `show(column, value)` writes a cell, `header(column)` a column title."""
    lines = ["| " + " | ".join([frame.index.name or ""] + [header(c) for c in frame.columns]) + " |",
             "|" + "---|" * (len(frame.columns) + 1)]
    for idx, row in frame.iterrows():
        lines.append("| " + " | ".join([str(idx)] + [show(c, v) if pd.notna(v) else "-" for c, v in row.items()])
                     + " |")
    return "\n".join(lines)


def write_report(root: Path, exp, runs: pd.DataFrame, plot_paths: list[Path]) -> Path:
    """results/plots/<preset>/report.md: the sweep's throughput on both bases and medians, every
    claim that reads the preset (harness/report/claims/report.py), the figures."""
    extra = ["## Replication, balance and memory (median over the sweep)", ""]
    med = runs.groupby("variant")[[c for c in SUMMARY if c in runs]].median()
    med.index.name = "strategy"
    extra += [_table(med, metrics.show, metrics.label), ""]
    if "throughput_by_bandwidth" in runs and runs["throughput_by_bandwidth"].notna().any():
        extra += ["## Rank by link bandwidth (the network model re-evaluated per run)", "",
                  sensitivity.ranking_markdown(runs), ""]
    return claims_report.write_preset_report(root, exp.name, exp.title, results.read_runs_table(root), plot_paths,
                                             extra)
