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
noise at least), not exercised (no cell put the claim to the test), not measured.

A claim may declare `requires:`, what must have happened in its own runs for it to be tested
(harness/report/claims/preconditions.py: a move with epochs after it, latencies above the model's floor,
replication read after the pruning acted, selections timed on the same cells). A cell whose
precondition fails, or whose two points tie (the experiment did not separate them, unless
`check.equality_ok: true`), is "not exercised", with the reason in its note: it never counts as a
failure. When some cells were exercised the verdict reads them alone and says how many were not
("holds (2/2 exercised cells hold; 1 not exercised)"); when none was, it is "not exercised"
(issue 48).

The comparisons themselves, value by value and kind by kind, are harness/report/claims/checks.py.

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

A claim with `retired: <reason>` (a claim that cannot be judged here as the paper states it, e.g. a
ratio between two different machines) is not evaluated: it reports the verdict "retired" with its
reason and stays outside every tally (`tally`, `counted`), kept in conf/claims.yaml for the record.

A claim whose verdict may depend on the size (subscriptions, stored objects) may name a size sweep,
`sizes: size_<paper>` (conf/experiment/size_*.yaml): it is then also judged at every step of that
sweep, with the trend of its ratio against size (harness/report/sizes.py); its own verdict here
still reads its preset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path

import numpy as np
import pandas as pd

import yaml

from harness.report import metrics, results
from harness.report.claims import aa_pairs, bases
from harness.report.claims import preconditions
from harness.report.claims.checks import (BASIS_COLUMNS, CELL, FAIL, HOLD, LATENCY_CURVE, Reader, cell_label, compare,
                                         gap_grows, is_skip, linear, num, scales)
from harness.report.results import PROJECT_ROOT

CLAIMS_FILE = PROJECT_ROOT / "conf" / "claims.yaml"
PRESETS_DIR = PROJECT_ROOT / "conf" / "experiment"
KINDS = ("better", "ratio_at_least", "scales", "bound", "linear", "gap_grows", "between")
ACROSS = ("variant", "dataset", "x")  # what a claim's subject and others name (check.across; variant by default)
ACROSS_KINDS = ("better", "ratio_at_least", "gap_grows", "between")
SCOPES = ("paper", "extension")  # extension: the harness's own reading, outside the papers' tallies
BASES = ("compute", "network")
NOT_EXERCISED = "not exercised"  # no cell put the claim to the test (issue 48): never a failure
VERDICTS = ("holds", "partly", "does not hold", "inconclusive", NOT_EXERCISED, "not measured")
RETIRED = "retired"  # a retired claim's verdict: shown with its reason, outside VERDICTS and every tally


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
        kinds = {v.kind for b, v in self.verdicts.items()
                 if b in BASES and v.kind not in ("not measured", NOT_EXERCISED)}
        return len(kinds) > 1

    def on(self, basis: str) -> Verdict:
        return self.verdicts.get(basis) or next(iter(self.verdicts.values()))

    @property
    def derived(self) -> list[str]:
        """The derived bases (harness/report/claims/bases.py) the claim was judged on."""
        return [b for b in self.verdicts if b not in BASES and b != "any"]

    @property
    def findings(self) -> list[str]:
        """The derived bases on which the claim holds while it does not hold on compute: the finding
        that the paper's result follows from what that basis models (its per-message cost, its scale;
        `bases.REGISTRY[b].finding`). "partly" and "inconclusive" on either side are no such finding."""
        compute = self.verdicts.get("compute")
        if compute is None or compute.kind != "does not hold":
            return []
        return [b for b in self.derived if self.verdicts[b].kind == "holds"]


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
        if "retired" in c and not (isinstance(c["retired"], str) and c["retired"].strip()):
            raise ValueError(f"claim {cid!r}: retired={c['retired']!r} is invalid; allowed: the reason, as text, why "
                             f"the claim cannot be judged here (or no `retired` field)")
        fitted = c.get("fitted_by")
        if fitted is not None and not (isinstance(fitted, dict) and fitted
                                       and all(k in bases.REGISTRY and isinstance(v, str) and v.strip()
                                               for k, v in fitted.items())):
            raise ValueError(f"claim {cid!r}: fitted_by={fitted!r} is invalid; allowed: a mapping from a derived "
                             f"basis ({', '.join(bases.REGISTRY)}) to the reason its model was fitted on this "
                             "claim's own published figures, so the claim is not judged on it")
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
        if "equality_ok" in chk and not isinstance(chk["equality_ok"], bool):
            raise ValueError(f"claim {cid!r}: check.equality_ok={chk['equality_ok']!r} is invalid; allowed: true (the "
                             f"paper claims 'at least as good': a tie of points holds) or false")
        if kind in ("better", "ratio_at_least", "scales", "gap_grows"):
            higher_is_better(c)
        _check_across(c)
        preconditions.parse(c)
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


def disagreed_with_oracle(value) -> bool:
    """Whether a run's `oracle_ok` says it disagreed. A nullable boolean column's missing value (no
    oracle ran) is pd.NA, which has no truth value: an unchecked run did not disagree."""
    return not pd.isna(value) and (value is False or value == 0 or value == "False")


def _ok_mask(rows: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(usable, why not) per run: ok status, the oracle's answer (or no oracle), long enough, not
    measured on a loaded machine, not the A/A repeat (harness/report/claims/aa_pairs.py)."""
    why = pd.Series("", index=rows.index, dtype=object)
    why[rows["status"] != "ok"] = "failed"
    if "oracle_ok" in rows:
        bad = rows["oracle_ok"].astype(object).map(disagreed_with_oracle)
        why[(why == "") & bad] = "disagreed with the oracle"
    if "too_short" in rows:
        short = pd.to_numeric(rows["too_short"], errors="coerce").fillna(0) > 0
        why[(why == "") & short] = "too short to measure (bottleneck under measure.min_bottleneck_s)"
    busy, reason = aa_pairs.loaded(rows)
    why[(why == "") & busy] = reason[(why == "") & busy]
    why[(why == "") & aa_pairs.is_repeat(rows)] = aa_pairs.REPEAT_REASON
    return why == "", why


def aa_spread(preset: str, table: pd.DataFrame, column: str) -> aa_pairs.Spread | None:
    """The preset's A/A spread on `column` (harness/report/claims/aa_pairs.py), from its runs of the code
    version its claims read that are usable but for being the A/A repeat."""
    table = _cell_frame(table)
    rows = table[table["experiment"] == preset].sort_values("started_at", kind="stable")
    if "code_version" in rows and rows["code_version"].notna().any():
        rows = rows[rows["code_version"] == rows["code_version"].dropna().iloc[-1]]
    _, why = _ok_mask(rows)
    return aa_pairs.spread(rows[why.isin(["", aa_pairs.REPEAT_REASON])], column)


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
            excluded.append(f"{r['variant']} at {cell_label(tuple(r[k] for k in CELL))}: {why[i]} "
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
        return rows.assign(variant=[num(v) for v in rows["x"]], x=None)
    return rows


def verdict_of(outcomes: list) -> str:
    """The claim's verdict from its cells' outcomes (True holds, False fails, None within the noise,
    SKIP not exercised). The cells not exercised are left out of the verdict and counted beside it;
    none exercised: "not exercised"."""
    if not outcomes:
        return "not measured"
    skipped = sum(is_skip(o) for o in outcomes)
    n = len(outcomes) - skipped
    if n == 0:
        return NOT_EXERCISED
    held, failed = sum(o is HOLD for o in outcomes), sum(o is FAIL for o in outcomes)
    if skipped:  # the exercised cells' verdict, with how many were not exercised
        kind = ("holds" if held == n else "partly" if held and failed else "does not hold" if failed
                else "inconclusive")
        noise = f", {n - held - failed} within the noise" if n - held - failed else ""
        return f"{kind} ({held}/{n} exercised cells hold{noise}; {skipped} not exercised)"
    if held == n:
        return "holds"
    if held and failed:
        return f"partly ({held}/{n})"
    if failed:
        return "does not hold"
    return f"inconclusive ({held}/{n} hold, {n - held} within the noise)" if held else "inconclusive"


def _unmet(claim: dict, others: list, basis: str | None):
    """The claim's preconditions as `compare` asks them of a cell (None: it declares none)."""
    requires = preconditions.parse(claim)
    if not requires:
        return None

    def unmet(g: pd.DataFrame, subject, values: dict) -> list[str]:
        mids = {str(k): v.mid for k, v in values.items() if v is not None}
        return preconditions.unmet(requires, g, subject, others, basis, latency_at=mids.get,
                                   metric=Reader(claim["check"]["metric"], basis).column)
    return unmet


def _reread(claim: dict, others: list, basis: str | None):
    """A throughput or balance claim that requires moves is read on the epochs after the last move
    (harness/report/claims/preconditions.py `read_after_moves`; None: read as the runs table gives it)."""
    requires = preconditions.parse(claim)
    metric = claim["check"]["metric"]
    if not any(r.kind == "moves" and r.after > 0 for r in requires) or metric not in preconditions.READ_AFTER_MOVES:
        return None

    def reread(g: pd.DataFrame, subject, values: dict):
        return preconditions.read_after_moves(requires, g, subject, others, metric, basis, values)
    return reread


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
    reader = Reader(metric, basis)
    pair = aa_spread(claim["preset"], table, reader.column)  # widens every value read (aa_pairs.py)
    reader.widen = pair.widen if pair is not None else None
    if len(rows) and reader.column not in rows and not (metric == "latency_mean_ms" and LATENCY_CURVE in rows):
        return Verdict(claim, "not measured", [f"no column {reader.column!r} in the preset's runs"], basis, excluded,
                       runs=list(rows.get("run_id", [])))
    if kind == "scales":
        out, notes, missing = scales(reader, rows, subjects[0], float(chk.get("value") or 1.0), higher)
    elif kind == "linear":
        out, notes, missing = linear(reader, rows, subjects[0], float(chk.get("value") or 0.9))
    elif kind == "gap_grows":
        out, notes, missing = gap_grows(reader, rows, subjects[0], others, higher)
    else:
        keys = list(CELL)
        out, notes, missing = compare(reader, rows, keys, chk, higher, subjects, others,
                                      _unmet(claim, others, basis), _reread(claim, others, basis))
        seen = {tuple(_cellvalue(v) for v in k) for k in rows[keys].itertuples(index=False)} if len(rows) else set()
        where = {k: v for k, v in (chk.get("where") or {}).items() if k != "x" or chk.get("across") != "x"}
        for cell in sorted(_expected_cells(rows, where, keys) - seen, key=str):
            missing.append(f"{cell_label(cell)}: no usable run of the preset")
    if not out and not missing:
        missing.append(f"no usable run of the preset {claim['preset']!r} matches the claim's cells")
    verdict = "not measured" if missing else verdict_of(out)
    if pair is not None and pair.rel > 0:
        notes = [*notes, pair.note(metric)]
    if basis in bases.REGISTRY:  # where a derived basis's figures come from
        notes = [*notes, *(f"{basis}: {n}" for n in bases.notes(table, basis, list(rows.get("run_id", []))))]
    return Verdict(claim, verdict, notes, basis, excluded, missing, list(rows.get("run_id", [])))


def is_retired(claim: dict) -> bool:
    return bool(claim.get("retired"))


def counted(claim_results: list[ClaimResult]) -> list[ClaimResult]:
    """The claims a tally counts: every one but the retired."""
    return [r for r in claim_results if not is_retired(r.claim)]


def evaluate_both(claim: dict, table: pd.DataFrame) -> ClaimResult:
    """The claim on each basis where its metric depends on one, else once; a retired claim is not
    evaluated: one verdict, "retired", with its reason."""
    if is_retired(claim):
        return ClaimResult(claim, {"any": Verdict(claim, RETIRED, [f"retired: {claim['retired'].strip()}"])})
    if is_basis_dependent(claim["check"]["metric"]):
        verdicts = {b: evaluate(claim, table, b) for b in BASES}
        if claim["check"]["metric"] in BASIS_COLUMNS:  # a throughput claim: each derived basis with figures
            for name in bases.present(table):
                if name in (claim.get("fitted_by") or {}) or not bases.judges(name, claim):
                    continue  # fitted on the claim's own figures, or a basis without a model for its paper
                v = evaluate(claim, table, name)
                if bases.has_figures(table, name, v.runs):
                    verdicts[name] = v
        return ClaimResult(claim, verdicts)
    return ClaimResult(claim, {"any": evaluate(claim, table, None)})


def evaluate_all(table: pd.DataFrame, claims: list[dict] | None = None,
                 preset: str | None = None) -> list[ClaimResult]:
    """Every claim (or those of one preset) on both bases."""
    claims = load_claims() if claims is None else claims
    table = with_derived(table)
    return [evaluate_both(c, table) for c in claims if preset is None or c["preset"] == preset]


def with_derived(table: pd.DataFrame) -> pd.DataFrame:
    """The runs table with the derived bases' columns (harness/report/claims/bases.py), once: a table
    that has one already, or whose runs none of them has a figure for, is returned as it is."""
    if bases.present(table):
        return table
    return bases.attach(table)


def tally(verdicts: list[ClaimResult], basis: str) -> dict[str, int]:
    """How many claims hold, partly, ... on one basis (a basis-free claim counts on both; a retired
    claim counts nowhere)."""
    counts = dict.fromkeys(VERDICTS, 0)
    for r in counted(verdicts):
        if basis in BASES or basis in r.verdicts:  # a derived basis counts the claims judged on it
            counts[r.on(basis).kind] += 1
    return counts


def derived_bases(claim_results: list[ClaimResult]) -> list[str]:
    """The derived bases some of the claims were judged on, in the registry's order."""
    seen = {b for r in claim_results for b in r.derived}
    return [b for b in bases.REGISTRY if b in seen]


def findings(claim_results: list[ClaimResult]) -> list[tuple[ClaimResult, str]]:
    """(claim, derived basis) for every counted claim that holds on the derived basis and does not
    hold on compute (ClaimResult.findings)."""
    return [(r, b) for r in counted(claim_results) for b in r.findings]
