"""One meaning for anomalous streams, by construction: every stream is normalised once, before
anything (oracle, strategies, simulator, Spark) consumes it, so no consumer has its own reading.

The generator never writes anomalies, but a user's event file or a replayed log can. Per query id
(across families: results are keyed by query id), in seq order, an insert or delete is kept only
if it changes the id's state never -> live -> dead:

- `orphan_deletes`: a delete of an id that is not live (never inserted yet, or already deleted);
- `duplicate_inserts`: an insert of an id that is live;
- `reused_ids`: an insert of an id that was live and was deleted (an id names one subscription for
  the whole stream, so a second life would share its result keys with the first);

each dropped and counted. A kept delete takes its insert's payload (family, point, rectangle,
terms, operator, k, ...): routers place a delete by that payload, so a delete carrying less or
another rectangle would miss the worker holding the subscription (`delete_payloads_filled`
counts the deletes that differed). Objects and snapshot events pass untouched; a repeated object
id is kept and counted (`duplicate_object_ids`): results are distinct (query, object id) pairs in
the oracle and in every merger alike, so a repeat is exact, and dropping it would lose the
matches of a different object.

Seq is renumbered to the event's position (0..n-1, in seq order) whenever the stream is not
already so: epoch bounds are positions, the simulator slices by position and the Spark pipeline
filters `seq >= lo & seq < hi` with those same positions, so seq must equal position. `ts` is
kept. A stream with nothing to fix comes back as the same object.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from harness.core.events import DELETE, INSERT, OBJECT, Events, csr_take

COUNTS = ("orphan_deletes", "duplicate_inserts", "reused_ids", "duplicate_object_ids", "delete_payloads_filled")
# what a delete takes from its insert: everything but its own seq, ts, kind and id
PAYLOAD = ("family", "x", "y", "xmin", "ymin", "xmax", "ymax", "op", "k", "alpha", "tau", "win", "step")
_NEVER = np.iinfo(np.int64).max


def normalise(events: Events) -> tuple[Events, dict[str, int]]:
    """The stream with its anomalies fixed (module docstring) and how many of each it had."""
    events, _, counts = normalise_prefix(events, 0)
    return events, counts


def normalise_workload(workload):
    """A Workload normalised: its warm-up is what remains of the original warm-up prefix, and the
    counts are in `info`: the fixes added to any already there (so normalising twice reports the
    same), the repeated object ids (kept, so found again) as found."""
    events, warmup, counts = normalise_prefix(workload.events, workload.warmup)
    info = dict(workload.info)
    for k, v in counts.items():
        info[k] = v if k == "duplicate_object_ids" else int(info.get(k, 0)) + v
    return replace(workload, events=events, warmup=warmup, info=info)


def normalise_prefix(events: Events, warmup: int) -> tuple[Events, int, dict[str, int]]:
    """`normalise` keeping track of a prefix: (events, kept events of the first `warmup`, counts).
    The prefix is the first `warmup` events in seq order."""
    n = len(events)
    seq = events.seq
    if n > 1 and np.any(seq[1:] < seq[:-1]):
        events = events.take(np.argsort(seq, kind="stable"))
    kind, ids = events.kind, events.id
    pos = np.arange(n, dtype=np.int64)
    q = np.flatnonzero((kind == INSERT) | (kind == DELETE))
    o = np.lexsort((q, ids[q]))  # by id, then position
    qs, qid, is_ins = q[o], ids[q][o], kind[q][o] == INSERT
    group = np.cumsum(np.r_[True, qid[1:] != qid[:-1]]) - 1 if len(qs) else np.zeros(0, np.int64)
    n_groups = int(group[-1]) + 1 if len(qs) else 0
    first_ins = _first_per_group(group, qs, is_ins, n_groups)
    kept_del = _first_per_group(group, qs, ~is_ins & (qs > first_ins[group]), n_groups)
    keep_q = np.where(is_ins, qs == first_ins[group], qs == kept_del[group])
    drop_ins = is_ins & ~keep_q
    reused = drop_ins & (qs > kept_del[group])
    obj_ids = ids[kind == OBJECT]
    counts = {
        "orphan_deletes": int((~is_ins & ~keep_q).sum()),
        "duplicate_inserts": int((drop_ins & ~reused).sum()),
        "reused_ids": int(reused.sum()),
        "duplicate_object_ids": int(len(obj_ids) - len(np.unique(obj_ids))),
        "delete_payloads_filled": 0,
    }
    d_rows = qs[~is_ins & keep_q]
    d_src = first_ins[group[~is_ins & keep_q]]
    differs = _payload_differs(events, d_rows, d_src)
    counts["delete_payloads_filled"] = int(differs.sum())
    if differs.any():
        src = pos.copy()
        src[d_rows[differs]] = d_src[differs]
        cols = dict(events.cols)
        for c in PAYLOAD:
            cols[c] = cols[c][src]
        offsets, values = csr_take(events.offsets, events.values, src)
        events = Events(cols, offsets, values)
    keep = np.ones(n, bool)
    keep[qs[~keep_q]] = False
    if not keep.all():
        warmup = int(keep[:warmup].sum())
        events = events.take(np.flatnonzero(keep))
    if not np.array_equal(events.seq, np.arange(len(events))):
        events = Events({**events.cols, "seq": np.arange(len(events), dtype=np.int64)}, events.offsets, events.values)
    return events, warmup, counts


def _first_per_group(group: np.ndarray, positions: np.ndarray, mask: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group, the smallest position among the masked rows (rows sorted by group, then position)."""
    out = np.full(n_groups, _NEVER, np.int64)
    g, p = group[mask], positions[mask]
    if len(g):
        first = np.r_[True, g[1:] != g[:-1]]
        out[g[first]] = p[first]
    return out


def _payload_differs(events: Events, rows: np.ndarray, src: np.ndarray) -> np.ndarray:
    """Per (delete row, insert row) pair: whether any payload column or the terms differ (NaN equals NaN)."""
    differs = np.zeros(len(rows), bool)
    if not len(rows):
        return differs
    for c in PAYLOAD:
        a, b = events.cols[c][rows], events.cols[c][src]
        same = a == b
        if a.dtype.kind == "f":
            same |= np.isnan(a) & np.isnan(b)
        differs |= ~same
    lens = np.diff(events.offsets)
    differs |= lens[rows] != lens[src]
    check = np.flatnonzero(~differs & (lens[rows] > 0))
    if len(check):
        _, va = csr_take(events.offsets, events.values, rows[check])
        _, vb = csr_take(events.offsets, events.values, src[check])
        owner = np.repeat(np.arange(len(check)), lens[rows[check]])
        differs[check] = np.bincount(owner, weights=va != vb, minlength=len(check)) > 0
    return differs
