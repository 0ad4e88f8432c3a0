"""The top-k family's formats: its event-file query type (a subscription; it has no snapshot form),
the count or time window a file's stream is given as the generator gives it, and its results in
plain form (entries with the seq they entered and left at; hashed keys)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from datasets.workloads.file_types import QueryType, TypeRows, has_keywords, left_empty, positive_k
from harness.core.events import INSERT, OBJECT, OR, SNAPSHOT, TOPK, Events
from harness.families.plain import queries
from harness.families.result_rows import ResultFormat
from harness.families.topk.keys import entry_keys


def alpha_and_no_tau(t: TypeRows) -> None:
    """alpha in (0, 1); no tau: a subscription's window is the workload's (a delete ends it)."""
    ev = t.events
    i = t.first(t.mine & ~((ev.alpha > 0) & (ev.alpha < 1)))
    if i is not None:
        t.fail("alpha", ev.alpha[i], i, "a number strictly between 0 and 1 for every top-k insert")
    i = t.first(t.mine & np.isfinite(ev.tau))
    if i is not None:
        t.fail("tau", ev.tau[i], i, "empty for a top-k insert: its window is workload.window "
               "(or window_by=time, window_s); a delete ends a subscription")


FILE_TYPES = {
    # routes by the space (every message sharing a keyword may enter), keywords ORed (Skype Sec. 3)
    INSERT: QueryType("top-k insert", needs=("x", "y", "alpha"),
                      checks=(positive_k, has_keywords, left_empty("win", "step", why=" (only a CTQ insert has one)"),
                              alpha_and_no_tau),
                      hints={"alpha": " (Score = alpha SSim + (1 - alpha) TSim)"}, space="always", op=OR),
    SNAPSHOT: QueryType("top-k snapshot", refused="insert or delete (top-k subscriptions have no snapshot form)"),
}


def with_window(events: Events, cfg) -> tuple[Events, int]:
    """The top-k generator's window columns (datasets/workloads/topk.py) on a file's stream: a
    subscription's `win` is |W| = `workload.window` (count window), an object's `win` the seq at
    which it leaves: that of the |W|-th object after it (window_by=count), or of the first object
    at least `window_s` seconds younger (window_by=time, the file's own ts; a subscription's `tau`
    is then T). Returns the events and |W| (time windows: the objects of the first T seconds)."""
    cols = dict(events.cols)
    n = len(events)
    obj = np.flatnonzero(events.kind == OBJECT)
    q = (events.kind != OBJECT) & (events.family == TOPK)
    win = np.where(events.kind == OBJECT, np.nan, cols["win"])
    if getattr(cfg, "window_by", "count") == "time":
        T = float(cfg.window_s)
        o_ts = events.ts[obj]
        leave = np.searchsorted(o_ts, o_ts + T, side="left")
        inside = leave < len(obj)
        win[obj[inside]] = obj[leave[inside]].astype(np.float64)
        cols["tau"] = np.where(q, T, cols["tau"])
        W = int(np.searchsorted(o_ts, o_ts[0] + T, side="left")) if len(obj) else 0
    else:
        W = int(cfg.window)
        win[obj[:max(len(obj) - W, 0)]] = obj[W:].astype(np.float64)
    win[q] = float(W)
    cols["win"] = win
    assert len(win) == n
    return Events(cols, events.offsets, events.values), W



def finish(events: Events, cfg) -> tuple[Events, dict]:
    """The window on a file's normalised stream (`with_window`), |W| as `window`."""
    events, window = with_window(events, cfg)
    return events, {"window": window}


def _keys(qid, item, seq=None, report=None, count=None) -> np.ndarray:
    return entry_keys(qid, item, seq)


def plain(t: pd.DataFrame, exits: pd.DataFrame, ev: pd.DataFrame, code: int) -> pd.DataFrame:
    """qid, object, score, epoch, entered_seq/entered_ts (the trigger: the object's arrival, the
    registration or a refill), left_seq/left_ts (the seq it left the global top-k at, from the
    exits of any later epoch, or the subscription's deletion; empty if it was in at the end)."""
    q = queries(ev, code)
    t = t.rename(columns={"seq": "entered_seq"}).sort_values("entered_seq")
    x = exits[exits.family == code].rename(columns={"seq": "left_seq"}).sort_values("left_seq")[["qid", "item",
                                                                                                  "left_seq"]]
    t = pd.merge_asof(t, x, left_on="entered_seq", right_on="left_seq", by=["qid", "item"], direction="forward",
                      allow_exact_matches=False)
    dele = t.qid.map(q.del_seq).fillna(-1).astype(np.int64)
    t["left_seq"] = t.left_seq.fillna(dele.where(dele >= 0)).astype("Int64")
    ts = ev.set_index("seq").ts
    t["entered_ts"] = t.entered_seq.map(ts)
    t["left_ts"] = t.left_seq.map(ts)
    t = t.rename(columns={"item": "object"})
    return t[["qid", "object", "score", "epoch", "entered_seq", "entered_ts", "left_seq", "left_ts"]].sort_values(
        ["qid", "entered_seq", "object"])


RESULTS = ResultFormat(keys=_keys, columns=("qid", "item", "seq", "score"), plain=plain)
