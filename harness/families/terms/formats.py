"""The frequent_terms family's formats: its event-file query types (CTQ, STQ), the report events a
file's CTQ derives, and its results in plain form (qid, report, term, count; hashed keys)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from datasets.workloads.file_types import RECTANGLE, QueryType, TypeRows, ordered_rectangle, positive_k
from harness.core.events import INSERT, SNAPSHOT, TERMS, Events, term_keys
from harness.families.plain import queries
from harness.families.result_rows import ResultFormat

_HINTS = {"tau": " (seconds: a snapshot's look-back, a CTQ's lifetime)", "win": " (seconds: the CTQ's window T)",
          "step": " (seconds: the CTQ's step between reports)"}


def no_keywords(t: TypeRows) -> None:
    """A terms query names no keyword: it counts every term of the objects in its region (SSTD)."""
    ev = t.events
    i = t.first(t.mine & (t.n_terms > 0))
    if i is not None:
        t.fail("terms", ev.values[ev.offsets[i]:ev.offsets[i + 1]].tolist(), i,
               f"none: a {t.label} counts every term of the objects in its region (SSTD)")


def window_and_step(t: TypeRows) -> None:
    """A CTQ's window and step are seconds > 0, its step within its window."""
    ev = t.events
    for c in ("win", "step"):
        i = t.first(t.mine & ~(ev.cols[c] > 0))
        if i is not None:
            t.fail(c, ev.cols[c][i], i, f"a number of seconds > 0 for every {t.label}")
    i = t.first(t.mine & (ev.step > ev.win))
    if i is not None:
        t.fail("step", ev.step[i], i, f"at most the CTQ's window win={float(ev.win[i])!r}")


def no_step(t: TypeRows) -> None:
    """An STQ's `step` is empty: a CTQ's reports are derived from its insert, not written in the file."""
    i = t.first(t.mine & np.isfinite(t.events.step))
    if i is not None:
        t.fail("step", t.events.step[i], i, "empty on a frequent_terms snapshot (STQ): a CTQ's reports are "
               "derived from its insert (win, step, tau), not written in the file")


def with_reports(events: Events, warmup: int) -> tuple[Events, int, dict]:
    """Every CTQ's report events, as the snapshot generator derives them
    (datasets.workloads.snapshot.with_ctq_reports), and how many (`ctq_reports`)."""
    from datasets.workloads.snapshot import with_ctq_reports

    events, warmup = with_ctq_reports(events, warmup)
    reports = int(((events.kind == SNAPSHOT) & (events.family == TERMS) & np.isfinite(events.step)).sum())
    return events, warmup, {"ctq_reports": reports}


FILE_TYPES = {
    INSERT: QueryType("frequent_terms insert (CTQ)", needs=(*RECTANGLE, "win", "step", "tau"),
                      checks=(ordered_rectangle, positive_k, no_keywords, window_and_step), hints=_HINTS),
    SNAPSHOT: QueryType("frequent_terms snapshot (STQ)", needs=(*RECTANGLE, "tau"),
                        checks=(ordered_rectangle, positive_k, no_keywords, no_step), hints=_HINTS),
}


def _keys(qid, item, seq=None, report=None, count=None) -> np.ndarray:
    return term_keys(qid, report, item, count)


def plain(t: pd.DataFrame, exits: pd.DataFrame, ev: pd.DataFrame, code: int) -> pd.DataFrame:
    """qid, type (stq/ctq), report (0 for an STQ), term, count, epoch, ts (the STQ's, or the CTQ
    report's time: its registration + report x step)."""
    q = queries(ev, code)
    t = t.join(q, on="qid")
    ctq = t.q_kind == INSERT
    t["type"] = np.where(ctq, "ctq", "stq")
    t["ts"] = np.where(ctq, t.q_ts + t.report * t.step, t.q_ts)
    t = t.rename(columns={"item": "term"})
    return t[["qid", "type", "report", "term", "count", "epoch", "ts"]].sort_values(
        ["qid", "report", "count", "term"], ascending=[True, True, False, True])


RESULTS = ResultFormat(keys=_keys, columns=("qid", "item", "report", "count"), plain=plain)
