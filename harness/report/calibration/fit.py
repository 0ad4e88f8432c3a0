"""Fitting a paper's non-negative cost constants on its fit figures, and judging them on the
figures held out (issue 51 part 3).

A figure's prediction for constants c (seconds per counted unit on the paper's machine): the
busiest worker's time sum_k c_k x[w, k], its maximum over workers in each window (for a latency,
the sum over workers: a query's own counts) summed over the windows and divided by the figure's
units (harness/report/calibration/vectors.py), turned into the published unit (tuples/s = 1 /
seconds per event; ms). Because the busiest worker depends on c, the fit alternates: with the
busiest worker of each window fixed, the prediction is linear in c and scipy.optimize.nnls
solves for the non-negative c minimising the squared relative errors (each row divided by its
published value: the figures span four orders of magnitude, and an absolute fit would see only
the largest); then the busiest workers are re-read under the new c, until they no longer change
(the best c seen is kept if they cycle).

Intervals, two kinds, both reported:
- sampling: a parametric bootstrap over the count mode's standard errors (each sampled counter
  redrawn from a normal with its error, clipped at 0, the fit redone; 2.5-97.5 percentiles of
  200 draws). It is the uncertainty the object sample adds; with exact counts it is a point.
- leave-one-out over the fit figures, when there are more fit figures than constants: the range
  of the constants fitted without each figure, and each left-out figure's prediction error (what
  the model does on a figure it did not see, within the fit set). With as many figures as
  constants the fit is exactly determined and there is nothing to leave out.
A bootstrap over the fit figures themselves was rejected: with 2-6 figures its resamples are
mostly degenerate (fewer distinct figures than constants).

Held-out figures never enter a fit: `fit_constants` receives the fit figures' counts alone
(`FitFigure` rows of role fit), and `predict` only evaluates.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from harness.core.fitting import nnls_relative
from harness.report.calibration.declaration import TERMS, Figure
from harness.report.calibration.vectors import Block

BOOTSTRAP = 200
MAX_ITER = 50


@dataclass
class FitFigure:
    """A declared figure with its counts: `block` the strategy's, `over` the ratio's denominator's."""

    figure: Figure
    block: Block
    over: Block | None = None


def target_seconds(fig: Figure) -> float:
    """The published value as seconds per unit (what the model predicts before conversion)."""
    if fig.measure == "throughput":
        return 1.0 / fig.value
    if fig.unit == "ms":
        return fig.value / 1e3
    raise ValueError(f"figure {fig.id}: measure={fig.measure!r} has no seconds-per-unit target; allowed for fitting: "
                     "throughput, latency, knn_update, insertion, deletion")


def _cols(terms) -> list[int]:
    return [TERMS.index(t) for t in terms]


def busiest_seconds(block: Block, c: np.ndarray, terms, x: np.ndarray | None = None) -> float:
    """Sum over windows of the busiest worker's predicted time (every worker's, for a summed
    block: a query's own counts), per unit (seconds)."""
    x = block.x if x is None else x
    if not block.units > 0:
        return float("nan")
    t = x[:, :, _cols(terms)] @ c
    return float((t.sum(axis=1) if block.summed else t.max(axis=1)).sum() / block.units)


def spread_seconds(block: Block, c: np.ndarray, terms, x: np.ndarray | None = None) -> float:
    x = block.x if x is None else x
    t = x[:, :, _cols(terms)] @ c
    return float((t.max(axis=1) - t.min(axis=1)).sum() / block.units) if block.units > 0 else float("nan")


def predict(ff: FitFigure, c: np.ndarray, terms, x: np.ndarray | None = None,
            x_over: np.ndarray | None = None) -> float:
    """The figure's predicted value in its published unit."""
    m = ff.figure.measure
    if m == "spread":
        return spread_seconds(ff.block, c, terms, x) * 1e3
    s = busiest_seconds(ff.block, c, terms, x)
    if m == "throughput":
        return 1.0 / s if s > 0 else float("inf")
    if m == "throughput_ratio":
        s_over = busiest_seconds(ff.over, c, terms, x_over)
        return s_over / s if s > 0 else float("inf")
    return s * 1e3


def _row(block: Block, c: np.ndarray, terms, x: np.ndarray) -> tuple[np.ndarray, tuple]:
    """The linear row of the busiest workers under c (per window), and which workers they were."""
    xs = x[:, :, _cols(terms)]
    if block.summed:
        return xs.sum(axis=(0, 1)) / block.units, ()
    pick = np.argmax(xs @ c, axis=1)
    return xs[np.arange(len(pick)), pick].sum(axis=0) / block.units, tuple(pick.tolist())


def _start(rows: list[FitFigure], terms, xs) -> np.ndarray:
    """Initial weights that make every term count: the inverse of each term's mean over the
    fit figures' cells (scale-free), so the first busiest worker is the one with most work."""
    cols = _cols(terms)
    means = np.array([np.mean([x[:, :, j].mean() for x in xs]) for j in cols])
    return np.where(means > 0, 1.0 / np.where(means > 0, means, 1.0), 0.0)


def _objective(rows, c, terms, xs) -> float:
    r = [busiest_seconds(ff.block, c, terms, x) / target_seconds(ff.figure) - 1 for ff, x in zip(rows, xs)]
    return float(np.sum(np.square(r)))


def fit_constants(rows: list[FitFigure], terms, xs: list[np.ndarray] | None = None) -> np.ndarray:
    """Non-negative constants (seconds per count, in `terms` order) fitted on `rows` (fit figures
    only; module docstring). Refuses more terms than figures and held-out or ratio figures."""
    for ff in rows:
        if ff.figure.role != "fit":
            raise ValueError(f"figure {ff.figure.id}: role={ff.figure.role!r} cannot be fitted on; allowed: fit")
    if len(terms) > len(rows):
        raise ValueError(f"terms={list(terms)!r}: {len(terms)} constants for {len(rows)} fit figure(s) is refused; "
                         f"allowed: at most {len(rows)} terms")
    xs = [ff.block.x for ff in rows] if xs is None else xs
    y = np.array([target_seconds(ff.figure) for ff in rows])
    c = _start(rows, terms, xs)
    best, best_obj, seen = None, np.inf, set()
    for _ in range(MAX_ITER):
        lin = [_row(ff.block, c, terms, x) for ff, x in zip(rows, xs)]
        key = tuple(p for _, p in lin)
        c_new = nnls_relative(np.array([a for a, _ in lin]), y)
        obj = _objective(rows, c_new, terms, xs)
        if obj < best_obj:
            best, best_obj = c_new, obj
        if key in seen:
            break
        seen.add(key)
        c = c_new if np.any(c_new > 0) else c
    return best if best is not None else c_new


@dataclass
class Fit:
    paper: str
    terms: tuple[str, ...]
    constants: np.ndarray
    sampling: np.ndarray  # (2, terms): 2.5 and 97.5 percentiles of the bootstrap over the counts' errors
    loo: np.ndarray | None  # (2, terms): range over leave-one-out fits; None when exactly determined
    figures: list[dict] = field(default_factory=list)  # one row per figure (fit and held out)


def _draw(block: Block | None, rng) -> np.ndarray | None:
    if block is None:
        return None
    return np.clip(block.x + block.se * rng.standard_normal(block.x.shape), 0, None)


def calibrate(paper: str, terms, fit_rows: list[FitFigure], heldout_rows: list[FitFigure],
              bootstrap: int = BOOTSTRAP, seed: int = 0) -> Fit:
    """The paper's constants, their intervals, and every figure's prediction and error."""
    terms = tuple(terms)
    c = fit_constants(fit_rows, terms)
    rng = np.random.default_rng(seed)
    draws, held_draws = [], []
    for _ in range(bootstrap):
        xs = [_draw(ff.block, rng) for ff in fit_rows]
        cb = fit_constants(fit_rows, terms, xs)
        draws.append(cb)
        held_draws.append([predict(ff, cb, terms, _draw(ff.block, rng), _draw(ff.over, rng))
                           for ff in heldout_rows])
    draws = np.array(draws) if draws else np.array([c])
    sampling = np.percentile(draws, [2.5, 97.5], axis=0)
    held_draws = np.array(held_draws) if bootstrap else np.zeros((0, len(heldout_rows)))
    loo, loo_pred = None, {}
    if len(fit_rows) > len(terms):
        cs = []
        for i, ff in enumerate(fit_rows):
            ci = fit_constants(fit_rows[:i] + fit_rows[i + 1:], terms)
            cs.append(ci)
            loo_pred[ff.figure.id] = predict(ff, ci, terms)
        cs = np.array(cs)
        loo = np.vstack([cs.min(axis=0), cs.max(axis=0)])
    figures = []
    for rows, role in ((fit_rows, "fit"), (heldout_rows, "heldout")):
        for j, ff in enumerate(rows):
            f = ff.figure
            pred = predict(ff, c, terms)
            row = {"paper": paper, "figure": f.id, "role": role, "measure": f.measure, "strategy": f.strategy,
                   "over": f.over or "", "run": f.run, "line": f.line, "unit": f.unit, "published": f.value,
                   "predicted": pred, "rel_error": pred / f.value - 1, "pred_lo": np.nan, "pred_hi": np.nan,
                   "loo_predicted": loo_pred.get(f.id, np.nan)}
            row["loo_rel_error"] = row["loo_predicted"] / f.value - 1
            if role == "heldout" and len(held_draws):
                col = held_draws[:, j]
                col = col[np.isfinite(col)]
                if len(col):
                    row["pred_lo"], row["pred_hi"] = np.percentile(col, [2.5, 97.5])
            figures.append(row)
    return Fit(paper, terms, c, sampling, loo, figures)
