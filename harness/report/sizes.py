"""The size sweeps' reports: a size-dependent claim judged at every step of its sweep, the trend of
its ratio against size extrapolated to the paper's size, and each step's time and memory.

A claim of conf/claims.yaml with `sizes: size_<paper>` names a size sweep (conf/experiment/size_*.yaml,
described in conf/sizes.yaml). Its ordinary verdict still reads its own preset; here it is also
judged at each step of the sweep, on that step's runs alone, by the claims engine itself
(`claims.evaluate_both`): the step's runs are relabelled as the claim's preset's runs, the newest
code version of the step read. The sweep's x is its size knob; the claim's own x axis is

- the sweep's x when both presets sweep the same knob (e.g. |S|): the claim reads the step's one x;
- the sweep's facet when the sweep sets its facet to the claim's x knob;
- otherwise not swept: the step runs at the sweep's fixed value of that knob, so `where.x` is left
  out and a claim that needs several x values (gap_grows, linear, across x) is not measured.

The claim's other `where` lists (workers, datasets, workloads) are narrowed to the values the sweep
runs (e.g. Tornado's 16 and 25 evaluators to the sweep's 25), and the narrowing is shown.

The trend: per compared pair (a cell and an `other`), the subject/other ratio at each step, oriented
so that above 1 means the subject is better (other/subject for a lower-is-better metric), is fitted
by least squares as log ratio = a + b log size (scipy.stats.linregress) and extrapolated to the
paper's size, with a 95% prediction interval from three steps on. That figure is an extrapolation,
not a measurement, and is labelled so everywhere it is shown.

Each step's cost: its process's wall time and peak memory (harness/run/sizes.py records them in
`<results>/sizes/<preset>/steps.jsonl`, failed and refused steps included, with their reason), and
from the runs table its runs' driver and executor peaks (driver_peak_rss_bytes,
executor_peak_rss_bytes), run wall times (wall_s), data preparation and oracle time.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy import stats

from harness.report.claims import checks as claim_checks
from harness.report import claims as claims_mod
from harness.report import metrics, results
from harness.report.claims import BASES, CELL, ClaimResult

SWEEPS_FILE = results.PROJECT_ROOT / "conf" / "sizes.yaml"
PREFIX = "size_"
TREND_KINDS = ("better", "ratio_at_least")  # kinds whose subject/other ratio has a trend


def sweeps(path: Path = SWEEPS_FILE) -> dict[str, dict]:
    """conf/sizes.yaml: per size preset, its paper, what its size counts and the paper's size."""
    return yaml.safe_load(Path(path).read_text()) or {}


def steps_file(root: Path, preset: str) -> Path:
    """Where harness/run/sizes.py records a sweep's step attempts."""
    return Path(root) / "sizes" / preset / "steps.jsonl"


def read_steps(root: Path, preset: str) -> list[dict]:
    """Every recorded attempt of the sweep's steps, in the order they were made."""
    path = steps_file(root, preset)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def is_sweep(preset: str) -> bool:
    return str(preset).startswith(PREFIX)


def preset_axes(preset: str) -> tuple[str | None, str | None]:
    """(experiment.x, experiment.facet) of a preset's YAML."""
    path = claims_mod.PRESETS_DIR / f"{preset}.yaml"
    if not path.exists():
        return None, None
    exp = (yaml.safe_load(path.read_text()) or {}).get("experiment") or {}
    return exp.get("x"), exp.get("facet")


def claims_of(preset: str, claims: list[dict] | None = None) -> list[dict]:
    claims = claims_mod.load_claims() if claims is None else claims
    return [c for c in claims if c.get("sizes") == preset]


def _size(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def sweep_rows(table: pd.DataFrame, preset: str) -> pd.DataFrame:
    """The sweep's runs with their step as a number (`size`)."""
    if "experiment" not in table:
        return table.iloc[0:0].assign(size=[])
    rows = table[table["experiment"] == preset]
    return rows.assign(size=rows["x"].map(_size) if "x" in rows else float("nan"))


# ----------------------------------------------------------------------------------- one step


def relabel(rows: pd.DataFrame, claim: dict, sweep: str,
            axes=preset_axes) -> tuple[pd.DataFrame, str]:
    """A step's runs as the claim's preset's runs: experiment renamed, x and facet mapped (module
    docstring); with how the claim's x axis was mapped: "size", "facet" or "fixed"."""
    cx, cf = axes(claim["preset"])
    sx, sf = axes(sweep)
    rows = rows.assign(experiment=claim["preset"])
    facet = rows["facet"] if "facet" in rows else pd.Series(None, index=rows.index, dtype=object)
    if cx is not None and cx == sx:
        how, x = "size", rows["x"]
    elif cx is not None and cx == sf:
        how, x = "facet", facet
    else:
        how, x = "fixed", pd.Series(None, index=rows.index, dtype=object)
    keep_facet = cf is not None and cf == sf and how != "facet"
    return rows.assign(x=x, facet=facet if keep_facet else None), how


def narrowed(claim: dict, rows: pd.DataFrame, how: str) -> tuple[dict, list[str]]:
    """The claim with its `where` lists narrowed to the values the sweep runs (and `where.x` left
    out when the sweep does not sweep the claim's x axis), and a note per narrowing."""
    chk = dict(claim["check"])
    where, notes = dict(chk.get("where") or {}), []
    if how == "fixed" and "x" in where:
        notes.append(f"x = {where.pop('x')} of `{claim['preset']}` is not swept here: read at the sweep's own setting")
    for key in ("dataset", "workload", "workers", "facet"):
        if key not in where or key not in rows or not len(rows):
            continue
        wanted = where[key] if isinstance(where[key], list) else [where[key]]
        have = {str(claims_mod._cellvalue(v)) for v in rows[key].dropna()}
        kept = [v for v in wanted if str(claims_mod._cellvalue(v)) in have]
        if kept and len(kept) < len(wanted):
            notes.append(f"{key} narrowed from {wanted} to {kept} (what the sweep runs)")
            where[key] = kept
    chk["where"] = where
    return {**claim, "check": chk}, notes


def evaluate_step(claim: dict, rows: pd.DataFrame, sweep: str, axes=preset_axes) -> tuple[ClaimResult, list[str]]:
    """The claim on one step's runs (every basis), with the notes of how its cells were mapped."""
    rel, how = relabel(rows, claim, sweep, axes)
    mod, notes = narrowed(claim, rel, how)
    return claims_mod.evaluate_both(mod, rel), notes


# ------------------------------------------------------------------------------------- ratios


@dataclass
class Ratio:
    basis: str | None
    pair: str  # "<cell> vs <other>"
    size: float
    ratio: float
    lo: float
    hi: float


def step_ratios(claim: dict, rows: pd.DataFrame, sweep: str, size: float, axes=preset_axes) -> list[Ratio]:
    """Per basis, cell and other: the subject/other ratio (above 1: the subject is better) on one
    step's runs, with its extremes from the runs' intervals."""
    chk = claim["check"]
    if chk["kind"] not in TREND_KINDS or chk.get("across"):
        return []
    rel, how = relabel(rows, claim, sweep, axes)
    mod, _ = narrowed(claim, rel, how)
    good, _, _ = claims_mod.evidence(claim["preset"], rel)
    good = claims_mod._where(claims_mod._numeric_x(good), mod["check"].get("where", {}))
    higher = claims_mod.higher_is_better(claim)
    subjects = claims_mod._subjects(chk)
    others = list(chk.get("others") or [])
    bases = BASES if claims_mod.is_basis_dependent(chk["metric"]) else (None,)
    out = []
    for basis in bases:
        reader = claim_checks.Reader(chk["metric"], basis)
        for key, g in good.groupby(list(CELL), dropna=False, sort=True):
            where = claim_checks.cell_label(key if isinstance(key, tuple) else (key,))
            rate = reader.common_rate(g, subjects + others)
            for subject in subjects:
                mine = reader.get(g, subject, rate)
                if mine is None:
                    continue
                for other in others:
                    theirs = reader.get(g, other, rate)
                    if theirs is None:
                        continue
                    r, lo, hi = claim_checks.ratio(mine, theirs, higher)
                    if np.isfinite(r) and r > 0:
                        name = f"{where}: {subject} vs {other}" if len(subjects) > 1 else f"{where} vs {other}"
                        out.append(Ratio(basis, name, size, r, lo, hi))
    return out


@dataclass
class Trend:
    basis: str | None
    pair: str
    steps: int
    slope: float  # d log ratio / d log size
    r2: float
    at_paper: float  # the ratio extrapolated to the paper's size
    lo: float  # its 95% prediction interval (nan with two steps: the line is exact)
    hi: float
    verdict: str  # "would hold", "would not hold", "undecided" (the interval straddles the threshold)


def fit_trend(points: list[Ratio], paper_size: float, threshold: float, strict: bool) -> Trend | None:
    """log ratio = a + b log size by least squares over the steps (two distinct sizes at least),
    extrapolated to `paper_size`; with three steps or more, a 95% prediction interval there."""
    pts = sorted({p.size: p for p in points}.values(), key=lambda p: p.size)
    if len(pts) < 2:
        return None
    x = np.log([p.size for p in pts])
    y = np.log([p.ratio for p in pts])
    fit = stats.linregress(x, y)
    x0 = math.log(paper_size)
    mid = math.exp(fit.intercept + fit.slope * x0)
    lo = hi = float("nan")
    n = len(pts)
    if n >= 3:
        resid = y - (fit.intercept + fit.slope * x)
        s = math.sqrt(float((resid ** 2).sum()) / (n - 2))
        sxx = float(((x - x.mean()) ** 2).sum())
        half = stats.t.ppf(0.975, n - 2) * s * math.sqrt(1 + 1 / n + (x0 - x.mean()) ** 2 / sxx)
        lo, hi = math.exp(math.log(mid) - half), math.exp(math.log(mid) + half)
    a, b = (lo, hi) if n >= 3 else (mid, mid)
    above = (a > threshold) if strict else (a >= threshold)
    below = (b <= threshold) if strict else (b < threshold)
    verdict = "would hold" if above else ("would not hold" if below else "undecided")
    r2 = float(fit.rvalue ** 2) if n > 2 else 1.0
    return Trend(pts[0].basis, pts[0].pair, n, float(fit.slope), r2, mid, lo, hi, verdict)


# -------------------------------------------------------------------------------------- sweep


@dataclass
class SizeClaim:
    claim: dict
    steps: dict[float, ClaimResult] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    ratios: list[Ratio] = field(default_factory=list)
    trends: list[Trend] = field(default_factory=list)


def threshold_of(claim: dict) -> tuple[float, bool]:
    """The ratio a claim needs, and whether it must be strictly exceeded (better)."""
    chk = claim["check"]
    if chk["kind"] == "ratio_at_least":
        return float(chk.get("value") or 1.0), False
    return 1.0, True


def evaluate_sweep(table: pd.DataFrame, sweep: str, claims: list[dict] | None = None,
                   paper_size: float | None = None, axes=preset_axes) -> tuple[list[float], list[SizeClaim]]:
    """Every claim naming the sweep, at each of its steps (the sizes with runs), and its trends."""
    rows = sweep_rows(table, sweep)
    sizes = sorted(s for s in rows["size"].dropna().unique()) if len(rows) else []
    if paper_size is None:
        paper_size = float((sweeps().get(sweep) or {}).get("paper_size") or 0) or None
    out = []
    for claim in claims_of(sweep, claims):
        sc = SizeClaim(claim)
        for s in sizes:
            step = rows[rows["size"] == s]
            sc.steps[s], notes = evaluate_step(claim, step, sweep, axes)
            sc.notes += [n for n in notes if n not in sc.notes]
            sc.ratios += step_ratios(claim, step, sweep, s, axes)
        if paper_size:
            thr, strict = threshold_of(claim)
            for key in sorted({(r.basis or "", r.pair) for r in sc.ratios}):
                pts = [r for r in sc.ratios if (r.basis or "", r.pair) == key]
                t = fit_trend(pts, paper_size, thr, strict)
                if t is not None:
                    sc.trends.append(t)
        out.append(sc)
    return sizes, out


# ---------------------------------------------------------------------------------- resources


def step_costs(table: pd.DataFrame, sweep: str, attempts: list[dict]) -> pd.DataFrame:
    """One row per step: its status (and reason), the step process's wall time and peak memory
    (its newest recorded attempt), every attempt it took (`attempts`, their wall time summed and
    their largest peak: a step that ran out of memory, then resumed, cost all of it), and from its
    runs: how many ok and failed, the sum of their wall times, data and oracle time, and the
    driver's and executors' peak memory."""
    rows = sweep_rows(table, sweep)
    by_step: dict[float, dict] = {}
    tried: dict[float, list[dict]] = {}
    for a in attempts:
        by_step[float(a["step"])] = a  # the newest attempt per step
        if a.get("wall_s") is not None:  # started (an estimate or a refusal ran nothing)
            tried.setdefault(float(a["step"]), []).append(a)
    sizes = sorted(set(rows["size"].dropna().unique()) | set(by_step))
    out = []
    for s in sizes:
        r = rows[rows["size"] == s]
        if "code_version" in r and r["code_version"].notna().any():
            r = r[r["code_version"] == r.sort_values("started_at")["code_version"].dropna().iloc[-1]]
        ok = r[r["status"] == "ok"] if "status" in r else r
        bad = r[r["status"] != "ok"] if "status" in r else r.iloc[0:0]
        a = by_step.get(s, {})

        def col(name, how="sum", frame=ok):
            if name not in frame or not frame[name].notna().any():
                return float("nan")
            v = pd.to_numeric(frame[name], errors="coerce")
            return float(v.sum() if how == "sum" else v.max())
        status = a.get("status") or ("ok" if len(ok) and not len(bad) else ("failed" if len(bad) else "no runs"))
        reason = a.get("reason") or "; ".join(sorted({str(e).splitlines()[0][:120] for e in bad.get("error", [])
                                                        if isinstance(e, str) and e}))
        out.append({"size": s, "status": status, "reason": reason, "runs_ok": len(ok), "runs_failed": len(bad),
                    "step_wall_s": a.get("wall_s"), "step_peak_bytes": a.get("maxrss_bytes"),
                    "attempts": len(tried.get(s, [])),
                    "attempts_wall_s": sum(float(t["wall_s"]) for t in tried.get(s, [])) or None,
                    "attempts_peak_bytes": max((t["maxrss_bytes"] for t in tried.get(s, [])
                                                if t.get("maxrss_bytes") is not None), default=None),
                    "earlier": "; ".join(f"{t['status']}" + (f" ({t['reason']})" if t.get("reason") else "")
                                         + f" in {float(t['wall_s']):.0f} s" for t in tried.get(s, [])[:-1]),
                    "extrapolated_s": a.get("extrapolated_s"),
                    "runs_wall_s": col("wall_s"), "data_s": col("time_data_s", "max"),
                    "oracle_s": col("time_oracle_s", "max"),
                    "driver_peak_bytes": col("driver_peak_rss_bytes", "max"),
                    "executor_peak_bytes": col("executor_peak_rss_bytes", "max")})
    return pd.DataFrame(out)


def largest_feasible(costs: pd.DataFrame) -> float | None:
    ok = costs[costs["status"] == "ok"] if len(costs) else costs
    return float(ok["size"].max()) if len(ok) else None


# ------------------------------------------------------------------------------------- report


def _n(v) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "-"
    v = float(v)
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= div:
            return f"{v / div:g}{unit}" if (v / div) == round(v / div, 2) else f"{v / div:.2f}{unit}"
    return f"{v:g}"


def _gib(v) -> str:
    return "-" if v is None or (isinstance(v, float) and not np.isfinite(v)) else f"{float(v) / 2**30:.1f} GiB"


def _secs(v) -> str:
    return "-" if v is None or (isinstance(v, float) and not np.isfinite(v)) else f"{float(v):.0f} s"


def _short(verdict: str) -> str:
    return (verdict.replace("inconclusive", "inconcl.").replace("not measured", "n/m")
            .replace("not exercised", "n/e"))


def section(table: pd.DataFrame, sweep: str, attempts: list[dict], claims: list[dict] | None = None,
            figure: str | None = None, axes=preset_axes) -> list[str]:
    """The Markdown of a size sweep: its steps' cost, each size claim's verdict per step, the
    measured ratios and the trends extrapolated to the paper's size."""
    meta = sweeps().get(sweep) or {}
    paper_size = float(meta.get("paper_size") or 0) or None
    costs = step_costs(table, sweep, attempts)
    sizes, scs = evaluate_sweep(table, sweep, claims, paper_size, axes)
    biggest = largest_feasible(costs)
    lines = ["## Size sweep: steps toward the paper's setting", "",
             f"Size: {meta.get('size', 'x')}; the paper: {meta.get('paper_setting', '?')}"
             + (f" (extrapolation target {_n(paper_size)})" if paper_size else "") + ". "
             + (f"Largest step that ran: **{_n(biggest)}**." if biggest else "No step ran successfully yet."), "",
             "### Time and memory per step", "",
             "Step wall time and peak: the step's process (harness/run/sizes.py; ru_maxrss of the process tree, "
             "the largest process, not a sum). Runs: ok/failed; the sum of their wall times; data preparation "
             "and oracle time (cached after a workload's first run); the largest driver and executor peaks the "
             "runs recorded. Attempts: how many times the step was started, with the wall time of all of them "
             "and their largest peak (a resumed step runs only what its earlier attempts did not finish).", "",
             "| size | status | step wall | step peak | attempts (all) | runs ok/failed | runs' wall | data | oracle "
             "| driver peak | executor peak | reason |",
             "|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    for _, c in costs.iterrows():
        wall = _secs(c["step_wall_s"])
        if c["status"] == "skipped" and c.get("extrapolated_s") is not None:
            wall = f"~{_secs(c['extrapolated_s'])} (extrapolated, not run)"
        tries = (f"{c['attempts']} ({_secs(c['attempts_wall_s'])}, {_gib(c['attempts_peak_bytes'])})"
                 if c["attempts"] > 1 else str(c["attempts"]))
        reason = "; ".join(x for x in (c["reason"], f"earlier attempts: {c['earlier']}" if c["earlier"] else "") if x)
        lines.append(f"| {_n(c['size'])} | {c['status']} | {wall} | {_gib(c['step_peak_bytes'])} | {tries} | "
                     f"{c['runs_ok']}/{c['runs_failed']} | {_secs(c['runs_wall_s'])} | {_secs(c['data_s'])} | "
                     f"{_secs(c['oracle_s'])} | {_gib(c['driver_peak_bytes'])} | {_gib(c['executor_peak_bytes'])} | "
                     f"{claims_mod_cell(reason) or '-'} |")
    lines += [""]
    if not scs:
        return lines + ["No claim of conf/claims.yaml names this sweep (`sizes:`).", ""]
    lines += ["### Verdicts per step", "",
              "Each claim judged by the claims engine on each step's runs alone (compute / network for a "
              "throughput or latency claim). n/m: not measured at that step; n/e: not exercised there (a tie, "
              "or a precondition of its `requires` failed).", "",
              "| claim | " + " | ".join(_n(s) for s in sizes) + " |", "|---|" + "---|" * len(sizes)]
    for sc in scs:
        cells = []
        for s in sizes:
            r = sc.steps[s]
            if "any" in r.verdicts:
                cells.append(_short(r.verdicts["any"].verdict))
            else:
                cells.append(" / ".join(_short(r.verdicts[b].verdict) for b in BASES))
        lines.append(f"| `{sc.claim['id']}` | " + " | ".join(cells) + " |")
    why = [f"- `{sc.claim['id']}` at {_n(s)}: {text}" for sc in scs for s in sizes
           for text in [why_not_measured(sc.steps[s])] if text]
    if why:
        lines += ["", "Why a step's verdict is n/m (the cells with no usable run, and the step's runs left out):", "",
                  *why]
    lines += ["", "### Measured ratios and their trend", "",
              "Ratio = subject / other, oriented so that above 1 means the subject is better; [extremes] from the "
              "runs' repetition intervals. Trend: least squares of log ratio on log size over the steps "
              "(scipy.stats.linregress); **the value at the paper's size is an extrapolation, not a measurement**, "
              "with a 95% prediction interval from three steps on.", ""]
    for sc in scs:
        c = sc.claim
        thr, strict = threshold_of(c)
        lines += [f"#### {c['id']}", "", f"{c['claim']} ({c.get('source', '')}; claim preset `{c['preset']}`; "
                                         f"needs ratio {'>' if strict else '>='} {thr:g})", ""]
        lines += [f"- {n}" for n in sc.notes]
        if sc.notes:
            lines.append("")
        if not sc.ratios:
            lines += ["No ratio (a kind without a subject/other ratio, or no step with both).", ""]
            continue
        lines += ["| basis | pair | " + " | ".join(_n(s) for s in sizes) + " | slope | R^2 | at the paper's size "
                  "(extrapolated) | extrapolated verdict |", "|---|---|" + "---:|" * len(sizes) + "---:|---:|---:|---|"]
        for key in sorted({(r.basis or "", r.pair) for r in sc.ratios}):
            pts = {r.size: r for r in sc.ratios if (r.basis or "", r.pair) == key}
            vals = []
            for s in sizes:
                p = pts.get(s)
                vals.append("-" if p is None else f"{p.ratio:.2f}" + (f" [{p.lo:.2f}-{p.hi:.2f}]" if p.lo < p.hi else ""))
            t = next((t for t in sc.trends if ((t.basis or "", t.pair) == key)), None)
            if t is None:
                tail = "- | - | - (one step) | -"
            else:
                ext = f"{t.at_paper:.2f}" + (f" [{t.lo:.2f}-{t.hi:.2f}]" if np.isfinite(t.lo) else " (two steps: no interval)")
                tail = f"{t.slope:+.3f} | {t.r2:.2f} | {ext} | {t.verdict} (extrapolation)"
            lines.append(f"| {key[0] or '-'} | {key[1]} | " + " | ".join(vals) + f" | {tail} |")
        lines.append("")
    if figure:
        lines += [f"![size trends]({figure})", ""]
    return lines


def why_not_measured(result: ClaimResult) -> str:
    """Why a claim is not measured at a step (empty when it is, on some basis): the first cell with no
    usable run, and how many of the step's runs were left out for each reason (failed, the oracle's
    disagreement, too short, another code version)."""
    v = next((v for v in result.verdicts.values() if v.kind == "not measured"), None)
    if v is None or any(w.kind != "not measured" for w in result.verdicts.values()):
        return ""
    counts: dict[str, int] = {}
    for e in v.excluded:
        if " runs of older code versions" in e:
            reason, n = "an older code version", int(e.split(" ", 1)[0])
        else:
            reason, n = e.split(": ", 1)[-1].rsplit(" (", 1)[0], 1
        counts[reason] = counts.get(reason, 0) + n
    left = "; ".join(f"{n} run{'s' if n > 1 else ''} {reason}" for reason, n in counts.items())
    first = v.missing[0] if v.missing else "no cell"
    more = f" (+{len(v.missing) - 1} more)" if len(v.missing) > 1 else ""
    return claims_mod_cell(f"{first}{more}" + (f"; left out: {left}" if left else ""))


def claims_mod_cell(text) -> str:
    return str(text or "").replace("|", "\\|").replace("\n", " ")


def figure(table: pd.DataFrame, sweep: str, attempts: list[dict], out: Path, claims: list[dict] | None = None,
           axes=preset_axes) -> Path | None:
    """One panel per size claim (compute basis, or the metric's own): the measured ratio per step
    (log-log, bars from the intervals), the fitted line dashed out to the paper's size and the
    extrapolated value marked as such; a last panel with each step's wall time and peak memory."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    meta = sweeps().get(sweep) or {}
    paper_size = float(meta.get("paper_size") or 0) or None
    sizes, scs = evaluate_sweep(table, sweep, claims, paper_size, axes)
    costs = step_costs(table, sweep, attempts)
    panels = [sc for sc in scs if sc.ratios]
    n = len(panels) + 1
    cols = min(3, n)
    rows_n = -(-n // cols)
    fig, axs = plt.subplots(rows_n, cols, figsize=(5.2 * cols, 3.8 * rows_n), squeeze=False)
    for ax, sc in zip(axs.flat, panels):
        basis = "compute" if any(r.basis == "compute" for r in sc.ratios) else None
        thr, _ = threshold_of(sc.claim)
        for key in sorted({r.pair for r in sc.ratios if r.basis == basis}):
            pts = sorted((r for r in sc.ratios if r.basis == basis and r.pair == key), key=lambda r: r.size)
            xs = [p.size for p in pts]
            ys = [p.ratio for p in pts]
            err = [[max(p.ratio - p.lo, 0) for p in pts], [max(p.hi - p.ratio, 0) for p in pts]]
            line = ax.errorbar(xs, ys, yerr=err, marker="o", ms=4, capsize=2, label=key.split(": ")[-1][:40])
            t = next((t for t in sc.trends if t.basis == basis and t.pair == key), None)
            if t is not None and paper_size:
                xx = np.geomspace(min(xs), paper_size, 30)
                yy = t.at_paper * (xx / paper_size) ** t.slope
                color = line[0].get_color()
                ax.plot(xx, yy, "--", color=color, lw=1)
                ax.plot([paper_size], [t.at_paper], marker="o", mfc="none", color=color)
                if np.isfinite(t.lo):
                    ax.vlines(paper_size, t.lo, t.hi, color=color, lw=1, linestyles=":")
        ax.axhline(thr, color="grey", lw=0.8)
        if paper_size:
            ax.axvline(paper_size, color="grey", lw=0.6, ls=":")
            ax.text(paper_size, ax.get_ylim()[1], " paper's size\n (extrapolated)", fontsize=7, va="top", ha="right")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(sc.claim["id"], fontsize=8)
        ax.set_xlabel(meta.get("size", "size"), fontsize=8)
        ax.set_ylabel("subject / other" + (f" ({basis})" if basis else ""), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    ax = axs.flat[len(panels)]
    if len(costs):
        ok = costs[costs["status"] == "ok"]
        wall = pd.to_numeric(ok["step_wall_s"], errors="coerce")
        wall = wall.where(wall.notna(), pd.to_numeric(ok["runs_wall_s"], errors="coerce"))  # before the step is recorded
        ax.plot(ok["size"], wall, "o-", label="step wall time (s; runs' wall until recorded)")
        ax.set_xscale("log")
        if (wall > 0).any():
            ax.set_yscale("log")
        ax.set_xlabel(meta.get("size", "size"), fontsize=8)
        ax.set_ylabel("seconds", fontsize=8)
        ax2 = ax.twinx()
        peak = ok[["step_peak_bytes", "driver_peak_bytes", "executor_peak_bytes"]].apply(
            pd.to_numeric, errors="coerce").max(axis=1) / 2**30
        ax2.plot(ok["size"], peak, "s--", color="C3", label="peak memory (GiB)")
        ax2.set_ylabel("GiB", fontsize=8)
        for _, c in costs[costs["status"] != "ok"].iterrows():
            ax.axvline(c["size"], color="C3", lw=0.8, ls=":")
            ax.text(c["size"], ax.get_ylim()[0] if len(ok) else 1, f" {c['status']}", fontsize=7, rotation=90)
        ax.legend(fontsize=6, loc="upper left")
        ax2.legend(fontsize=6, loc="lower right")
    ax.set_title(f"{sweep}: time and memory per step", fontsize=8)
    for extra in list(axs.flat)[len(panels) + 1:]:
        extra.set_visible(False)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def report_extra(root: Path, sweep: str, table: pd.DataFrame) -> list[str]:
    """The size section of `results/plots/<sweep>/report.md` with its figure (size_trends.png)."""
    attempts = read_steps(root, sweep)
    path = root / "plots" / sweep / "size_trends.png"
    try:
        figure(table, sweep, attempts, path)
        name = path.name
    except Exception as exc:  # a figure must not cost the report
        name = None
        print(f"size figure of {sweep} not drawn: {exc}")
    return section(table, sweep, attempts, figure=name)


def overview(root: Path, table: pd.DataFrame) -> list[str]:
    """The size sweeps in results/report.md: per sweep with a run or a recorded step, its steps,
    the largest that ran and what stopped the next, linked to its report."""
    names = sorted(set(sweeps()) & ({str(e) for e in table.get("experiment", pd.Series(dtype=object)).dropna()}
                                    | {p for p in sweeps() if steps_file(root, p).exists()}))
    if not names:
        return []
    lines = ["## Size sweeps toward the papers' sizes", "",
             "| sweep | size | steps (status) | largest step that ran | the paper's size | next step |", "|---|---|---|---:|---:|---|"]
    for name in names:
        meta = sweeps()[name]
        costs = step_costs(table, name, read_steps(root, name))
        done = ", ".join(f"{_n(c['size'])} ({c['status']})" for _, c in costs.iterrows())
        stop = costs[costs["status"] != "ok"]
        nxt = f"{_n(stop.iloc[0]['size'])}: {claims_mod_cell(stop.iloc[0]['reason'])}" if len(stop) else "-"
        lines.append(f"| [{name}](plots/{name}/report.md) | {meta.get('size', '')} | {done} | "
                     f"{_n(largest_feasible(costs))} | {_n(meta.get('paper_size'))} | {nxt} |")
    return lines + [""]
