"""What an event file's reader (datasets/workloads/events_file.py) knows of a query type, declared
by the type's family (`Family.file_types`, harness/families/<family>/formats.py) so that the reader
names none: `QueryType` (label, needed columns, checks, what the reader derives), `FileFormat` (a
family's types and derivations), and the small checks a family composes (`ordered_rectangle`,
`positive_k`, `has_keywords`, `left_empty`), each refusing the first bad row by row and column."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from harness.core.events import Events

RECTANGLE = ("xmin", "ymin", "xmax", "ymax")


class TypeRows:
    """The rows of one query type in a file, as a family's checks see them (`QueryType.checks`):
    `mine` (a mask over the events), the type's `label`, `first(mask)` (the first such event or
    None) and `fail(column, value, i, allowed)` (a ValueError naming the file, column and row)."""

    def __init__(self, events: Events, mine: np.ndarray, label: str, err, rows, blank_k, is_obj):
        self.events, self.mine, self.label = events, mine, label
        self.n_terms = np.diff(events.offsets)
        self.blank_k, self.is_obj = blank_k, is_obj
        self._err, self._rows = err, rows

    @staticmethod
    def first(mask) -> int | None:
        at = np.flatnonzero(mask)
        return int(at[0]) if len(at) else None

    def fail(self, column: str, value, i: int, allowed: str):
        self._err.fail(column, value, self._rows[i], allowed)


# Checks a family composes into its query types (harness/families/<family>/formats.py); each takes
# the type's rows (TypeRows) and refuses the first row that breaks it.


def ordered_rectangle(t: TypeRows) -> None:
    """xmin <= xmax and ymin <= ymax."""
    ev = t.events
    i = t.first(t.mine & ((ev.xmin > ev.xmax) | (ev.ymin > ev.ymax)))
    if i is not None:
        t.fail("xmin/xmax, ymin/ymax", (float(ev.xmin[i]), float(ev.xmax[i]), float(ev.ymin[i]), float(ev.ymax[i])),
               i, "min <= max")


def positive_k(t: TypeRows) -> None:
    """A result size k >= 1 (a blank cell named as missing)."""
    i = t.first(t.mine & (t.events.k < 1))
    if i is not None:
        t.fail("k", None if t.blank_k[i] else t.events.k[i], i, f"an integer >= 1 for every {t.label}")


def has_keywords(t: TypeRows) -> None:
    """At least one keyword."""
    i = t.first(t.mine & (t.n_terms == 0))
    if i is not None:
        t.fail("terms", [], i, f"at least one keyword for every {t.label}")


def left_empty(*columns: str, why: str = ""):
    """A check that `columns` are empty (NaN) on the type's rows; `why` follows the refusal."""
    def check(t: TypeRows) -> None:
        for c in columns:
            i = t.first(t.mine & np.isfinite(t.events.cols[c]))
            if i is not None:
                t.fail(c, t.events.cols[c][i], i, f"empty for a {t.label}" + why)
    return check


@dataclass(frozen=True)
class QueryType:
    """One query type of an event file (a family's insert or snapshot), declared by its family
    (`Family.file_types`, harness/families/<family>/formats.py), so that this reader names none:

    - `label`: how a refusal names it; `needs`: the columns every row of it must have finite
      (`hints`: a column's meaning, appended to that refusal); `checks`: the type's own rules
      (TypeRows -> None), after the shared ones (objects' points, tau > 0 where given);
    - what the generators give it and the reader derives the same way (`derive`): `space`
      ("always": its routing rectangle is the space's extent, as a generated subscription's that
      routes by an unbounded region; "missing": the space when the row has no rectangle), `op` (the
      keyword operator it always has), `lifetime` (its `tau` is a lifetime: deleted at ts + tau);
      an insert's `space` and `op` reach its deletes too;
    - `refused`: the type has no form (every row of it is refused on `kind`, with this text)."""

    label: str
    needs: tuple[str, ...] = ()
    checks: tuple[Callable, ...] = ()
    hints: dict = field(default_factory=dict)
    space: str | None = None
    op: int | None = None
    lifetime: bool = False
    refused: str | None = None


@dataclass(frozen=True)
class FileFormat:
    """What the reader needs of one family: its `name` and `code`, its query `types` by kind
    (INSERT, SNAPSHOT), and the events it derives when the stream holds an insert of it: `derive`
    ((events, warmup) -> (events, warmup, info), before normalisation: a continuous query's report
    events) and `finish` ((events, cfg) -> (events, info), after it: a window over the normalised
    stream). harness/families/workload.py: file_formats() builds one per registered family."""

    name: str
    code: int
    types: dict
    derive: Callable | None = None
    finish: Callable | None = None
