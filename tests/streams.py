"""Tiny random streams for property tests: objects, inserts and deletes in one seq order."""

from __future__ import annotations

import numpy as np

from harness.core.events import AND, DELETE, INSERT, OBJECT, OR, RANGE, TOPK, Events


def random_stream(seed: int, n_objects: int = 60, n_queries: int = 25, vocab: int = 12, extent: float = 100.0,
                  delete_fraction: float = 0.4, max_query_terms: int = 3) -> Events:
    """Objects and range subscriptions over a small square and vocabulary, so matches are common;
    queries draw 1..max_query_terms keywords (STS queries have at most 3)."""
    rng = np.random.default_rng(seed)
    kinds, ids, xs, ys, rects, terms, ops = [], [], [], [], [], [], []
    live = []
    q_next = 0
    o_next = 0
    total = n_objects + n_queries
    for _ in range(total + int(n_queries * delete_fraction)):
        r = rng.random()
        if live and r < 0.15 * delete_fraction * 2:
            q = live.pop(int(rng.integers(len(live))))
            kinds.append(DELETE), ids.append(q[0]), xs.append(q[1]), ys.append(q[2]), rects.append(q[3])
            terms.append(q[4]), ops.append(q[5])
        elif r < 0.45 and q_next < n_queries:
            cx, cy = rng.uniform(0, extent, 2)
            hw, hh = rng.uniform(1, extent / 3, 2)
            rect = (cx - hw, cy - hh, cx + hw, cy + hh)
            t = sorted(set(rng.integers(0, vocab, int(rng.integers(1, max_query_terms + 1))).tolist()))
            op = OR if (len(t) > 1 and rng.random() < 0.5) else AND
            q = (q_next, cx, cy, rect, t, op)
            live.append(q)
            kinds.append(INSERT), ids.append(q_next), xs.append(cx), ys.append(cy), rects.append(rect)
            terms.append(t), ops.append(op)
            q_next += 1
        else:
            x, y = rng.uniform(-5, extent + 5, 2)  # a few objects outside the extent
            t = sorted(set(rng.integers(0, vocab, int(rng.integers(1, 6))).tolist()))
            kinds.append(OBJECT), ids.append(o_next), xs.append(x), ys.append(y)
            rects.append((np.nan,) * 4), terms.append(t), ops.append(AND)
            o_next += 1
    return events_from_lists(kinds, ids, np.column_stack([xs, ys]) if kinds else np.zeros((0, 2)), rects, terms, ops)


def events_from_lists(kinds, ids, xy, rects, terms, ops) -> Events:
    """A stream from per-event lists (seq = ts = position): kinds, ids, (x, y) points, query
    rectangles (NaN for objects), sorted term lists and operators."""
    n = len(kinds)
    rect = np.array(rects, dtype=np.float64).reshape(n, 4)
    kind = np.array(kinds, np.int8)
    xy = np.array(xy, np.float64).reshape(n, 2)
    cols = {
        "seq": np.arange(n, dtype=np.int64), "ts": np.arange(n, dtype=np.float64), "kind": kind,
        "family": np.where(kind == OBJECT, -1, RANGE).astype(np.int8), "id": np.array(ids, np.int64),
        "x": xy[:, 0], "y": xy[:, 1],
        "xmin": rect[:, 0], "ymin": rect[:, 1], "xmax": rect[:, 2], "ymax": rect[:, 3],
        "op": np.array(ops, np.int8), "k": np.zeros(n, np.int32), "alpha": np.zeros(n, np.float32),
    }
    return _with_terms(cols, terms)


def item_events(items, seq0: int = 0) -> Events:
    """Events from ("o", x, y, terms) / ("q", rect, terms, op[, kind, id]) tuples; seq = seq0 +
    position, which is also an object's id and a query's default id."""
    n = len(items)
    cols = {k: np.zeros(n, t) for k, t in [("ts", np.float64), ("kind", np.int8), ("family", np.int8),
                                             ("id", np.int64), ("x", np.float64), ("y", np.float64),
                                             ("op", np.int8), ("k", np.int32), ("alpha", np.float32)]}
    for k in ("xmin", "ymin", "xmax", "ymax"):
        cols[k] = np.full(n, np.nan)
    cols["seq"] = np.arange(seq0, seq0 + n, dtype=np.int64)
    terms = []
    for i, it in enumerate(items):
        if it[0] == "o":
            _, x, y, t = it
            cols["kind"][i], cols["family"][i], cols["id"][i] = OBJECT, -1, seq0 + i
            cols["x"][i], cols["y"][i] = x, y
        else:
            _, rect, t, op, *rest = it
            kind, qid = (list(rest) + [INSERT, seq0 + i])[:2] if rest else (INSERT, seq0 + i)
            cols["kind"][i], cols["family"][i], cols["id"][i], cols["op"][i] = kind, RANGE, qid, op
            cols["xmin"][i], cols["ymin"][i], cols["xmax"][i], cols["ymax"][i] = rect
            cols["x"][i], cols["y"][i] = (rect[0] + rect[2]) / 2, (rect[1] + rect[3]) / 2
        terms.append(sorted(set(t)))
    return _with_terms(cols, terms)


def _with_terms(cols: dict, terms: list) -> Events:
    offsets = np.zeros(len(terms) + 1, np.int64)
    np.cumsum([len(t) for t in terms], out=offsets[1:])
    return Events(cols, offsets, np.array([v for t in terms for v in t], np.int32))


def random_knn_stream(seed: int, n_objects: int = 80, n_queries: int = 20, vocab: int = 8, extent: float = 20.0,
                      k_max: int = 3) -> Events:
    """`random_stream` with its subscriptions made kNN ones (k in 1..k_max, the rectangle the whole
    square, as at insertion) and every location on an integer lattice, so equal distances (ties)
    are common."""
    from harness.core.events import KNN

    ev = random_stream(seed, n_objects, n_queries, vocab, extent)
    cols = dict(ev.cols)
    q = ev.kind != OBJECT
    cols["family"] = np.where(q, KNN, cols["family"]).astype(cols["family"].dtype)
    cols["k"] = np.where(q, 1 + (ev.id * 7 + seed) % k_max, 0).astype(cols["k"].dtype)
    for c, v in (("xmin", 0.0), ("ymin", 0.0), ("xmax", extent), ("ymax", extent)):
        cols[c] = np.where(q, v, np.nan)
    cols["x"], cols["y"] = np.round(ev.x), np.round(ev.y)
    return Events(cols, ev.offsets, ev.values)


def random_topk_stream(seed: int, n_objects: int = 80, n_queries: int = 20, window: int = 15, vocab: int = 10,
                       extent: float = 100.0, delete_fraction: float = 0.3, k_max: int = 4,
                       warm_objects: int | None = None) -> Events:
    """Objects and top-k subscriptions (with deletions) in one seq order over a small vocabulary,
    so windows, ties (repeated locations and term sets) and refills are common. Each object's `win`
    is the seq at which it leaves the count-based window of `window` objects; each subscription's
    `win` is the window. The first `warm_objects` events are objects (default: the window)."""
    rng = np.random.default_rng(seed)
    warm = window if warm_objects is None else warm_objects
    rows = []  # (kind, id, x, y, terms, k, alpha)
    live, q_next, o_next = [], 0, 0
    spots = rng.uniform(0, extent, (6, 2))  # a few shared locations make exact score ties
    while o_next < n_objects or q_next < n_queries:
        r = rng.random()
        if o_next >= warm and live and r < 0.1 * delete_fraction * 3:
            q = live.pop(int(rng.integers(len(live))))
            rows.append((DELETE, *q))
        elif o_next >= warm and q_next < n_queries and (r < 0.35 or o_next >= n_objects):
            x, y = rng.uniform(0, extent, 2)
            t = sorted(set(rng.integers(0, vocab, int(rng.integers(1, 4))).tolist()))
            q = (q_next, x, y, t, int(rng.integers(1, k_max + 1)), float(rng.uniform(0.05, 0.95)))
            live.append(q)
            rows.append((INSERT, *q))
            q_next += 1
        elif o_next < n_objects:
            x, y = spots[int(rng.integers(len(spots)))] if rng.random() < 0.3 else rng.uniform(0, extent, 2)
            t = sorted(set(rng.integers(0, vocab, int(rng.integers(1, 5))).tolist()))
            rows.append((OBJECT, o_next, x, y, t, 0, 0.0))
            o_next += 1
        else:
            break
    n = len(rows)
    kind = np.array([r[0] for r in rows], np.int8)
    obj_seq = np.flatnonzero(kind == OBJECT)
    win = np.full(n, np.nan)
    win[obj_seq[:max(len(obj_seq) - window, 0)]] = obj_seq[window:]
    win[kind != OBJECT] = float(window)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum([len(r[4]) for r in rows], out=offsets[1:])
    cols = {"seq": np.arange(n, dtype=np.int64), "ts": np.arange(n, dtype=np.float64), "kind": kind,
            "family": np.where(kind == OBJECT, -1, TOPK).astype(np.int8),
            "id": np.array([r[1] for r in rows], np.int64), "x": np.array([r[2] for r in rows]),
            "y": np.array([r[3] for r in rows]), "op": np.where(kind == OBJECT, 0, OR).astype(np.int8),
            "k": np.array([r[5] for r in rows], np.int32), "alpha": np.array([r[6] for r in rows], np.float32),
            "win": win}
    values = np.array([t for r in rows for t in r[4]], np.int32)
    return Events(cols, offsets, values)


def random_snapshot_stream(seed: int, family: int = RANGE, n_objects: int = 80, n_queries: int = 25, vocab: int = 8,
                           extent: float = 20.0, k_max: int = 4, with_subscriptions: bool = False) -> Events:
    """Objects and snapshot queries (range or kNN) in one seq order, on an integer lattice (equal
    distances are common), with repeated timestamps (a look-back edge falls on several objects)
    and look-backs from a moment to the whole stream; `with_subscriptions` keeps `random_stream`'s
    subscriptions (inserts and deletes) beside them, made of the same family."""
    from harness.core.events import KNN, SNAPSHOT

    base = random_stream(seed, n_objects, n_queries, vocab, extent)
    rng = np.random.default_rng(seed + 1)
    n = len(base)
    cols = {k: v.copy() for k, v in base.cols.items()}
    q = base.kind != OBJECT
    inserts = np.flatnonzero(base.kind == INSERT)
    snap = np.zeros(n, np.bool_)
    chosen = inserts if not with_subscriptions else inserts[rng.random(len(inserts)) < 0.5]
    snap[chosen] = True
    if not with_subscriptions:  # the subscriptions' deletes go with them
        keep = ~(q & ~snap)
        cols = {k: v[keep] for k, v in cols.items()}
        offsets, values = _kept_terms(base, keep)
        snap, q = snap[keep], q[keep]
        n = int(keep.sum())
    else:
        offsets, values = base.offsets, base.values
        # a subscription id stays a subscription: the snapshot ones get ids of their own
        cols["id"] = np.where(snap, cols["id"] + 10_000, cols["id"])
    cols["seq"] = np.arange(n, dtype=np.int64)
    cols["ts"] = np.floor(np.arange(n) / 3.0)  # three events per instant
    cols["kind"] = np.where(snap, SNAPSHOT, cols["kind"]).astype(np.int8)
    cols["x"], cols["y"] = np.round(cols["x"]), np.round(cols["y"])
    cols["tau"] = np.where(snap, rng.choice([1.0, 4.0, 10.0, 1e9], n), np.nan)
    if family == KNN:  # the rectangle is the whole space: the objects' bounding box
        cols["family"] = np.where(q, KNN, -1).astype(np.int8)
        cols["k"] = np.where(q, rng.integers(1, k_max + 1, n), 0).astype(np.int32)
        o = ~q
        for c, v in (("xmin", cols["x"][o].min()), ("ymin", cols["y"][o].min()), ("xmax", cols["x"][o].max()),
                     ("ymax", cols["y"][o].max())):
            cols[c] = np.where(q, v, np.nan)
    return Events(cols, offsets, values)


def _kept_terms(ev: Events, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    sub = ev.take(np.flatnonzero(keep))
    return sub.offsets, sub.values


def random_terms_stream(seed: int, n_objects: int = 90, n_queries: int = 20, vocab: int = 8, extent: float = 20.0,
                        k_max: int = 4, ctq: bool = False) -> Events:
    """Objects (up to 5 terms each, a small vocabulary: counts tie often) and top-k-terms queries
    over a small square: STQs (snapshot) or CTQ registrations (with a window, a step and a
    lifetime, some deleted later) whose reports `with_ctq_reports` adds; three events per instant."""
    from datasets.workloads.snapshot import with_ctq_reports
    from harness.core.events import DELETE, SNAPSHOT, TERMS

    rng = np.random.default_rng(seed)
    kinds, ids, terms = [], [], []
    n = n_objects + n_queries
    is_q = np.zeros(n, np.bool_)
    is_q[rng.choice(np.arange(5, n), n_queries, replace=False)] = True
    o_next = q_next = 0
    for i in range(n):
        if is_q[i]:
            kinds.append(INSERT if ctq else SNAPSHOT), ids.append(q_next), terms.append([])
            q_next += 1
        else:
            kinds.append(OBJECT), ids.append(o_next)
            terms.append(sorted(set(rng.integers(0, vocab, int(rng.integers(1, 6))).tolist())))
            o_next += 1
    kind = np.array(kinds, np.int8)
    q = kind != OBJECT
    centre = rng.uniform(0, extent, (n, 2))
    half = rng.uniform(1, extent / 2, (n, 2))
    cols = {"seq": np.arange(n, dtype=np.int64), "ts": np.floor(np.arange(n) / 3.0), "kind": kind,
            "family": np.where(q, TERMS, -1).astype(np.int8), "id": np.array(ids, np.int64),
            "x": np.round(rng.uniform(0, extent, n)), "y": np.round(rng.uniform(0, extent, n)),
            "xmin": np.where(q, centre[:, 0] - half[:, 0], np.nan), "ymin": np.where(q, centre[:, 1] - half[:, 1], np.nan),
            "xmax": np.where(q, centre[:, 0] + half[:, 0], np.nan), "ymax": np.where(q, centre[:, 1] + half[:, 1], np.nan),
            "k": np.where(q, rng.integers(1, k_max + 1, n), 0).astype(np.int32),
            "tau": np.where(q, rng.choice([2.0, 6.0, 15.0, 1e9], n), np.nan),
            "win": np.where(q & ctq, rng.choice([2.0, 5.0], n), np.nan),
            "step": np.where(q & ctq, rng.choice([1.0, 2.0], n), np.nan)}
    ev = _with_terms(cols, terms)
    if not ctq:
        return ev
    # delete a third of the CTQs a few instants after their registration
    regs = np.flatnonzero(q)[::3]
    dels = ev.take(regs)
    dels.cols["kind"] = np.full(len(regs), DELETE, np.int8)
    dels.cols["ts"] = dels.ts + 4.0
    merged = Events.concat([ev, dels])
    order = np.lexsort((np.r_[np.arange(n), np.arange(n, n + len(regs))], merged.ts))
    merged = merged.take(order)
    merged.cols["seq"] = np.arange(len(merged), dtype=np.int64)
    return with_ctq_reports(merged)
