"""A preset's A/A pair and the loaded runs, as the claims read them (issue 48, part 3).

A/A pair. A preset's first job is measured at its start (runs marked `aa_role = "a1"`) and again at
its end (`"a2"`, harness/run/aa_pair.py). The two measure the same configuration; what separates
them is the machine over the preset's time, which the repetition intervals (within one run,
seconds apart) do not cover: two presets measured one DSkype configuration at 193k and 95.6k
events/s. The preset's A/A spread on a column is the largest, over the pair's variants, of

    s = |a2 - a1| / ((a1 + a2) / 2)

(the newest usable a2 run of each variant against the newest usable a1 run of the same variant and
cell). Every value a claim of the preset reads is then widened to

    [lo * (1 - s), hi * (1 + s)]   (lo not below 0 when it was not)

so a ratio subject / other has the interval [lo_a (1 - s) / (hi_b (1 + s)), hi_a (1 + s) /
(lo_b (1 - s))], and a comparison is decided only beyond what the machine did to one
configuration. The a2 runs are not read for the verdict (the a1 runs are the preset's own, read in
their cell); they are listed among the runs left out, with why.

Loaded runs. A run whose stored load figures pass today's thresholds (harness/core/machine_load.py
`reasons`: other processes' share of the machine, steal, and gross load per core or CPU/wall) is
left out of the verdicts as a run too short to measure is, with the reason; the `loaded` flag
written when it ran (under the limits of that day) is kept for the record, not read. A cell whose
runs were all loaded has no usable run: the claim is "not measured" there, never "does not hold".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from harness.core import machine_load
from harness.report import metrics
from harness.report.claims.checks import CELL, Value, cell_label

A1, A2 = "a1", "a2"
REPEAT_REASON = "the A/A repeat of the preset's first job (read for the A/A spread, not the verdict)"


def loaded(rows: pd.DataFrame, limits: machine_load.Thresholds | None = None) -> tuple[pd.Series, pd.Series]:
    """(loaded, why) per run, judged now from the load figures the runs table keeps
    (harness/core/machine_load.py `reasons`, with `limits`, default the config's defaults), so a
    threshold changed after a run re-judges it; a row without those figures is not loaded."""
    limits = limits or machine_load.Thresholds()
    if not any(c in rows for c in machine_load.COLUMNS[:-2]):
        return pd.Series(False, index=rows.index), pd.Series("", index=rows.index, dtype=object)
    why = pd.Series([("measured on a loaded machine: " + "; ".join(r)) if (r := machine_load.reasons(row, limits))
                     else "" for row in rows.to_dict("records")], index=rows.index, dtype=object)
    return why != "", why


def is_repeat(rows: pd.DataFrame) -> pd.Series:
    """The runs of the A/A repeat (aa_role a2)."""
    if "aa_role" not in rows:
        return pd.Series(False, index=rows.index)
    return rows["aa_role"].astype(object).map(lambda v: v == A2)


@dataclass
class Spread:
    """The preset's A/A spread on one column: `rel` (s above), from the variant where it is largest."""

    rel: float
    column: str
    variant: str
    cell: tuple
    a1: float
    a2: float
    pairs: int  # the variants with an A/A pair

    def widen(self, value: Value | None) -> Value | None:
        """`value`'s interval scaled by (1 - s, 1 + s) (see the module's docstring)."""
        if value is None or self.rel <= 0:
            return value
        lo = value.lo * (1 - self.rel) if value.lo >= 0 else value.lo * (1 + self.rel)
        if value.lo >= 0:
            lo = max(lo, 0.0)
        hi = value.hi * (1 + self.rel) if value.hi >= 0 else value.hi * (1 - self.rel)
        return Value(value.mid, min(lo, value.mid), max(hi, value.mid), value.how or "widened")

    def note(self, metric: str) -> str:
        """The line a claim's output shows: which run pair, its figures, and how it widened."""
        show = lambda v: metrics.show(metric, v, unit=True) if metrics.known(metric) else f"{v:g}"  # noqa: E731
        return (f"A/A spread {self.rel:.1%}: {self.variant} at {cell_label(self.cell)} measured {show(self.a1)} at "
                f"the preset's start and {show(self.a2)} at its end (largest of {self.pairs} A/A pair(s)); every "
                f"interval widened to [lo x (1 - {self.rel:.3f}), hi x (1 + {self.rel:.3f})]")


def spread(rows: pd.DataFrame, column: str) -> Spread | None:
    """The A/A spread on `column` of a preset's usable runs `rows` (one code version, a1 and a2
    rows among them, in the order they started); None without a pair with finite figures."""
    if "aa_role" not in rows or column not in rows or not len(rows):
        return None
    role = rows["aa_role"].astype(object)
    best = None
    pairs = 0
    for variant, a2_rows in rows[role == A2].groupby("variant", sort=True):
        a2 = a2_rows.iloc[-1]
        cell = tuple(a2.get(k) for k in CELL)
        same = (rows["variant"] == variant) & (role == A1)
        for k in CELL:
            if k in rows:
                same &= rows[k].astype(str) == str(a2.get(k))
        if not same.any():
            continue
        a1 = rows[same].iloc[-1]
        v1, v2 = _float(a1.get(column)), _float(a2.get(column))
        if not (math.isfinite(v1) and math.isfinite(v2)) or v1 + v2 <= 0:
            continue
        pairs += 1
        rel = abs(v2 - v1) / ((v1 + v2) / 2)
        if best is None or rel > best.rel:
            best = Spread(rel, column, str(variant), cell, v1, v2, 0)
    if best is not None:
        best.pairs = pairs
    return best


def _float(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")

