"""The site's figures: one SVG per (preset, metric) and the CSV of the numbers drawn, side by side.

Throughput is drawn on both bases: compute-only as filled markers with the repetition interval as
error bars, the network model as hollow markers (dashed lines) in the same strategy's style. A
preset that sweeps a numeric x (or only the worker count) is a line plot over it, one panel per
remaining cell; otherwise one point per strategy per cell, strategies side by side within a cell.
Every strategy keeps its colour and marker (harness/report/style.py); the legend sits outside the
axes and takes a second column past 20 strategies.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from harness.report import metrics  # noqa: E402
from harness.report.claims import CELL  # noqa: E402
from harness.report.site.data import Figure  # noqa: E402
from harness.report.style import style  # noqa: E402

SVG_META = {"Date": None, "Creator": None}  # the same file for the same numbers
HOLLOW = {"network"}  # series drawn as hollow markers, dashed
MAX_PANELS = 12


def _num(col: pd.Series) -> np.ndarray:
    return pd.to_numeric(col, errors="coerce").to_numpy(float)


def _cell_name(row: pd.Series, keys: list[str]) -> str:
    parts = []
    for k in keys:
        v = row[k]
        if v is None or (isinstance(v, float) and np.isnan(v)):
            continue
        parts.append(f"{v:g}w" if k == "workers" and isinstance(v, (int, float, np.number)) else
                     (f"x={v}" if k == "x" else str(v)))
    return "/".join(parts) or "default"


def _draw_series(ax, pos, y, lo, hi, label: str, series: str, line: bool) -> None:
    kw = dict(style(label))
    hollow = series in HOLLOW
    kw.update(ms=4.5 if hollow else 4, lw=(1.0 if line else 0), ls="--" if hollow else "-")
    if hollow:
        kw.update(mfc="none", mew=1.0)
    y = y * 1.0
    have = np.isfinite(lo) & np.isfinite(hi)
    if have.any() and not hollow:
        err = np.vstack([np.where(have, np.abs(y - lo), 0), np.where(have, np.abs(hi - y), 0)])
        ax.errorbar(pos, y, yerr=err, capsize=2, elinewidth=0.8, label=label, **kw)
    else:  # the legend names a strategy once, by its filled marker
        ax.plot(pos, y, label="_nolegend_" if hollow else label, **kw)


def _panels(fig_data: Figure) -> list[tuple[str, pd.DataFrame]]:
    data = fig_data.data
    if fig_data.xaxis is None:
        return [("", data)]
    rest = [k for k in CELL if k != fig_data.xaxis and data[k].notna().any() and data[k].astype(str).nunique() > 1]
    if not rest:
        return [("", data)]
    out = []
    for key, g in data.groupby(rest, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        out.append((" / ".join(f"{k}={v}" for k, v in zip(rest, key)), g))
    return out[:MAX_PANELS]


def draw(fig_data: Figure):
    """The matplotlib figure of one (preset, metric)."""
    panels = _panels(fig_data)
    variants = sorted(fig_data.data["variant"].dropna().astype(str).unique())
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    height = max(3.0, 0.16 * len(variants) / (2 if len(variants) > 20 else 1) + 0.8)
    width = 5.0
    if fig_data.xaxis is None:  # strategies side by side in every cell: room for each
        cells = fig_data.data[list(CELL)].astype(str).drop_duplicates().shape[0]
        width = min(14.0, max(5.0, 0.09 * len(variants) * cells + 2.0))
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, max(height, 3.0 * rows)), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    m = metrics.metric(fig_data.metric)
    scale = m.scale
    for ax, (title, g) in zip(axes.flat, panels):
        if fig_data.xaxis:
            _line_panel(ax, fig_data, g, scale)
            ax.set_xlabel(fig_data.xaxis if fig_data.xaxis == "x" else "workers")
            if fig_data.xaxis == "workers":
                ax.set_xscale("log", base=2)
        else:
            _cell_panel(ax, fig_data, g, variants, scale)
        ax.set_ylabel(metrics.label(fig_data.metric))
        if m.log:
            ax.set_yscale("log")
        ax.set_title(title, fontsize=8)
        ax.grid(alpha=0.3)
        if g.empty:
            ax.text(0.5, 0.5, "no usable run", ha="center", va="center", transform=ax.transAxes, color="0.4")
    _legend(fig, axes.flat, variants, fig_data)
    fig.suptitle(fig_data.title, fontsize=9)
    return fig


def _line_panel(ax, fig_data: Figure, g: pd.DataFrame, scale: float) -> None:
    for variant, s in g.groupby("variant", sort=True):
        x = _num(s[fig_data.xaxis])
        order = np.argsort(x)
        for series, (mid, lo, hi) in fig_data.columns.items():
            if mid not in s or s[mid].isna().all():
                continue
            _draw_series(ax, x[order], _num(s[mid])[order] * scale, _num(s[lo])[order] * scale,
                         _num(s[hi])[order] * scale, str(variant), series, line=True)


def _cell_panel(ax, fig_data: Figure, g: pd.DataFrame, variants: list[str], scale: float) -> None:
    keys = [k for k in CELL if g[k].notna().any()]
    names = [_cell_name(r, keys) for _, r in g[keys].iterrows()] if keys else ["default"] * len(g)
    g = g.assign(_cell=names)
    cells = list(dict.fromkeys(sorted(names)))
    width = 0.8 / max(1, len(variants))
    for i, variant in enumerate(variants):
        s = g[g["variant"].astype(str) == variant]
        if s.empty:
            continue
        pos = np.array([cells.index(c) for c in s["_cell"]]) - 0.4 + width * (i + 0.5)
        for series, (mid, lo, hi) in fig_data.columns.items():
            if mid not in s or s[mid].isna().all():
                continue
            _draw_series(ax, pos, _num(s[mid]) * scale, _num(s[lo]) * scale, _num(s[hi]) * scale, variant, series,
                         line=False)
    ax.set_xticks(range(len(cells)))
    ax.set_xticklabels(cells, rotation=30 if len(cells) > 3 else 0, ha="right" if len(cells) > 3 else "center",
                       fontsize=7)
    ax.set_xlim(-0.6, len(cells) - 0.4)


def _legend(fig, axes, variants: list[str], fig_data: Figure) -> None:
    seen: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if len(fig_data.columns) > 1:  # what filled and hollow mean
        seen["compute-only (interval)"] = Line2D([], [], color="0.3", marker="o", ls="-")
        seen["network (model)"] = Line2D([], [], color="0.3", marker="o", mfc="none", ls="--")
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=7,
                   frameon=False, ncol=2 if len(seen) > 22 else 1)


def write(fig_data: Figure, out_dir: Path) -> tuple[Path, Path]:
    """figures/<key>.svg and figures/<key>.csv (the numbers drawn, with each run's provenance)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    svg, csv = out_dir / f"{fig_data.key}.svg", out_dir / f"{fig_data.key}.csv"
    fig_data.data.to_csv(csv, index=False)
    fig = draw(fig_data)
    with matplotlib.rc_context({"svg.hashsalt": fig_data.key}):
        fig.savefig(svg, format="svg", bbox_inches="tight", metadata=SVG_META)
    plt.close(fig)
    return svg, csv
