"""The papers' published claims (conf/claims.yaml), checked one by one against the runs table.

A claim names a metric, a subject strategy (a runs-table `variant`), the strategies it is
compared with, and where (dataset, workload, workers). Each matching configuration is one
comparison, made on the latest successful run of every variant there (with `check.experiment`,
at each x of that experiment's sweep); the verdict says whether the claim held in all of them,
some, none, or could not be measured. `linear` claims fit the subject's metric against the
sweep's x (a positive slope and R^2 >= value); `gap_grows` claims compare the subject's advantage
over each other strategy (their ratio, oriented so that > 1 favours the subject) at the sweep's
largest x with that at its smallest. Which way "better" points
comes from the metrics registry, so a claim cannot read a metric backwards.

`check.across: dataset` (with `check.variant`) turns a comparison claim around: subject and
others name datasets (the runs table's `dataset`), compared on that one variant's runs within each
(variant, workload, workers[, x]) (SSTD Fig. 7: one system on four datasets). The rows are
relabelled (dataset <-> variant) and go through the same comparisons. `check.across: x` (with
`check.variant` and `check.experiment`) does the same with the values of the experiment's swept x
(Skype Table 4: one strategy under four re-evaluation modes; DSkype Figs. 25-26: one hybrid at six
splits); subject and others are x values as the runs table writes them (numbers as `:g`).
`between`: each subject (a name or a list) lies within the others' smallest and largest values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

import yaml

from harness.report import metrics, results
from harness.report.results import PROJECT_ROOT

CLAIMS_FILE = PROJECT_ROOT / "conf" / "claims.yaml"
KINDS = ("better", "ratio_at_least", "scales", "bound", "linear", "gap_grows", "between")
KEYS = ("dataset", "workload", "workers")
ACROSS = ("variant", "dataset", "x")  # what a claim's subject and others name (check.across; variant by default)
ACROSS_KINDS = ("better", "ratio_at_least", "gap_grows", "between")  # the kinds that compare a subject with others
# (check.across also takes `bound`: the subject's own value, e.g. one re-evaluation mode's buffer)


@dataclass
class Verdict:
    claim: dict
    verdict: str  # holds | partly | does not hold | not measured
    comparisons: list[str] = field(default_factory=list)


def load_claims(path: Path = CLAIMS_FILE) -> list[dict]:
    return load_claims_from(yaml.safe_load(Path(path).read_text()) or [])


def load_claims_from(claims: list[dict]) -> list[dict]:
    """The claims, each checked for a known kind, metric and direction (a ValueError naming it)."""
    for c in claims:
        kind = c.get("check", {}).get("kind")
        if kind not in KINDS:
            raise ValueError(f"claim {c.get('id')!r}: check.kind={kind!r} is invalid; allowed: {', '.join(KINDS)}")
        if kind == "bound":
            metrics.metric(c["check"]["metric"])  # an unknown metric fails here
            if c["check"].get("min") is None and c["check"].get("max") is None:
                raise ValueError(f"claim {c.get('id')!r}: a bound claim needs check.min or check.max")
        elif kind == "linear":
            metrics.metric(c["check"]["metric"])
            if not c["check"].get("experiment"):
                raise ValueError(f"claim {c.get('id')!r}: a linear claim needs check.experiment (whose swept x "
                                 "the metric grows along)")
        elif kind == "gap_grows":
            higher_is_better(c)
            if not c["check"].get("experiment"):
                raise ValueError(f"claim {c.get('id')!r}: a gap_grows claim needs check.experiment (whose "
                                 "smallest and largest x it compares)")
        elif kind == "between":
            metrics.metric(c["check"]["metric"])
            if len(c["check"].get("others") or []) < 2:
                raise ValueError(f"claim {c.get('id')!r}: a between claim needs two or more check.others (the "
                                 f"values the subject lies between); got {c['check'].get('others')!r}")
        else:
            higher_is_better(c)
        _check_across(c)
    return claims


def _check_across(claim: dict) -> None:
    """check.across (and check.variant, which only it uses): a known value, a comparison kind, one
    variant to compare the datasets on, and a subject that is not among the others."""
    chk, cid = claim["check"], claim.get("id")
    across = chk.get("across", "variant")
    if across not in ACROSS:
        raise ValueError(f"claim {cid!r}: check.across={across!r} is invalid; allowed: {', '.join(ACROSS)}")
    if across == "variant":
        if chk.get("variant") is not None:
            raise ValueError(f"claim {cid!r}: check.variant={chk['variant']!r} is only read with check.across: "
                             "dataset (the subject and others already name variants)")
        return
    kinds = (*ACROSS_KINDS, "bound") if across == "dataset" else ("better", "ratio_at_least", "between", "bound")
    if chk["kind"] not in kinds:
        raise ValueError(f"claim {cid!r}: check.across={across} needs a kind that compares a subject with others "
                         f"({', '.join(kinds)}), not check.kind={chk['kind']!r}")
    if not isinstance(chk.get("variant"), str) or not chk["variant"]:
        raise ValueError(f"claim {cid!r}: check.across={across} needs check.variant, the one variant (e.g. qttree) "
                         f"whose runs on the {across} values are compared; got {chk.get('variant')!r}")
    if across == "x" and not chk.get("experiment"):
        raise ValueError(f"claim {cid!r}: check.across=x needs check.experiment (whose swept x values the subject "
                         "and others name)")
    others = [str(o) for o in chk.get("others") or []]
    subjects = [str(v) for v in _subjects(chk)]
    if (not others and chk["kind"] != "bound") or set(subjects) & set(others):
        what = "dataset" if across == "dataset" else "swept x value"
        raise ValueError(f"claim {cid!r}: check.across={across} needs check.subject (a {what}) and check.others "
                         f"(others of them, without the subject); got {chk.get('subject')!r} and "
                         f"{chk.get('others')!r}")


def across_datasets(rows: pd.DataFrame, variant: str) -> pd.DataFrame:
    """One variant's rows with `dataset` and `variant` swapped: the datasets become what the
    comparisons compare, and the variant (in the `dataset` key) what they compare within."""
    rows = rows[rows["variant"] == variant]
    return rows.assign(variant=rows["dataset"], dataset=variant)


def across_x(rows: pd.DataFrame, variant: str) -> pd.DataFrame:
    """One variant's swept rows with their x as the variant (numbers as `:g`), compared within
    (dataset, workload, workers); the x itself is used up."""
    rows = rows[rows["variant"] == variant]
    return rows.assign(variant=[f"{v:g}" if isinstance(v, float) else str(v) for v in rows["x"]], x=None)


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


def latest(table: pd.DataFrame) -> pd.DataFrame:
    """The newest successful run per (variant, dataset, workload, workers), leaving out runs that
    changed a workload knob (an experiment's swept `x` or `facet`, e.g. sstd_crq's query sides)."""
    ok = results.labelled(table[table["status"] == "ok"])
    for col in ("x", "facet"):
        if col in ok:
            ok = ok[ok[col].isna()]
    return ok.sort_values("started_at").groupby(["variant", *KEYS]).tail(1)


def latest_swept(table: pd.DataFrame, experiment: str) -> pd.DataFrame:
    """The newest successful run per (variant, dataset, workload, workers, x) of one experiment."""
    ok = results.labelled(table[table["status"] == "ok"])
    if "experiment" not in ok or "x" not in ok:
        return ok.iloc[0:0]
    ok = ok[(ok["experiment"] == experiment) & ok["x"].notna()]
    return ok.sort_values("started_at").groupby(["variant", *KEYS, "x"]).tail(1)


def _linear(rows: pd.DataFrame, subject: str, metric: str, min_r2: float) -> tuple[list[bool], list[str]]:
    """Per configuration, the subject's metric against x: a least-squares line with a positive slope
    and R^2 >= min_r2 over at least three x values."""
    held, notes = [], []
    for (ds, wl, w), g in rows.groupby(list(KEYS)):
        s = g[g["variant"] == subject].assign(xv=lambda d: pd.to_numeric(d["x"], errors="coerce"))
        s = s[np.isfinite(s["xv"]) & np.isfinite(s[metric].astype(float))].sort_values("xv")
        if s["xv"].nunique() < 3:
            continue
        x, y = s["xv"].to_numpy(float), s[metric].to_numpy(float)
        slope, icept = np.polyfit(x, y, 1)
        ss_tot = float(((y - y.mean()) ** 2).sum())
        r2 = 1.0 - float(((y - (slope * x + icept)) ** 2).sum()) / ss_tot if ss_tot > 0 else 0.0
        ok = slope > 0 and r2 >= min_r2
        held.append(ok)
        pts = ", ".join(f"{xi:g}: {metrics.show(metric, yi)}" for xi, yi in zip(x, y))
        notes.append(f"{wl}/{ds}/{w}w: {subject} {metric} over x ({pts}): slope {slope:.3g}, R^2 {r2:.2f} "
                     f"(needs > 0 and >= {min_r2}: {'yes' if ok else 'no'})")
    return held, notes


def _gap_grows(rows: pd.DataFrame, subject: str, others: list[str], metric: str,
               higher: bool) -> tuple[list[bool], list[str]]:
    """Per configuration and other strategy: the subject's advantage (subject / other when higher
    is better, other / subject when lower is) at the largest x against the smallest."""
    held, notes = [], []
    for (ds, wl, w), g in rows.groupby(list(KEYS)):
        xs = sorted(g["x"].dropna().unique())
        if len(xs) < 2:
            continue
        for other in others:
            gaps = []
            for xv in (xs[0], xs[-1]):
                at = g[g["x"] == xv]
                mine, theirs = _value(at, subject, metric), _value(at, other, metric)
                if mine and theirs:
                    gaps.append(mine / theirs if higher else theirs / mine)
            if len(gaps) < 2:
                continue
            ok = gaps[1] > gaps[0]
            held.append(ok)
            notes.append(f"{wl}/{ds}/{w}w: {subject} vs {other}: x{gaps[0]:.2f} at x={xs[0]:g}, x{gaps[1]:.2f} at "
                         f"x={xs[-1]:g} ({'grows' if ok else 'does not grow'})")
    return held, notes


def _between(rows: pd.DataFrame, keys: list, subjects: list, others: list,
             metric: str) -> tuple[list[bool], list[str]]:
    """Per configuration and subject: its value within the others' smallest and largest."""
    held, notes = [], []
    for key, g in rows.groupby(keys):
        theirs = [v for v in (_value(g, o, metric) for o in others) if v is not None]
        if len(theirs) < 2:
            continue
        lo, hi = min(theirs), max(theirs)
        for subject in subjects:
            mine = _value(g, subject, metric)
            if mine is None:
                continue
            ok = lo <= mine <= hi
            held.append(ok)
            notes.append(f"{_where_label(key)}: {subject} {metrics.show(metric, mine, unit=True)} between "
                         f"{metrics.show(metric, lo)} and {metrics.show(metric, hi)} of {', '.join(map(str, others))} "
                         f"({'yes' if ok else 'no'})")
    return held, notes


def _where(rows: pd.DataFrame, where: dict) -> pd.DataFrame:
    for key, allowed in (where or {}).items():
        if key in rows:
            rows = rows[rows[key].isin(allowed if isinstance(allowed, list) else [allowed])]
    return rows


def _value(rows: pd.DataFrame, variant: str, metric: str) -> float | None:
    hit = rows[rows["variant"] == variant]
    return None if hit.empty else float(hit[metric].iloc[-1])


def _where_label(key: tuple) -> str:
    """dataset, workload, workers (and x in a sweep) of one comparison, as the verdicts print it."""
    ds, wl, w, *x = key
    return f"{wl}/{ds}/{w}w" + ((f" at x={x[0]:g}" if isinstance(x[0], float) else f" at x={x[0]}") if x else "")


def evaluate(claim: dict, table: pd.DataFrame) -> Verdict:
    chk = claim["check"]
    metric, subject = chk["metric"], chk["subject"]
    others = list(chk.get("others") or [])
    higher = higher_is_better(claim) if chk["kind"] not in ("bound", "linear", "between") else True
    swept = chk.get("experiment")  # compare within an experiment's sweep, at each of its x values
    rows = latest_swept(table, swept) if swept else latest(table)
    if swept and len(rows):  # numeric x compare (and print, and filter: where: {x: [...]}) as numbers
        xn = pd.to_numeric(rows["x"], errors="coerce")
        if xn.notna().all():
            rows = rows.assign(x=xn)
    rows = _where(rows, chk.get("where", {}))
    across = chk.get("across")
    if across == "dataset":
        rows = across_datasets(rows, chk["variant"])
    subjects = _subjects(chk)
    if across == "x":  # the relabelled rows name x values as text
        rows = across_x(rows, chk["variant"])
        subject, subjects, others = str(subject), [str(v) for v in subjects], [str(o) for o in others]
    if metric not in rows:
        return Verdict(claim, "not measured", [f"no column {metric!r}"])
    held, notes = [], []
    keys = [*KEYS, "x"] if swept and across != "x" else list(KEYS)
    if chk["kind"] == "linear":
        held, notes = _linear(rows, subject, metric, float(chk.get("value") or 0.9))
    elif chk["kind"] == "gap_grows":
        held, notes = _gap_grows(rows, subject, others, metric, higher)
    elif chk["kind"] == "scales":
        for (ds, wl), g in rows.groupby(["dataset", "workload"]):
            s = g[g["variant"] == subject].sort_values("workers")
            if len(s) < 2:
                continue
            ratio = float(s[metric].iloc[-1]) / max(float(s[metric].iloc[0]), 1e-12)
            ok = ratio >= float(chk.get("value") or 1.0)
            held.append(ok)
            notes.append(f"{wl}/{ds}: {subject} {metric} x{ratio:.2f} from {s['workers'].iloc[0]} to "
                         f"{s['workers'].iloc[-1]} workers ({'yes' if ok else 'no'})")
    elif chk["kind"] == "between":
        held, notes = _between(rows, keys, subjects, others, metric)
    elif chk["kind"] == "bound":  # the subject's own value within [min, max] (a shape, a growth)
        lo, hi = chk.get("min"), chk.get("max")
        for key, g in rows.groupby(keys):
            mine = _value(g, subject, metric)
            if mine is None or not np.isfinite(mine):
                continue
            ok = (lo is None or mine >= float(lo)) and (hi is None or mine <= float(hi))
            held.append(ok)
            notes.append(f"{_where_label(key)}: {subject} {metrics.show(metric, mine, unit=True)} "
                         f"(allowed {'' if lo is None else f'>= {lo}'}{' and ' if lo is not None and hi is not None else ''}"
                         f"{'' if hi is None else f'<= {hi}'}: {'yes' if ok else 'no'})")
    else:
        for key, g in rows.groupby(keys):
            mine = _value(g, subject, metric)
            theirs = {o: _value(g, o, metric) for o in others}
            theirs = {o: v for o, v in theirs.items() if v is not None}
            if mine is None or not theirs:
                continue
            if chk["kind"] == "better":
                ok = all((mine > v) if higher else (mine < v) for v in theirs.values())
                detail = ", ".join(f"{o} {metrics.show(metric, v, unit=True)}" for o, v in theirs.items())
            else:  # ratio_at_least: subject / each other >= value (or <= 1/value when lower is better)
                ratios = {o: (mine / v if higher else v / mine) if v and mine else float("nan")
                          for o, v in theirs.items()}
                ok = all(r >= float(chk.get("value") or 1.0) for r in ratios.values())
                detail = ", ".join(f"x{r:.2f} vs {o}" for o, r in ratios.items())
            held.append(ok)
            notes.append(f"{_where_label(key)}: {subject} {metrics.show(metric, mine, unit=True)}; {detail} "
                         f"({'yes' if ok else 'no'})")
    if not held:
        what = f"{across} ({chk['variant']} runs)" if across in ("dataset", "x") else "strategy"
        return Verdict(claim, "not measured", [f"no run of the subject and a comparison {what} matches"])
    verdict = "holds" if all(held) else ("does not hold" if not any(held) else f"partly ({sum(held)}/{len(held)})")
    return Verdict(claim, verdict, notes)


def evaluate_all(table: pd.DataFrame, claims: list[dict] | None = None) -> list[Verdict]:
    return [evaluate(c, table) for c in (load_claims() if claims is None else claims)]

