"""The monitor: per-unit and per-worker statistics of an epoch, as the papers' systems gather them.

Each worker counts, for the migration units it owns (router units, strategies/adjust_base.py),
the objects that fell in them, the subscription updates, the subscriptions stored at the epoch's
start and end, their size in bytes, and the candidate checks of the unit's objects; its measured
busy time is apportioned to units by checks. The same function runs inside the Spark worker
stage and in the in-process simulator, so both see identical statistics.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from harness.core.events import DELETE, INSERT, OBJECT, Events, row_bytes
from harness.families import registry as families
from strategies.adjust_base import UNIT_COLUMNS

def _owned_units(router, ev: Events, rows: np.ndarray, worker: int, owner: np.ndarray):
    if len(rows) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    r, u = router.units(ev, rows)
    mine = owner[u] == worker
    return r[mine], u[mine]


def unit_stats(router, worker: int, ev: Events, work: np.ndarray, busy_s: float, start: Events,
               end: Events) -> pa.Table:
    """One worker's per-unit statistics for an epoch (columns UNIT_COLUMNS); empty if the router
    has no units."""
    if not router.has_units:
        return pa.table({c: pa.array([], pa.float64()) for c in UNIT_COLUMNS})
    owner = router.unit_owner()
    n = len(owner)
    obj = np.flatnonzero(ev.kind == OBJECT)
    upd = np.flatnonzero((ev.kind == INSERT) | (ev.kind == DELETE))
    o_r, o_u = _owned_units(router, ev, obj, worker, owner)
    # an object matched in several of this worker's units splits its checks evenly among them
    per_obj = np.bincount(o_r, minlength=len(ev))[o_r] if len(o_r) else np.zeros(0)
    checks = np.bincount(o_u, weights=np.asarray(work, np.float64)[o_r] / np.maximum(per_obj, 1),
                         minlength=n).astype(np.float64)
    objects = np.bincount(o_u, minlength=n).astype(np.float64)
    _, u_u = _owned_units(router, ev, upd, worker, owner)
    updates = np.bincount(u_u, minlength=n).astype(np.float64)
    _, s_u = _owned_units(router, start, np.arange(len(start)), worker, owner)
    q_start = np.bincount(s_u, minlength=n).astype(np.float64)
    e_r, e_u = _owned_units(router, end, np.arange(len(end)), worker, owner)
    q_end = np.bincount(e_u, minlength=n).astype(np.float64)
    q_bytes = np.bincount(e_u, weights=row_bytes(end, e_r).astype(np.float64), minlength=n).astype(np.float64)
    queries = (q_start + q_end) / 2.0
    total_checks = checks.sum()
    share = checks / total_checks if total_checks > 0 else objects / max(objects.sum(), 1.0)
    keep = np.flatnonzero((objects > 0) | (updates > 0) | (q_start > 0) | (q_end > 0))
    cols = {
        "unit": keep.astype(np.float64), "worker": np.full(len(keep), float(worker)),
        "objects": objects[keep], "updates": updates[keep], "queries_start": q_start[keep],
        "queries_end": q_end[keep], "queries": queries[keep], "query_bytes": q_bytes[keep],
        "checks": checks[keep], "busy_s": busy_s * share[keep],
        "load": objects[keep] * queries[keep] + objects[keep] + updates[keep],
    }
    return pa.table({c: cols[c] for c in UNIT_COLUMNS})


# the counters every worker reports (a family's own: `Family.counters`, in `counters()`)
COUNTERS = ("events", "objects", "inserts", "deletes", "candidates", "results", "busy_s", "restore_s",
            "index_bytes", "restored", "pause_s", "replicas_dropped", "resent", "snapshots",
            "snapshot_checks", "stored_objects", "stored_bytes")
LEVELS = ("index_bytes", "stored_objects", "stored_bytes")  # what a worker holds: the largest over the epochs, not a sum


def counters() -> tuple[str, ...]:
    """The worker table's counters: the shared ones, then every registered family's own."""
    out = list(COUNTERS)
    for name in families.names():
        out += [c for c in families.get(name).counters if c not in out]
    return tuple(out)


def worker_table(epoch_stats: list[dict[int, dict]], n_workers: int) -> pd.DataFrame:
    """Per worker totals over the given (measured) epochs' worker statistics; workers that got
    nothing show zeros. `pause_s` is the time a migration stalled the worker before the epoch."""
    names = counters()
    rows = []
    for w in range(n_workers):
        row = {"worker": w}
        for c in names:
            row[c] = 0.0
        load = 0.0
        for stats in epoch_stats:
            st = stats.get(w, {})
            for c in names:
                if c in LEVELS:
                    row[c] = max(row[c], st.get(c, 0))
                else:
                    row[c] += st.get(c, 0)
            held = st.get("restored", 0) + (st.get("inserts", 0) - st.get("deletes", 0)) / 2.0
            o = st.get("objects", 0)
            load += o * max(held, 0.0) + o + st.get("inserts", 0) + st.get("deletes", 0)
        row["load"] = load
        rows.append(row)
    return pd.DataFrame(rows)


def units_frame(tables: list[pa.Table]) -> pd.DataFrame:
    """The epoch's unit statistics from every worker, unit and worker as integers."""
    if not tables:
        return pd.DataFrame({c: pd.Series(dtype=float) for c in UNIT_COLUMNS}).astype({"unit": int, "worker": int})
    frame = pa.concat_tables(tables).to_pandas()
    return frame.astype({"unit": np.int64, "worker": np.int64})


def workers_frame(worker_stats: dict[int, dict], n_workers: int) -> pd.DataFrame:
    """Per-worker monitor table of one epoch (load as in `worker_table`)."""
    table = worker_table([worker_stats], n_workers)
    table["updates"] = table["inserts"] + table["deletes"]
    return table
