"""The papers' published claims (conf/claims.yaml), checked one by one against the runs table.

A claim names the preset whose runs it reads (`preset`, a file of conf/experiment/), a metric, a
subject strategy (a runs-table `variant`), the strategies it is compared with and where (its
`where` cells: dataset, workload, workers, x, facet). Its evidence is that preset's runs alone
(`evidence`): the newest code version's, the newest run per cell, with the runs that failed,
disagreed with the oracle or were too short to measure excluded and listed. A cell the claim
needs with no usable run makes the claim "not measured", naming the cell; nothing is dropped
silently.

Every comparison respects the runs' repetition intervals (`<metric>_ci_lo/_hi`): two intervals
that overlap decide nothing ("inconclusive"). A timing with no interval of its own borrows the
relative interval of its run's busiest-worker time (a timing repeated with it); a count or a
model output is a point. Verdicts: holds (every cell), partly (some cells hold, some fail),
does not hold (no cell holds, one fails at least), inconclusive (none fails, one is within the
noise at least), not measured.

Throughput claims are evaluated on both bases, compute-only (`throughput_compute_eps`) and under
the network model (`throughput_network_eps`), and report when the verdict flips between them.
Mean-latency claims compare the strategies at one common input rate, 0.7x the slowest one's
throughput on that basis, read off each run's latency curve (`latency_curve`).

Kinds: `better` (strictly, beyond the noise), `ratio_at_least` (subject / other >= value),
`scales` (a least-squares line of log metric on log workers over every worker count: the fitted
growth from the fewest to the most workers >= value), `bound` (the subject's own value within
[min, max]), `linear` (metric against x: positive slope, R^2 >= value), `gap_grows` (the subject
leads at the largest x, by more than at the smallest), `between` (the subject within the others'
range). `check.across: dataset | x` (with `check.variant`) compares one variant's runs on several
datasets or swept x values instead of several variants (SSTD Fig. 7, Skype Table 4).

A claim whose verdict may depend on the size (subscriptions, stored objects) may name a size sweep,
`sizes: size_<paper>` (conf/experiment/size_*.yaml): it is then also judged at every step of that
sweep, with the trend of its ratio against size (harness/report/sizes.py); its own verdict here
still reads its preset.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path

import numpy as np
import pandas as pd

import yaml

from harness.report import metrics, results
from harness.report.results import PROJECT_ROOT

CLAIMS_FILE = PROJECT_ROOT / "conf" / "claims.yaml"
PRESETS_DIR = PROJECT_ROOT / "conf" / "experiment"
KINDS = ("better", "ratio_at_least", "scales", "bound", "linear", "gap_grows", "between")
CELL = ("dataset", "workload", "workers", "x", "facet")  # one configuration of a preset's sweep
ACROSS = ("variant", "dataset", "x")  # what a claim's subject and others name (check.across; variant by default)
ACROSS_KINDS = ("better", "ratio_at_least", "gap_grows", "between")
SCOPES = ("paper", "extension")  # extension: the harness's own reading, outside the papers' tallies
BASES = ("compute", "network")
VERDICTS = ("holds", "partly", "does not hold", "inconclusive", "not measured")
# the metrics whose figure depends on the basis: the column each basis reads
BASIS_COLUMNS = {"throughput_eps": {"compute": "throughput_compute_eps", "network": "throughput_network_eps"}}
LATENCY_CURVE = "latency_curve"  # per basis, [[rate events/s, mean latency ms], ...]
COMMON_RATE_FRACTION = 0.7  # the common input rate of a latency comparison, over the slowest's throughput
TIME_UNITS = ("s", "ms", "us", "events/s", "messages/s")  # metrics that are timings (noisy) rather than counts
NOISE_REFERENCE = "worker_busy_max_s"  # a timing every run repeats, whose interval a timing without one borrows


@dataclass
class Verdict:
    claim: dict
    verdict: str  # one of VERDICTS, "partly" with its share: "partly (2/3)"
    comparisons: list[str] = field(default_factory=list)  # one line per cell, with our figures
    basis: str | None = None  # compute | network, or None for a metric the basis does not change
    excluded: list[str] = field(default_factory=list)  # runs of the preset left out, and why
    missing: list[str] = field(default_factory=list)  # cells the claim needs with no usable run
    runs: list[str] = field(default_factory=list)  # the run ids it read

    @property
    def kind(self) -> str:
        """The verdict without its share ("partly (2/3)" -> "partly")."""
        return self.verdict.split(" (")[0]


@dataclass
class ClaimResult:
    claim: dict
    verdicts: dict[str, Verdict]  # by basis; a single "any" for a basis-free metric

    @property
    def flips(self) -> bool:
        """The verdict differs between the compute-only and the network basis."""
        kinds = {v.kind for b, v in self.verdicts.items() if b in BASES and v.kind != "not measured"}
        return len(kinds) > 1

    def on(self, basis: str) -> Verdict:
        return self.verdicts.get(basis) or next(iter(self.verdicts.values()))


# ------------------------------------------------------------------------------------------ loading


def load_claims(path: Path = CLAIMS_FILE) -> list[dict]:
    return load_claims_from(yaml.safe_load(Path(path).read_text()) or [])


def load_claims_from(claims: list[dict]) -> list[dict]:
    """The claims, each checked for a preset, a known kind, metric and direction (a ValueError
    naming the claim, the field, its value and what is allowed)."""
    for c in claims:
        cid, chk = c.get("id"), c.get("check", {})
        if not isinstance(c.get("preset"), str) or not c["preset"]:
            raise ValueError(f"claim {cid!r}: preset={c.get('preset')!r} is invalid; allowed: the name of a preset "
                             f"in conf/experiment/ whose runs the claim reads")
        sizes = c.get("sizes")
        if sizes is not None and not (isinstance(sizes, str) and sizes.startswith("size_")
                                      and (PRESETS_DIR / f"{sizes}.yaml").exists()):
            raise ValueError(f"claim {cid!r}: sizes={sizes!r} is invalid; allowed: the name of a size sweep in "
                             f"conf/experiment/ (size_*.yaml) at whose every step the claim is also judged "
                             f"(harness/report/sizes.py)")
        if c.get("scope", "paper") not in SCOPES:
            raise ValueError(f"claim {cid!r}: scope={c.get('scope')!r} is invalid; allowed: {', '.join(SCOPES)}")
        if "experiment" in chk:
            raise ValueError(f"claim {cid!r}: check.experiment is no longer read; the claim reads its preset "
                             f"({c['preset']!r}) and compares at each of its cells")
        kind = chk.get("kind")
        if kind not in KINDS:
            raise ValueError(f"claim {cid!r}: check.kind={kind!r} is invalid; allowed: {', '.join(KINDS)}")
        try:
            metrics.metric(chk.get("metric"))
        except metrics.UnknownMetric as exc:
            raise ValueError(f"claim {cid!r}: check.metric: {exc}") from None
        if kind == "bound" and chk.get("min") is None and chk.get("max") is None:
            raise ValueError(f"claim {cid!r}: a bound claim needs check.min or check.max")
        if kind == "between" and len(chk.get("others") or []) < 2:
            raise ValueError(f"claim {cid!r}: a between claim needs two or more check.others (the values the "
                             f"subject lies between); got {chk.get('others')!r}")
        if kind in ("better", "ratio_at_least", "scales", "gap_grows"):
            higher_is_better(c)
        _check_across(c)
    return claims


def _check_across(claim: dict) -> None:
    """check.across (and check.variant, which only it uses): a known value, a comparison kind, one
    variant to compare on, and a subject that is not among the others."""
    chk, cid = claim["check"], claim.get("id")
    across = chk.get("across", "variant")
    if across not in ACROSS:
        raise ValueError(f"claim {cid!r}: check.across={across!r} is invalid; allowed: {', '.join(ACROSS)}")
    if across == "variant":
        if chk.get("variant") is not None:
            raise ValueError(f"claim {cid!r}: check.variant={chk['variant']!r} is only read with check.across: "
                             "dataset or x (the subject and others already name variants)")
        return
    kinds = (*ACROSS_KINDS, "bound") if across == "dataset" else ("better", "ratio_at_least", "between", "bound")
    if chk["kind"] not in kinds:
        raise ValueError(f"claim {cid!r}: check.across={across} needs a kind that compares a subject with others "
                         f"({', '.join(kinds)}), not check.kind={chk['kind']!r}")
    if not isinstance(chk.get("variant"), str) or not chk["variant"]:
        raise ValueError(f"claim {cid!r}: check.across={across} needs check.variant, the one variant (e.g. qttree) "
                         f"whose runs on the {across} values are compared; got {chk.get('variant')!r}")
    others = [str(o) for o in chk.get("others") or []]
    subjects = [str(v) for v in _subjects(chk)]
    if (not others and chk["kind"] != "bound") or set(subjects) & set(others):
        what = "dataset" if across == "dataset" else "swept x value"
        raise ValueError(f"claim {cid!r}: check.across={across} needs check.subject (a {what}) and check.others "
                         f"(others of them, without the subject); got {chk.get('subject')!r} and "
                         f"{chk.get('others')!r}")


def _subjects(chk: dict) -> list:
    """check.subject as a list (`between` may name several)."""
    s = chk.get("subject")
    return list(s) if isinstance(s, (list, tuple)) else [s]


def higher_is_better(claim: dict) -> bool:
    """The claim's direction: the registry's; `check.higher_is_better` only for an undirected metric."""
    chk = claim["check"]
    try:
        known = metrics.higher_is_better(chk["metric"])
    except metrics.UnknownMetric as exc:
        raise ValueError(f"claim {claim.get('id')!r}: {exc}") from None
    given = chk.get("higher_is_better")
    if known is None and given is None:
        raise ValueError(f"claim {claim.get('id')!r}: {chk['metric']} has no better direction in the metrics "
                         "registry; set check.higher_is_better")
    if known is not None and given is not None and bool(given) != known:
        raise ValueError(f"claim {claim.get('id')!r}: check.higher_is_better={given} contradicts the registry "
                         f"({chk['metric']}: {metrics.metric(chk['metric']).better} is better)")
    return known if known is not None else bool(given)


def is_basis_dependent(metric: str) -> bool:
    return metric in BASIS_COLUMNS or metric == "latency_mean_ms"


# ----------------------------------------------------------------------------------------- evidence


def _cell_frame(table: pd.DataFrame) -> pd.DataFrame:
    table = results.labelled(table)
    for col in (*CELL, "started_at", "status", "experiment"):
        if col not in table:
            table[col] = None
    return table


def _ok_mask(rows: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(usable, why not) per run: ok status, the oracle's answer (or no oracle), long enough."""
    why = pd.Series("", index=rows.index, dtype=object)
    why[rows["status"] != "ok"] = "failed"
    if "oracle_ok" in rows:
        bad = rows["oracle_ok"].map(lambda v: v is False or v == 0 or v == "False")
        why[(why == "") & bad] = "disagreed with the oracle"
    if "too_short" in rows:
        short = pd.to_numeric(rows["too_short"], errors="coerce").fillna(0) > 0
        why[(why == "") & short] = "too short to measure (bottleneck under measure.min_bottleneck_s)"
    return why == "", why


def evidence(preset: str, table: pd.DataFrame) -> tuple[pd.DataFrame, list[str], str | None]:
    """The runs a claim of `preset` reads: that preset's runs of the newest code version (the
    version of its newest run), the newest usable run per (variant, cell); with the notes of the
    runs left out (another code version, failed, the oracle's disagreement, too short) that would
    otherwise have been read, and the code version read."""
    table = _cell_frame(table)
    rows = table[table["experiment"] == preset].sort_values("started_at", kind="stable").reset_index(drop=True)
    excluded: list[str] = []
    version = None
    if "code_version" in rows and rows["code_version"].notna().any():
        version = rows["code_version"].dropna().iloc[-1]
        stale = rows[rows["code_version"] != version]
        if len(stale):
            excluded.append(f"{len(stale)} runs of older code versions "
                            f"({', '.join(sorted(map(str, stale['code_version'].dropna().unique()))[:3])}) "
                            f"left out; read: {version}")
        rows = rows[rows["code_version"] == version]
    usable, why = _ok_mask(rows)
    cell = rows[["variant", *CELL]].astype(str).agg("|".join, axis=1) if len(rows) else pd.Series(dtype=object)
    pos = pd.Series(np.arange(len(rows)), index=rows.index)  # rows are in the order they started
    last_usable = pos[usable].groupby(cell[usable]).max()
    for i in rows.index[~usable]:  # the runs left out that would otherwise have been read
        if cell[i] not in last_usable.index or pos[i] > last_usable[cell[i]]:
            r = rows.loc[i]
            excluded.append(f"{r['variant']} at {_cell_label(tuple(r[k] for k in CELL))}: {why[i]} "
                            f"({r.get('run_id', '?')})")
    newest_usable = rows[usable].groupby(cell[usable], sort=False).tail(1)
    good = newest_usable
    return good, excluded, version


def _numeric_x(rows: pd.DataFrame) -> pd.DataFrame:
    """Numeric x values compare, print and filter as numbers."""
    if len(rows) and rows["x"].notna().any():
        xn = pd.to_numeric(rows["x"], errors="coerce")
        if xn[rows["x"].notna()].notna().all():
            rows = rows.assign(x=xn.astype(object).where(rows["x"].notna(), None))
    return rows


def _where(rows: pd.DataFrame, where: dict) -> pd.DataFrame:
    for key, allowed in (where or {}).items():
        allowed = allowed if isinstance(allowed, list) else [allowed]
        if key in rows:
            rows = rows[rows[key].isin(allowed) | rows[key].astype(str).isin([str(a) for a in allowed])]
    return rows


def _cell_label(cell: tuple) -> str:
    ds, wl, w, x, facet = (list(cell) + [None] * 5)[:5]
    text = f"{wl}/{ds}/{_num(w)}w"
    if x is not None and not (isinstance(x, float) and math.isnan(x)):
        text += f" at x={_num(x)}"
    if facet is not None and not (isinstance(facet, float) and math.isnan(facet)):
        text += f" ({facet})"
    return text


def _num(v) -> str:
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


def _better(a: Value, b: Value, higher: bool) -> bool | None:
    """a beats b beyond the noise (True), b is at least as good beyond it (False), or the
    intervals overlap (None). Points compare strictly."""
    if not higher:
        a, b = Value(-a.mid, -a.hi, -a.lo, a.how), Value(-b.mid, -b.hi, -b.lo, b.how)
    if a.lo > b.hi:
        return HOLD
    if a.hi < b.lo or (a.lo == a.hi and b.lo == b.hi):  # two points: a tie is not a win
        return FAIL if a.mid <= b.mid else NOISE
    return NOISE


def _ratio(a: Value, b: Value, higher: bool) -> tuple[float, float, float]:
    """subject / other (other / subject when lower is better): the ratio and its extremes."""
    if not higher:
        a, b = b, a
    div = lambda x, y: x / y if y > 0 else float("inf")  # noqa: E731
    return div(a.mid, b.mid), div(a.lo, b.hi), div(a.hi, b.lo)


def _outcome(lo: float, hi: float, value: float) -> bool | None:
    return HOLD if lo >= value else (FAIL if hi < value else NOISE)


def _mark(ok: bool | None) -> str:
    return {HOLD: "yes", FAIL: "no", NOISE: "within the noise"}[ok]


class _Reader:
    """One claim's rows on one basis: each (variant, cell)'s value of the claim's metric."""

    def __init__(self, metric: str, basis: str | None):
        self.metric, self.basis = metric, basis
        self.column = BASIS_COLUMNS.get(metric, {}).get(basis, metric)

    def get(self, g: pd.DataFrame, variant: str, rate: float | None = None) -> Value | None:
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


def _compare(reader: _Reader, rows: pd.DataFrame, keys: list[str], chk: dict, higher: bool,
             subjects: list[str], others: list[str]) -> tuple[list, list[str], list[str]]:
    """better / ratio_at_least / bound / between, per cell: outcomes, notes, missing cells."""
    out, notes, missing = [], [], []
    metric, kind = reader.metric, chk["kind"]
    for key, g in rows.groupby(keys, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        where = _cell_label(key)
        rate = reader.common_rate(g, subjects + others)
        at = f" at {metrics.show('throughput_eps', rate)} events/s" if rate else ""
        for subject in subjects:
            mine = reader.get(g, subject, rate)
            theirs = {o: reader.get(g, o, rate) for o in others}
            absent = [v for v, val in ((subject, mine), *theirs.items()) if val is None]
            if absent:
                missing.append(f"{where}: no usable run of {', '.join(map(str, absent))}")
                continue
            if kind == "bound":
                lo, hi = chk.get("min"), chk.get("max")
                ok_lo = HOLD if lo is None else _outcome(mine.lo, mine.hi, float(lo))
                ok_hi = HOLD if hi is None else _outcome(-mine.hi, -mine.lo, -float(hi))
                ok = FAIL if FAIL in (ok_lo, ok_hi) else (NOISE if NOISE in (ok_lo, ok_hi) else HOLD)
                rng = " and ".join(s for s in (f">= {lo}" if lo is not None else "",
                                                f"<= {hi}" if hi is not None else "") if s)
                notes.append(f"{where}: {subject} {mine.show(metric)} (allowed {rng}: {_mark(ok)})")
            elif kind == "between":
                vals = [v.mid for v in theirs.values()]
                ok = HOLD if min(vals) <= mine.mid <= max(vals) else FAIL
                notes.append(f"{where}: {subject} {mine.show(metric)} between {metrics.show(metric, min(vals))} "
                             f"and {metrics.show(metric, max(vals))} of {', '.join(map(str, others))} ({_mark(ok)})")
            elif kind == "better":
                each = [_better(mine, v, higher) for v in theirs.values()]
                ok = FAIL if FAIL in each else (NOISE if NOISE in each else HOLD)
                detail = ", ".join(f"{o} {v.show(metric)}" for o, v in theirs.items())
                notes.append(f"{where}{at}: {subject} {mine.show(metric)}; {detail} ({_mark(ok)})")
            else:  # ratio_at_least
                value = float(chk.get("value") or 1.0)
                ratios = {o: _ratio(mine, v, higher) for o, v in theirs.items()}
                each = [_outcome(lo, hi, value) for _, lo, hi in ratios.values()]
                ok = FAIL if FAIL in each else (NOISE if NOISE in each else HOLD)
                detail = ", ".join(f"x{r:.2f}" + (f" [{lo:.2f}-{hi:.2f}]" if lo < hi else "") + f" vs {o}"
                                   for o, (r, lo, hi) in ratios.items())
                notes.append(f"{where}{at}: {subject} {mine.show(metric)}; {detail} (needs x{value:g}: {_mark(ok)})")
            out.append(ok)
    return out, notes, missing


def _fit_line(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float]:
    """Least squares y = a + b x: slope, intercept, R^2, and the slope's standard error."""
    b, a = np.polyfit(x, y, 1)
    resid = y - (a + b * x)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((resid ** 2).sum()) / ss_tot if ss_tot > 0 else 0.0
    sxx = float(((x - x.mean()) ** 2).sum())
    se = math.sqrt(float((resid ** 2).sum()) / (len(x) - 2) / sxx) if len(x) > 2 and sxx > 0 else float("nan")
    return b, a, r2, se


def _scales(reader: _Reader, rows: pd.DataFrame, subject: str, value: float,
            higher: bool) -> tuple[list, list[str], list[str]]:
    """Per (dataset, workload, x, facet): log metric on log workers over every worker count; the
    fitted growth from the fewest to the most workers, with the slope's 2-sigma band (three or more
    worker counts) or the end runs' intervals (two)."""
    out, notes, missing = [], [], []
    for key, g in rows.groupby(["dataset", "workload", "x", "facet"], dropna=False, sort=True):
        s = g[g["variant"] == subject].sort_values("workers")
        vals = [(float(w), reader.get(s[s["workers"] == w], subject)) for w in s["workers"]]
        vals = [(w, v) for w, v in vals if v is not None and v.mid > 0]
        where = _cell_label((key[0], key[1], "*", key[2], key[3]))
        if len(vals) < 2:
            missing.append(f"{where}: {subject} at fewer than two worker counts")
            continue
        w = np.log([v[0] for v in vals])
        y = np.log([v[1].mid for v in vals])
        span = w[-1] - w[0]
        if len(vals) >= 3:
            b, _, r2, se = _fit_line(w, y)
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


def _linear(reader: _Reader, rows: pd.DataFrame, subject: str, min_r2: float) -> tuple[list, list[str], list[str]]:
    """Per (dataset, workload, workers, facet): the subject's metric against x, a least-squares
    line with a positive slope and R^2 >= min_r2 over at least three x values."""
    out, notes, missing = [], [], []
    for key, g in rows.groupby(["dataset", "workload", "workers", "facet"], dropna=False, sort=True):
        s = g[g["variant"] == subject].assign(xv=lambda d: pd.to_numeric(d["x"], errors="coerce"))
        s = s[np.isfinite(s["xv"])].sort_values("xv")
        pts = [(float(r["xv"]), reader.get(s.loc[[i]], subject)) for i, r in s.iterrows()]
        pts = [(x, v.mid) for x, v in pts if v is not None and np.isfinite(v.mid)]
        where = _cell_label((key[0], key[1], key[2], "*", key[3]))
        if len(pts) < 3:
            missing.append(f"{where}: {subject} at fewer than three x values")
            continue
        x, y = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
        slope, _, r2, _ = _fit_line(x, y)
        ok = HOLD if slope > 0 and r2 >= min_r2 else FAIL
        out.append(ok)
        shown = ", ".join(f"{xi:g}: {metrics.show(reader.metric, yi)}" for xi, yi in pts)
        notes.append(f"{where}: {subject} {reader.metric} over x ({shown}): slope {slope:.3g}, R^2 {r2:.2f} "
                     f"(needs > 0 and >= {min_r2}: {_mark(ok)})")
    return out, notes, missing


def _gap_grows(reader: _Reader, rows: pd.DataFrame, subject: str, others: list[str],
               higher: bool) -> tuple[list, list[str], list[str]]:
    """Per (dataset, workload, workers, facet) and other: the subject leads at the largest x
    (beyond the noise) and its advantage there exceeds the one at the smallest x."""
    out, notes, missing = [], [], []
    for key, g in rows.groupby(["dataset", "workload", "workers", "facet"], dropna=False, sort=True):
        xs = sorted(g["x"].dropna().unique(), key=lambda v: (_float(v), str(v)))
        where = _cell_label((key[0], key[1], key[2], "*", key[3]))
        if len(xs) < 2:
            missing.append(f"{where}: fewer than two x values")
            continue
        for other in others:
            ends = [(reader.get(g[g["x"] == xv], subject), reader.get(g[g["x"] == xv], other)) for xv in (xs[0], xs[-1])]
            if any(a is None or b is None for a, b in ends):
                missing.append(f"{where}: {subject} or {other} missing at x={_num(xs[0])} or x={_num(xs[-1])}")
                continue
            gaps = [_ratio(a, b, higher)[0] for a, b in ends]
            lead = _better(*ends[1], higher)
            ok = FAIL if lead is FAIL or gaps[1] <= gaps[0] else lead
            out.append(ok)
            notes.append(f"{where}: {subject} vs {other}: x{gaps[0]:.2f} at x={_num(xs[0])}, x{gaps[1]:.2f} at "
                         f"x={_num(xs[-1])} (leads at the largest x: {_mark(lead)}; grows: "
                         f"{'yes' if gaps[1] > gaps[0] else 'no'}: {_mark(ok)})")
    return out, notes, missing


def _expected_cells(rows: pd.DataFrame, where: dict, keys: list[str]) -> set[tuple]:
    """The cells a claim needs: every combination its `where` lists for the cell keys, with the
    values its preset's runs have for the keys it does not list."""
    axes = []
    for k in keys:
        if k in (where or {}):
            given = where[k] if isinstance(where[k], list) else [where[k]]
            axes.append([_cellvalue(v) for v in given])
        else:
            axes.append(sorted({_cellvalue(v) for v in rows[k]}, key=lambda v: (str(type(v)), str(v))))
    return set(product(*axes))


def _cellvalue(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, (int, float, np.integer, np.floating)) and float(v).is_integer():
        return int(v)
    return v if isinstance(v, str) else (float(v) if isinstance(v, (float, np.floating)) else v)


def _relabel(rows: pd.DataFrame, chk: dict) -> pd.DataFrame:
    """check.across: one variant's runs, with the datasets (or the x values) as the variants."""
    across = chk.get("across")
    if across == "dataset":
        rows = rows[rows["variant"] == chk["variant"]]
        return rows.assign(variant=rows["dataset"], dataset=chk["variant"])
    if across == "x":
        rows = rows[rows["variant"] == chk["variant"]]
        return rows.assign(variant=[_num(v) for v in rows["x"]], x=None)
    return rows


def verdict_of(outcomes: list) -> str:
    """The claim's verdict from its cells' outcomes (True holds, False fails, None within the noise)."""
    if not outcomes:
        return "not measured"
    n, held, failed = len(outcomes), sum(o is HOLD for o in outcomes), sum(o is FAIL for o in outcomes)
    if held == n:
        return "holds"
    if held and failed:
        return f"partly ({held}/{n})"
    if failed:
        return "does not hold"
    return f"inconclusive ({held}/{n} hold, {n - held} within the noise)" if held else "inconclusive"


def evaluate(claim: dict, table: pd.DataFrame, basis: str | None = "compute") -> Verdict:
    """The claim on one basis (None or a basis-free metric: as the runs give it)."""
    chk = claim["check"]
    metric = chk["metric"]
    basis = basis if is_basis_dependent(metric) else None
    rows, excluded, _ = evidence(claim["preset"], table)
    rows = _where(_numeric_x(rows), chk.get("where", {}))
    subjects = [str(s) for s in _subjects(chk)] if chk.get("across") == "x" else _subjects(chk)
    others = [str(o) for o in chk.get("others") or []] if chk.get("across") == "x" else list(chk.get("others") or [])
    rows = _relabel(rows, chk)
    kind = chk["kind"]
    higher = higher_is_better(claim) if kind in ("better", "ratio_at_least", "scales", "gap_grows") else True
    reader = _Reader(metric, basis)
    if len(rows) and reader.column not in rows and not (metric == "latency_mean_ms" and LATENCY_CURVE in rows):
        return Verdict(claim, "not measured", [f"no column {reader.column!r} in the preset's runs"], basis, excluded,
                       runs=list(rows.get("run_id", [])))
    if kind == "scales":
        out, notes, missing = _scales(reader, rows, subjects[0], float(chk.get("value") or 1.0), higher)
    elif kind == "linear":
        out, notes, missing = _linear(reader, rows, subjects[0], float(chk.get("value") or 0.9))
    elif kind == "gap_grows":
        out, notes, missing = _gap_grows(reader, rows, subjects[0], others, higher)
    else:
        keys = list(CELL)
        out, notes, missing = _compare(reader, rows, keys, chk, higher, subjects, others)
        seen = {tuple(_cellvalue(v) for v in k) for k in rows[keys].itertuples(index=False)} if len(rows) else set()
        where = {k: v for k, v in (chk.get("where") or {}).items() if k != "x" or chk.get("across") != "x"}
        for cell in sorted(_expected_cells(rows, where, keys) - seen, key=str):
            missing.append(f"{_cell_label(cell)}: no usable run of the preset")
    if not out and not missing:
        missing.append(f"no usable run of the preset {claim['preset']!r} matches the claim's cells")
    verdict = "not measured" if missing else verdict_of(out)
    return Verdict(claim, verdict, notes, basis, excluded, missing, list(rows.get("run_id", [])))


def evaluate_both(claim: dict, table: pd.DataFrame) -> ClaimResult:
    """The claim on each basis where its metric depends on one, else once."""
    if is_basis_dependent(claim["check"]["metric"]):
        return ClaimResult(claim, {b: evaluate(claim, table, b) for b in BASES})
    return ClaimResult(claim, {"any": evaluate(claim, table, None)})


def evaluate_all(table: pd.DataFrame, claims: list[dict] | None = None,
                 preset: str | None = None) -> list[ClaimResult]:
    """Every claim (or those of one preset) on both bases."""
    claims = load_claims() if claims is None else claims
    return [evaluate_both(c, table) for c in claims if preset is None or c["preset"] == preset]


def tally(verdicts: list[ClaimResult], basis: str) -> dict[str, int]:
    """How many claims hold, partly, ... on one basis (a basis-free claim counts on both)."""
    counts = dict.fromkeys(VERDICTS, 0)
    for r in verdicts:
        counts[r.on(basis).kind] += 1
    return counts
