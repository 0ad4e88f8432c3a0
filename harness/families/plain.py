"""The shared steps of a family's plain export (`ResultFormat.plain`, harness/families/result_rows.py),
as `python -m harness.export` calls it per epoch: the queries of a family in the stream the run
read, and the plain rows of a family whose results are (query, object) pairs.

A family's plain export takes its kept rows of one epoch (a pandas DataFrame: `epoch` and the
RESULT_SCHEMA columns it declares), its exit rows (every epoch's: a result may leave in a later
epoch than it entered), the stream (seq, ts, kind, family, id, step) and its code, and returns the
rows of its file (harness/export.py adds the user's ids and words)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.core.events import DELETE, INSERT, OBJECT, SNAPSHOT


def queries(ev: pd.DataFrame, code: int) -> pd.DataFrame:
    """Per query id of the family: the kind it was asked as, its seq and ts, its `step` and its
    deletion seq (or -1). A snapshot event carrying a `step` is a report a continuous query's
    insert derived (datasets/workloads/snapshot.py: with_ctq_reports), not a query of its own."""
    q = ev[(ev.family == code) & ev.kind.isin([INSERT, SNAPSHOT]) & ~((ev.kind == SNAPSHOT) & ev.step.notna())]
    first = q.sort_values("seq").drop_duplicates("id")[["id", "kind", "seq", "ts", "step"]]
    dels = ev[(ev.family == code) & (ev.kind == DELETE)].groupby("id").seq.min().rename("del_seq")
    out = first.set_index("id").join(dels).rename(columns={"seq": "q_seq", "ts": "q_ts", "kind": "q_kind"})
    out["del_seq"] = out.del_seq.fillna(-1).astype(np.int64)
    return out


def pair_plain(t: pd.DataFrame, exits: pd.DataFrame, ev: pd.DataFrame, code: int,
               names: tuple[str, str] = ("continuous", "snapshot")) -> pd.DataFrame:
    """qid, object, type (`names`: a continuous query's, a snapshot query's), epoch, and the seq and
    ts the result entered at: a continuous query's, its object's arrival (the first object of that
    id after the insert); a snapshot query's, its own."""
    q = queries(ev, code)
    t = t.join(q, on="qid")
    cont = t.q_kind == INSERT
    objs = ev[ev.kind == OBJECT][["id", "seq", "ts"]].sort_values("seq")
    c = t[cont].sort_values("q_seq")
    hit = pd.merge_asof(c.reset_index(), objs.rename(columns={"id": "item", "seq": "o_seq", "ts": "o_ts"}),
                        left_on="q_seq", right_on="o_seq", by="item", direction="forward",
                        allow_exact_matches=False).set_index("index")
    t["seq"], t["ts"] = t.q_seq, t.q_ts  # a snapshot query's answers: at the query
    t.loc[hit.index, "seq"] = hit.o_seq.to_numpy()
    t.loc[hit.index, "ts"] = hit.o_ts.to_numpy()
    t["type"] = np.where(cont, names[0], names[1])
    t = t.rename(columns={"item": "object"})
    return t[["qid", "object", "type", "epoch", "seq", "ts"]].sort_values(["qid", "seq", "object"])
