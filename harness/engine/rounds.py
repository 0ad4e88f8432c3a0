"""Snapshot queries in two rounds: SSTD's two-phase SKQ (Sec. 6.2), around an epoch's job.

Round one runs in the epoch: the dispatchers send such a query to one worker, the lowest-numbered
of those its point alone reaches (the leaf holding the point: SSTD's "leaf node closest to q.rho";
worker 0 if none does), and that worker returns a value (a kNN query's local k-th distance r^2,
inf with fewer than k answers) instead of an answer (`WorkerIndex.followups`). Round two runs after
the epoch: the driver narrows each query's rectangle to the square of half side r around its point
(within the rectangle it had), routes it as every snapshot query is routed, and each worker it
reaches answers from the store the epoch left, as of the query's arrival, with answers within r
only (`WorkerIndex.answer_followups`); the family's merger merges them like any snapshot answer.

Exact whichever worker round one picks: a subset's k-th distance is no smaller than the global
k-th, so every global answer lies within r, hence in the square, which the routers' snapshot
routing covers as it does an SRQ's rectangle (each router's contract; versioned routing included).
The stores forget nothing within an epoch (object_store.py), so the epoch's last state still holds
what each query of the epoch may see. The round-one worker answers again in round two (SSTD's
worker reports its k results at the end of the second phase too); its first answer is not shipped.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from harness.core.events import Events, key_hash_sum
from harness.engine.merge import merge_bucket, plain_rows
from harness.engine.worker import routing_view
from harness.families.base import StateBundle

# a margin on the square's half side: sqrt's rounding must not leave out an answer at exactly r
SIDE_MARGIN = 1e-9


def with_first_round(copies, view: Events, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The copies of `view` by `copies(events) -> (rows, workers)`, except the rows `first` (the
    first round's queries), each sent to the lowest worker its point alone reaches (0: none)."""
    rest = np.ones(len(view), bool)
    rest[first] = False
    rest = np.flatnonzero(rest)
    rows, workers = copies(view.take(rest)) if len(rest) else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    points = view.take(first)
    points = Events({**points.cols, "xmin": points.x, "xmax": points.x, "ymin": points.y, "ymax": points.y},
                    points.offsets, points.values)
    p_rows, p_workers = copies(points)
    lowest = np.zeros(len(first), np.int64)
    if len(p_rows):
        order = np.lexsort((p_workers, p_rows))
        seen, at = np.unique(np.asarray(p_rows)[order], return_index=True)
        lowest[seen] = np.asarray(p_workers)[order][at]
    return (np.concatenate([rest[np.asarray(rows, np.int64)], first]).astype(np.int64),
            np.concatenate([np.asarray(workers, np.int64), lowest]))


def second_round_events(events: Events, followups: pa.Table) -> Events:
    """The second round's query events: each first-round query (by seq) with its rectangle the
    square of half side r = sqrt(value) around its point, within its own rectangle (unchanged
    when r is infinite), and r^2 in `win` (the column a kNN query leaves unused), in seq order."""
    followups = followups.sort_by("seq")
    seq = followups.column("seq").to_numpy()
    pos = np.searchsorted(events.seq, seq)
    if len(seq) and (pos.max() >= len(events) or (events.seq[pos] != seq).any()):
        raise ValueError("a worker returned a first round for a query that is not in the stream")
    ev = events.take(pos)
    r2 = followups.column("value").to_numpy().astype(np.float64)
    half = np.sqrt(r2) * (1.0 + SIDE_MARGIN)
    cols = {**ev.cols, "xmin": np.maximum(ev.xmin, ev.x - half), "xmax": np.minimum(ev.xmax, ev.x + half),
            "ymin": np.maximum(ev.ymin, ev.y - half), "ymax": np.minimum(ev.ymax, ev.y + half), "win": r2}
    return Events(cols, ev.offsets, ev.values)


def answer_second_round(setup, code: int, state: StateBundle, ev: Events) -> tuple[list[bytes], np.ndarray, float]:
    """One worker's second round for one family, by a fresh index over the state the worker kept
    (`WorkerIndex.answer_followups`): its result blocks for the merger, the work per query, the
    CPU seconds."""
    out = setup.factories[code]().answer_followups(state, ev)
    return [blob for _, blob in setup.mergers[code].blocks(out.results, 1)], out.work, out.busy_s


def finish_epoch(executor, epoch: int, events: Events, setup, router, reps: list) -> None:
    """Run the epoch's second round, if its workers began any, and add it to each repetition's
    result: its answers, its copies, each worker's busy time, its service times (`second_service`).
    `router`: the one the epoch dispatched with (versioned routing included)."""
    followups = reps[0].followups
    if not followups:
        return
    requests: dict[int, dict[int, Events]] = {}
    queries: dict[int, Events] = {}
    for code, table in sorted(followups.items()):
        ev = second_round_events(events, table)
        rows, workers = setup.route(router, routing_view(ev, setup.codes))
        requests[code] = {int(w): ev.take(np.sort(rows[workers == w])) for w in np.unique(workers).tolist()}
        queries[code] = ev
    answered = executor.second_round(epoch, requests)
    count = hashed = copies = 0
    kept = []
    busy: dict[int, float] = {}
    service: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for code in requests:
        blobs = [blob for c, _, bs, _, _ in answered if c == code for blob in bs]
        res = merge_bucket(setup.mergers[code], None, blobs, queries[code], 1)
        keys = res.keys
        count, hashed = count + len(keys), (hashed + key_hash_sum(keys)) % (1 << 64)
        if len(keys):
            kept.append(plain_rows(setup.mergers[code], code, res))
    if kept:
        executor.keep_pairs_of(epoch, pa.concat_tables(kept))
    for code, w, _, work, busy_s in answered:  # each block's CPU time apportioned by its work
        seq = requests[code][w].seq
        busy[w] = busy.get(w, 0.0) + busy_s
        mine = (seq, busy_s * work / max(float(work.sum()), 1.0))
        service[w] = mine if w not in service else tuple(np.r_[a, b] for a, b in zip(service[w], mine))
        copies += len(seq)
    for res in reps:
        res.result_count += count
        res.result_hash = (res.result_hash + hashed) % (1 << 64)
        res.routed_pairs += copies
        res.routed_queries += copies
        for w, b in busy.items():
            stats = res.worker_stats.setdefault(w, {})
            stats["busy_s"] = stats.get("busy_s", 0.0) + b
            stats["second_round_s"] = b
        res.second_service = service
