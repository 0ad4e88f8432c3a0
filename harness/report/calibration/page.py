"""The calibration's outputs: the constants table (what `calibrated_throughput` reads), the
figures table (every figure's prediction and error) and the Markdown page with the commands
that produced them (no machine path: the counts folder is written `<COUNTS>`)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from harness.report.calibration.declaration import PaperModel
from harness.report.calibration.fit import Fit

COUNTS = "<COUNTS>"


def count_command(paper: str, run) -> str:
    return f"python -m harness.counts {run.overrides} counts.out={COUNTS}/{paper}/{run.name}"


def constants_table(fits: list[Fit]) -> pd.DataFrame:
    rows = []
    for f in fits:
        n_fit = sum(1 for r in f.figures if r["role"] == "fit")
        for j, t in enumerate(f.terms):
            rows.append({"paper": f.paper, "term": t, "value": float(f.constants[j]),
                         "sampling_lo": float(f.sampling[0, j]), "sampling_hi": float(f.sampling[1, j]),
                         "loo_lo": float(f.loo[0, j]) if f.loo is not None else np.nan,
                         "loo_hi": float(f.loo[1, j]) if f.loo is not None else np.nan,
                         "n_fit": n_fit, "n_terms": len(f.terms)})
    return pd.DataFrame(rows, columns=["paper", "term", "value", "sampling_lo", "sampling_hi", "loo_lo", "loo_hi",
                                       "n_fit", "n_terms"])


def figures_table(fits: list[Fit]) -> pd.DataFrame:
    return pd.DataFrame([r for f in fits for r in f.figures])


def _ns(v: float) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v * 1e9:,.4g}"


def _val(v: float, unit: str) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    if unit == "ratio":
        return f"{v:.2f}"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:,.3g}"


def _pct(v: float) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v * 100:+.0f}%"


def _abs_pct(v: float) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v * 100:.0f}%"


def render(models: dict[str, PaperModel], fits: list[Fit], sizes: pd.DataFrame, missing: dict[str, list[str]],
           command: str) -> str:
    by_paper = {f.paper: f for f in fits}
    lines = ["# Calibrated basis: the papers' cost constants fitted on their own figures (issue 51 part 3)", "",
             "Per paper, T_w = sum of c_term x count_term over the model's declared terms (conf/calibration.yaml, "
             "declared before the fit), the c's non-negative and shared by the paper's strategies, fitted by "
             "non-negative least squares on the relative errors of the `fit` figures and judged on the `heldout` "
             "figures, which never enter the fit (harness/report/calibration/). Constants are in nanoseconds of "
             "the paper's machine per counted unit. Intervals: `sampling` is the 2.5-97.5 percentile range of a "
             "bootstrap over the count mode's standard errors (objects sampled); `leave-one-out` the range of "
             "the constants fitted without each fit figure (only when there are more fit figures than "
             "constants).", "", "## Commands", "", "```"]
    for paper, m in models.items():
        for run in m.runs.values():
            lines.append(count_command(paper, run))
    lines += [command, "```", "",
              "Each count command was run alone, one at a time, on this 2-core machine (`<COUNTS>` is the counts "
              "folder the calibration reads).", ""]
    for paper, m in models.items():
        lines += [f"## {paper}", ""]
        if m.status == "too_few_figures":
            lines += [f"Not calibrated: too few absolute figures. {m.reason}", ""]
            continue
        lines += [f"- Terms: {', '.join(m.terms)} ({len(m.fit)} fit figures, {len(m.heldout)} held out). {m.why}",
                  f"- The paper's setting: {m.paper_size}."]
        for run in m.runs.values():
            lines.append(f"- Run `{run.name}`: {run.gap}.")
        if missing.get(paper):
            lines += ["", "Not fitted: the counts of these figures are missing: " + "; ".join(missing[paper]), ""]
            continue
        s = sizes[sizes["paper"] == paper] if len(sizes) else sizes
        if len(s):
            lines += ["", "| run | strategy | events counted (full stream) | object sample | wall s | peak GiB |",
                      "|---|---|---:|---:|---:|---:|"]
            for _, r in s.iterrows():
                lines.append(f"| {r['run']} | {r['strategy']} | {r['events_full']:,.0f} | {r['object_sample']:g} | "
                             f"{r['wall_s']:,.0f} | {r['peak_gib']:.1f} |")
        f = by_paper[paper]
        lines += ["", "| constant | value (ns per unit) | sampling 95% | leave-one-out range |", "|---|---:|---:|---:|"]
        for j, t in enumerate(f.terms):
            loo = f"{_ns(f.loo[0, j])} - {_ns(f.loo[1, j])}" if f.loo is not None else "exactly determined"
            lines.append(f"| c_{t} | {_ns(f.constants[j])} | {_ns(f.sampling[0, j])} - {_ns(f.sampling[1, j])} | "
                         f"{loo} |")
        lines += ["", "| figure | role | strategy | published | predicted | error | sampling 95% | "
                      "leave-one-out error | line |", "|---|---|---|---:|---:|---:|---:|---:|---|"]
        for r in f.figures:
            strat = r["strategy"] + (f" / {r['over']}" if r["over"] else "")
            band = (f"{_val(r['pred_lo'], r['unit'])} - {_val(r['pred_hi'], r['unit'])}"
                    if math.isfinite(r["pred_lo"]) else "-")
            lines.append(f"| {r['figure']} ({r['measure']}) | {r['role']} | {strat} | "
                         f"{_val(r['published'], r['unit'])} "
                         f"{r['unit']} | {_val(r['predicted'], r['unit'])} | {_pct(r['rel_error'])} | {band} | "
                         f"{_pct(r['loo_rel_error'])} | {r['line']} |")
        held = [abs(r["rel_error"]) for r in f.figures if r["role"] == "heldout" and math.isfinite(r["rel_error"])]
        fit_err = [abs(r["rel_error"]) for r in f.figures if r["role"] == "fit" and math.isfinite(r["rel_error"])]
        lines += ["", f"Held-out error: median |error| {_abs_pct(float(np.median(held))) if held else '-'} over "
                      f"{len(held)} figures (largest {_abs_pct(max(held)) if held else '-'}); on the fit figures "
                      f"median |error| {_abs_pct(float(np.median(fit_err))) if fit_err else '-'}.", ""]
        unjudged = missing.get(f"{paper} (held out, not judged)")
        if unjudged:
            lines += ["Held-out figures not judged, their counts missing: " + "; ".join(unjudged) + ".", ""]
    return "\n".join(lines) + "\n"


def write(out: Path, page: str, constants: pd.DataFrame, figures: pd.DataFrame, sizes: pd.DataFrame) -> list[Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "calibration.md", out / "constants.csv", out / "figures.csv", out / "figures.parquet",
             out / "sizes.csv"]
    paths[0].write_text(page)
    constants.to_csv(paths[1], index=False)
    figures.to_csv(paths[2], index=False)
    figures.to_parquet(paths[3], index=False)
    sizes.to_csv(paths[4], index=False)
    return paths
