"""What the count mode's observer (harness/counts/tally.py) is told about an epoch, computed where
the work is done, by either executor: per dispatcher the events it received and the copies it sent
(`dispatch_counts`), per worker the sums of its objects' work units (`work_sums`, for the standard
errors of sampled counts). Both are sums, so the parts the Spark dispatch tasks count of an
epoch's batches add up on the driver (`add_dispatch_counts`) to what the in-process executor
counts over the whole epoch.
"""

from __future__ import annotations

import numpy as np

from harness.core.events import OBJECT, Events

# per dispatcher: events dealt to it, objects among them, the objects' copies and their squares
# (a dispatcher's copy count varies per object: its standard error), the subscription events' copies
DISPATCH_COUNTS = ("events", "objects", "object_copies", "object_copies_sq", "query_copies")


def dispatch_counts(ev: Events, rows: np.ndarray, n_dispatchers: int) -> dict[str, np.ndarray]:
    """Per dispatcher (an event's is seq % n_dispatchers, as the routers that route per dispatcher
    assume) what the routing of `ev` into the copies `rows` (row of `ev` per copy) gave it."""
    nd = max(int(n_dispatchers), 1)
    disp = (ev.seq % nd).astype(np.int64)
    is_obj = ev.kind == OBJECT
    copies = np.bincount(rows, minlength=len(ev)).astype(np.float64)  # copies per event
    return {"events": np.bincount(disp, minlength=nd).astype(np.float64),
            "objects": np.bincount(disp[is_obj], minlength=nd).astype(np.float64),
            "object_copies": np.bincount(disp[is_obj], weights=copies[is_obj], minlength=nd),
            "object_copies_sq": np.bincount(disp[is_obj], weights=copies[is_obj] ** 2, minlength=nd),
            "query_copies": np.bincount(disp[~is_obj], weights=copies[~is_obj], minlength=nd)}


def add_dispatch_counts(parts: list[dict]) -> dict[str, np.ndarray]:
    """The sum of `dispatch_counts` of an epoch's batches (lists after a JSON trip, or arrays);
    empty when there are none."""
    if not parts:
        return {}
    return {k: np.sum([np.asarray(p[k], np.float64) for p in parts], axis=0) for k in DISPATCH_COUNTS}


def work_sums(events: Events, work: np.ndarray) -> list[float]:
    """A worker's epoch: the sum of its objects' work units, the sum of their squares, and how many
    objects it processed (`WorkerEpoch.events` and `.work`: the epoch's own events)."""
    obj = events.kind == OBJECT
    w = np.asarray(work, np.float64)[obj]
    return [float(w.sum()), float((w ** 2).sum()), float(obj.sum())]
