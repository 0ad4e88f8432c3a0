"""The comparisons behind a claim's verdict (harness/report/claims/__init__.py): a run's value of a metric
with its repetition interval, two values compared beyond the noise, and the checks of the kinds
that read more than one cell at a time (`scales`, `linear`, `gap_grows`); `compare` runs the
per-cell kinds (`better`, `ratio_at_least`, `bound`, `between`).

A timing with no interval of its own borrows the relative interval of its run's busiest-worker time
(NOISE_REFERENCE); a count or a model output is a point. Two intervals that overlap decide nothing:
an outcome is HOLD, FAIL or NOISE. Two points that tie (deterministic counts or model outputs,
equal) are SKIP, "not exercised": the experiment did not separate them (issue 48), unless the
claim says `check.equality_ok: true` (the paper claims "at least as good"), where a tie holds. A
cell whose declared precondition failed (harness/report/claims/preconditions.py) is SKIP too.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.report import metrics

CELL = ("dataset", "workload", "workers", "x", "facet")  # one configuration of a preset's sweep
# the metrics whose figure depends on the basis: the column each basis reads
BASIS_COLUMNS = {"throughput_eps": {"compute": "throughput_compute_eps", "network": "throughput_network_eps"}}
# a derived basis (harness/report/claims/bases.py: projected, calibrated) fills throughput_<basis>_eps
DERIVED_COLUMN = "throughput_{}_eps"
LATENCY_CURVE = "latency_curve"  # per basis, [[rate events/s, mean latency ms], ...]
COMMON_RATE_FRACTION = 0.7  # the common input rate of a latency comparison, over the slowest's throughput
TIME_UNITS = ("s", "ms", "us", "events/s", "messages/s")  # metrics that are timings (noisy) rather than counts
NOISE_REFERENCE = "worker_busy_max_s"  # a timing every run repeats, whose interval a timing without one borrows


def cell_label(cell: tuple) -> str:
    ds, wl, w, x, facet = (list(cell) + [None] * 5)[:5]
    text = f"{wl}/{ds}/{num(w)}w"
    if x is not None and not (isinstance(x, float) and math.isnan(x)):
        text += f" at x={num(x)}"
    if facet is not None and not (isinstance(facet, float) and math.isnan(facet)):
        text += f" ({facet})"
    return text


def num(v) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{v:g}"
    return str(v)


# ---------------------------------------------------------------------------------- values, noise


@dataclass
class Value:
    mid: float
    lo: float
    hi: float
    how: str = ""  # "" measured interval; "point"; "borrowed"; "model" (zero-width throughput)

    def show(self, metric: str) -> str:
        text = metrics.show(metric, self.mid, unit=True)
        if self.lo < self.hi:
            text += f" [{metrics.show(metric, self.lo)}-{metrics.show(metric, self.hi)}]"
        if self.how == "model":
            text += " (model output)"
        return text


def _float(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _value(row: pd.Series, column: str, metric: str) -> Value | None:
    mid = _float(row.get(column))
    if not np.isfinite(mid) and not (mid == float("inf")):
        return None
    lo, hi = _float(row.get(f"{column}_ci_lo")), _float(row.get(f"{column}_ci_hi"))
    if np.isfinite(lo) and np.isfinite(hi):
        if lo == hi and column in {c for m in BASIS_COLUMNS.values() for c in m.values()}:
            return Value(mid, lo, hi, "model" if column.endswith("network_eps") else "")
        if is_derived_column(column):  # a derived basis's figure: a model output, with its band
            return Value(mid, min(lo, mid), max(hi, mid), "model")
        return Value(mid, min(lo, mid), max(hi, mid))
    if metrics.metric(metric).unit in TIME_UNITS:
        ref, rlo, rhi = (_float(row.get(NOISE_REFERENCE)), _float(row.get(f"{NOISE_REFERENCE}_ci_lo")),
                         _float(row.get(f"{NOISE_REFERENCE}_ci_hi")))
        if ref > 0 and np.isfinite(rlo) and np.isfinite(rhi):
            a, b = rlo / ref, rhi / ref  # a timing varies as the work's time does; a rate inversely
            if metrics.metric(metric).unit.endswith("/s"):
                a, b = 1 / b if b > 0 else a, 1 / a if a > 0 else b
            return Value(mid, mid * min(a, 1.0), mid * max(b, 1.0), "borrowed")
    return Value(mid, mid, mid, "point")


def _latency_at(row: pd.Series, basis: str, rate: float) -> Value | None:
    """The run's mean latency at input rate `rate` on `basis`, from its latency curve (linear
    between the rates it was modelled at; below the lowest, the lowest's: the queues are empty)."""
    raw = row.get(LATENCY_CURVE)
    if not isinstance(raw, str) or not raw:
        return None
    curve = json.loads(raw).get(basis)
    if not curve:
        return None
    pts = np.asarray(sorted(curve), dtype=np.float64)
    if rate > pts[-1, 0] * 1.0001:
        return None  # beyond the curve: the run saturates there
    v = float(np.interp(rate, pts[:, 0], pts[:, 1]))
    return Value(v, v, v, "point")


# ---------------------------------------------------------------------------------------- checks

HOLD, FAIL, NOISE = True, False, None
SKIP = "not exercised"  # the cell did not put the claim to the test: a tie of points, or a failed precondition
TIE = "a tie: the experiment did not separate them"


def is_skip(outcome) -> bool:
    """The outcome SKIP (compared by value: HOLD, FAIL and NOISE are True, False and None)."""
    return isinstance(outcome, str) and outcome == SKIP


def is_tie(a: Value, b: Value) -> bool:
    """Two points (counts, model outputs: no interval) with the same value, to rounding."""
    return (a.lo == a.hi and b.lo == b.hi and math.isfinite(a.mid) and math.isfinite(b.mid)
            and math.isclose(a.mid, b.mid, rel_tol=1e-9, abs_tol=1e-12))


def _better(a: Value, b: Value, higher: bool, equality_ok: bool = False):
    """a beats b beyond the noise (HOLD), b is better beyond it (FAIL), the intervals overlap
    (NOISE), or two points tie (SKIP: the experiment did not separate them; HOLD when the claim
    allows equality). Points otherwise compare strictly."""
    if is_tie(a, b):
        return HOLD if equality_ok else SKIP
    if not higher:
        a, b = Value(-a.mid, -a.hi, -a.lo, a.how), Value(-b.mid, -b.hi, -b.lo, b.how)
    if a.lo > b.hi:
        return HOLD
    if a.hi < b.lo or (a.lo == a.hi and b.lo == b.hi):  # two distinct points: the larger wins
        return FAIL if a.mid <= b.mid else NOISE
    return NOISE


def worst(outcomes: list):
    """One cell's outcome from its comparisons: a failure first, then the noise, then a tie."""
    if any(o is FAIL for o in outcomes):
        return FAIL
    if any(o is NOISE for o in outcomes):
        return NOISE
    return SKIP if any(is_skip(o) for o in outcomes) else HOLD


def ratio(a: Value, b: Value, higher: bool) -> tuple[float, float, float]:
    """subject / other (other / subject when lower is better): the ratio and its extremes."""
    if not higher:
        a, b = b, a
    div = lambda x, y: x / y if y > 0 else float("inf")  # noqa: E731
    return div(a.mid, b.mid), div(a.lo, b.hi), div(a.hi, b.lo)


def _outcome(lo: float, hi: float, value: float) -> bool | None:
    return HOLD if lo >= value else (FAIL if hi < value else NOISE)


def _mark(ok) -> str:
    if is_skip(ok):
        return f"not exercised: {TIE}"
    return {HOLD: "yes", FAIL: "no", NOISE: "within the noise"}[ok]


class Reader:
    """One claim's rows on one basis: each (variant, cell)'s value of the claim's metric."""

    def __init__(self, metric: str, basis: str | None):
        self.metric, self.basis = metric, basis
        self.column = basis_column(metric, basis)
        self.widen = None  # the preset's A/A spread widens every value read (harness/report/claims/aa_pairs.py)

    def get(self, g: pd.DataFrame, variant: str, rate: float | None = None) -> Value | None:
        value = self._get(g, variant, rate)
        return self.widen(value) if self.widen is not None else value

    def _get(self, g: pd.DataFrame, variant: str, rate: float | None = None) -> Value | None:
        hit = g[g["variant"] == variant]
        if hit.empty:
            return None
        row = hit.iloc[-1]
        if self.metric == "latency_mean_ms" and self.basis is not None and rate is not None:
            at = _latency_at(row, self.basis, rate)
            if at is not None:
                return at
        if self.column not in row.index:
            return None
        return _value(row, self.column, self.metric)

    def common_rate(self, g: pd.DataFrame, variants: list[str]) -> float | None:
        """0.7x the slowest compared variant's throughput on this basis (latency claims)."""
        if self.metric != "latency_mean_ms" or self.basis is None:
            return None
        col = BASIS_COLUMNS["throughput_eps"][self.basis]
        eps = [_float(r) for r in g.loc[g["variant"].isin(variants), col]] if col in g else []
        eps = [e for e in eps if np.isfinite(e) and e > 0]
        return COMMON_RATE_FRACTION * min(eps) if eps else None


def compare(reader: Reader, rows: pd.DataFrame, keys: list[str], chk: dict, higher: bool,
            subjects: list[str], others: list[str], unmet=None, reread=None) -> tuple[list, list[str], list[str]]:
    """better / ratio_at_least / bound / between, per cell: outcomes, notes, missing cells.
    `reread(g, subject, values)`: the values read otherwise (a throughput after the last move,
    harness/report/claims/preconditions.py `read_after_moves`) and a note saying so, or None.
    `unmet(g, subject, values)` (the claim's preconditions, harness/report/claims/preconditions.py): the
    reasons the cell's runs `g` did not exercise the claim, whose outcome is then SKIP with them
    (`values`: each compared variant's value read, by name)."""
    out, notes, missing = [], [], []
    metric, kind = reader.metric, chk["kind"]
    equality_ok = bool(chk.get("equality_ok"))
    for key, g in rows.groupby(keys, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        where = cell_label(key)
        rate = reader.common_rate(g, subjects + others)
        at = f" at {metrics.show('throughput_eps', rate)} events/s" if rate else ""
        for subject in subjects:
            mine = reader.get(g, subject, rate)
            theirs = {o: reader.get(g, o, rate) for o in others}
            absent = [v for v, val in ((subject, mine), *theirs.items()) if val is None]
            if absent:
                missing.append(f"{where}: no usable run of {', '.join(map(str, absent))}")
                continue
            how = None
            if reread is not None:
                read, how = reread(g, subject, {subject: mine, **theirs})
                mine, theirs = read[subject], {o: read[o] for o in others}
            if kind == "bound":
                lo, hi = chk.get("min"), chk.get("max")
                ok_lo = HOLD if lo is None else _outcome(mine.lo, mine.hi, float(lo))
                ok_hi = HOLD if hi is None else _outcome(-mine.hi, -mine.lo, -float(hi))
                ok = FAIL if FAIL in (ok_lo, ok_hi) else (NOISE if NOISE in (ok_lo, ok_hi) else HOLD)
                rng = " and ".join(s for s in (f">= {lo}" if lo is not None else "",
                                                f"<= {hi}" if hi is not None else "") if s)
                note = f"{where}: {subject} {mine.show(metric)} (allowed {rng}: {_mark(ok)})"
            elif kind == "between":
                vals = [v.mid for v in theirs.values()]
                ok = HOLD if min(vals) <= mine.mid <= max(vals) else FAIL
                note = (f"{where}: {subject} {mine.show(metric)} between {metrics.show(metric, min(vals))} "
                        f"and {metrics.show(metric, max(vals))} of {', '.join(map(str, others))} ({_mark(ok)})")
            elif kind == "better":
                ok = worst([_better(mine, v, higher, equality_ok) for v in theirs.values()])
                detail = ", ".join(f"{o} {v.show(metric)}" for o, v in theirs.items())
                note = f"{where}{at}: {subject} {mine.show(metric)}; {detail} ({_mark(ok)})"
            else:  # ratio_at_least
                value = float(chk.get("value") or 1.0)
                ratios = {o: ratio(mine, v, higher) for o, v in theirs.items()}
                # a tie of points: a ratio of 1 (or 0/0) the experiment did not separate, unless the
                # claim admits equality (a value <= 1, or check.equality_ok)
                each = [(HOLD if equality_ok or value <= 1 else SKIP) if is_tie(mine, theirs[o])
                        else _outcome(lo, hi, value) for o, (_, lo, hi) in ratios.items()]
                ok = worst(each)
                detail = ", ".join(f"x{r:.2f}" + (f" [{lo:.2f}-{hi:.2f}]" if lo < hi else "") + f" vs {o}"
                                   for o, (r, lo, hi) in ratios.items())
                note = f"{where}{at}: {subject} {mine.show(metric)}; {detail} (needs x{value:g}: {_mark(ok)})"
            if how:
                note += f"; {how}"
            reasons = unmet(g, subject, {subject: mine, **theirs}) if unmet is not None else []
            if reasons:
                ok = SKIP
                note += f"; not exercised: {'; '.join(reasons)}"
            notes.append(note)
            out.append(ok)
    return out, notes, missing


def fit_line(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float]:
    """Least squares y = a + b x: slope, intercept, R^2, and the slope's standard error."""
    b, a = np.polyfit(x, y, 1)
    resid = y - (a + b * x)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((resid ** 2).sum()) / ss_tot if ss_tot > 0 else 0.0
    sxx = float(((x - x.mean()) ** 2).sum())
    se = math.sqrt(float((resid ** 2).sum()) / (len(x) - 2) / sxx) if len(x) > 2 and sxx > 0 else float("nan")
    return b, a, r2, se


def scales(reader: Reader, rows: pd.DataFrame, subject: str, value: float,
            higher: bool) -> tuple[list, list[str], list[str]]:
    """Per (dataset, workload, x, facet): log metric on log workers over every worker count; the
    fitted growth from the fewest to the most workers, with the slope's 2-sigma band (three or more
    worker counts) or the end runs' intervals (two)."""
    out, notes, missing = [], [], []
    for key, g in rows.groupby(["dataset", "workload", "x", "facet"], dropna=False, sort=True):
        s = g[g["variant"] == subject].sort_values("workers")
        vals = [(float(w), reader.get(s[s["workers"] == w], subject)) for w in s["workers"]]
        vals = [(w, v) for w, v in vals if v is not None and v.mid > 0]
        where = cell_label((key[0], key[1], "*", key[2], key[3]))
        if len(vals) < 2:
            missing.append(f"{where}: {subject} at fewer than two worker counts")
            continue
        w = np.log([v[0] for v in vals])
        y = np.log([v[1].mid for v in vals])
        span = w[-1] - w[0]
        if len(vals) >= 3:
            b, _, r2, se = fit_line(w, y)
            growth, lo, hi = (math.exp(b * span), math.exp((b - 2 * se) * span), math.exp((b + 2 * se) * span))
            fit = f"fitted over {len(vals)} worker counts (R^2 {r2:.2f})"
        else:
            (_, first), (_, last) = vals
            growth = last.mid / first.mid
            lo, hi = (last.lo / first.hi if first.hi > 0 else growth), (last.hi / first.lo if first.lo > 0 else growth)
            fit = "from two worker counts"
        if not higher:  # a lower-is-better metric scales when it falls
            growth, lo, hi = 1 / growth, 1 / hi, 1 / lo
        ok = _outcome(lo, hi, value)
        out.append(ok)
        pts = ", ".join(f"{math.exp(wi):g}w: {metrics.show(reader.metric, v.mid)}" for wi, (_, v) in zip(w, vals))
        notes.append(f"{where}: {subject} x{growth:.2f} [{lo:.2f}-{hi:.2f}] from {math.exp(w[0]):g} to "
                     f"{math.exp(w[-1]):g} workers, {fit} ({pts}; needs x{value:g}: {_mark(ok)})")
    return out, notes, missing


def linear(reader: Reader, rows: pd.DataFrame, subject: str, min_r2: float) -> tuple[list, list[str], list[str]]:
    """Per (dataset, workload, workers, facet): the subject's metric against x, a least-squares
    line with a positive slope and R^2 >= min_r2 over at least three x values."""
    out, notes, missing = [], [], []
    for key, g in rows.groupby(["dataset", "workload", "workers", "facet"], dropna=False, sort=True):
        s = g[g["variant"] == subject].assign(xv=lambda d: pd.to_numeric(d["x"], errors="coerce"))
        s = s[np.isfinite(s["xv"])].sort_values("xv")
        pts = [(float(r["xv"]), reader.get(s.loc[[i]], subject)) for i, r in s.iterrows()]
        pts = [(x, v.mid) for x, v in pts if v is not None and np.isfinite(v.mid)]
        where = cell_label((key[0], key[1], key[2], "*", key[3]))
        if len(pts) < 3:
            missing.append(f"{where}: {subject} at fewer than three x values")
            continue
        x, y = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
        slope, _, r2, _ = fit_line(x, y)
        ok = HOLD if slope > 0 and r2 >= min_r2 else FAIL
        out.append(ok)
        shown = ", ".join(f"{xi:g}: {metrics.show(reader.metric, yi)}" for xi, yi in pts)
        notes.append(f"{where}: {subject} {reader.metric} over x ({shown}): slope {slope:.3g}, R^2 {r2:.2f} "
                     f"(needs > 0 and >= {min_r2}: {_mark(ok)})")
    return out, notes, missing


def gap_grows(reader: Reader, rows: pd.DataFrame, subject: str, others: list[str],
               higher: bool) -> tuple[list, list[str], list[str]]:
    """Per (dataset, workload, workers, facet) and other: the subject leads at the largest x
    (beyond the noise) and its advantage there exceeds the one at the smallest x."""
    out, notes, missing = [], [], []
    for key, g in rows.groupby(["dataset", "workload", "workers", "facet"], dropna=False, sort=True):
        xs = sorted(g["x"].dropna().unique(), key=lambda v: (_float(v), str(v)))
        where = cell_label((key[0], key[1], key[2], "*", key[3]))
        if len(xs) < 2:
            missing.append(f"{where}: fewer than two x values")
            continue
        for other in others:
            ends = [(reader.get(g[g["x"] == xv], subject), reader.get(g[g["x"] == xv], other)) for xv in (xs[0], xs[-1])]
            if any(a is None or b is None for a, b in ends):
                missing.append(f"{where}: {subject} or {other} missing at x={num(xs[0])} or x={num(xs[-1])}")
                continue
            gaps = [ratio(a, b, higher)[0] for a, b in ends]
            lead = _better(*ends[1], higher)
            ok = FAIL if lead is FAIL or gaps[1] <= gaps[0] else lead
            out.append(ok)
            notes.append(f"{where}: {subject} vs {other}: x{gaps[0]:.2f} at x={num(xs[0])}, x{gaps[1]:.2f} at "
                         f"x={num(xs[-1])} (leads at the largest x: {_mark(lead)}; grows: "
                         f"{'yes' if gaps[1] > gaps[0] else 'no'}: {_mark(ok)})")
    return out, notes, missing


def basis_column(metric: str, basis: str | None) -> str:
    """The column a metric is read from on a basis: the measured bases' own (BASIS_COLUMNS), a
    derived basis's throughput_<basis>_eps for a throughput metric, else the metric itself."""
    own = BASIS_COLUMNS.get(metric, {})
    if basis in own:
        return own[basis]
    if own and basis is not None:
        return DERIVED_COLUMN.format(basis)
    return metric


def is_derived_column(column: str) -> bool:
    """A derived basis's throughput column (not the measured bases')."""
    measured = {c for m in BASIS_COLUMNS.values() for c in m.values()}
    return column.startswith("throughput_") and column.endswith("_eps") and column not in measured \
        and column != "throughput_eps" and column != "throughput_wall_eps"
