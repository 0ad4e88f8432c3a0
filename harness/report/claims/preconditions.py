"""What must have happened in a claim's own runs for the claim to be put to the test (issue 48).

A claim may declare `requires:` in conf/claims.yaml, a list of preconditions, each a kind alone
(`moves`) or a mapping (`{kind: moves, after: 0, of: [qttree + pm]}`). They are read from the same
runs the claim compares: the runs table's row of each compared run and, when its folder is there,
its per-epoch series (`<run_dir>/epochs.parquet`, or a record's gathered epochs table). A cell whose precondition fails is "not
exercised", with the reason, and never counts as a failure (harness/report/claims/__init__.py).

Kinds (`of`: the variants it is asked of; its default per kind):

- `moves` (adjustment claims; default: every compared run with an adjuster): the run moved
  something (an epoch with migrated queries or bytes) and kept `after` (default 3) measured epochs
  after its last move, without a stall, on which the paper reads its figures ("the system
  throughput after the adjustment", sstd.txt l.384; Fig. 16 after GR acts, ps2stream.txt l.425).
  Without the epochs table: migrated_queries or migrated_bytes > 0 and epochs - adjustments >=
  after (a necessary condition: when the moves fell is not in the runs table).
- `latency_floor` (mean-latency claims; default: every compared run): each one's mean latency at
  the common rate exceeds the model's floor, its own latency at the lowest rate of its curve (the
  queues empty: service time plus the network profile's fixed hop delays), by more than the
  resolution (`resolution_ms`, default 0.01 ms, the figures' shown precision). Below it the
  latency is the model's fixed delay, not queueing (PS2Stream's 15-407 ms, ps2stream.txt l.348).
- `pruned` (replication claims; default: the subject): the mechanism that prunes acted before
  the replication is read: replicas dropped in the run's first measured epoch (every reading of
  stored_replication is at an epoch's end after it), else in the run (DSkype's prefixes cut by
  kScore after system initialisation, skype.txt l.650-665, l.819).
- `reached` (bounds on a share of tuples under a threshold; asked of every run in the claim's cell,
  the other methods of the preset included): some run's share is below 1, i.e. some tuple took
  longer than the threshold. When none did (every method reads 100% under 100 ms: PS2Stream's
  Fig. 12(c) bound, ps2stream.txt l.418, with migrations that stall for milliseconds), the bound
  "at least 80% under 100 ms" cannot fail, so it was not put to the test.
- `queues` (snapshot-latency claims after a hot spot; default: the compared runs without an
  adjuster, the baseline): the hot spot made the baseline's snapshot queries wait, i.e. their mean
  latency over the second half of its measured epochs exceeds that of its first measured epoch
  (before the hot spot builds) by more than `rise` (default 0.2, a 20% rise). Fig. 14(c) reads
  how much an adjustment cuts the latency the hot spot causes (sstd.txt l.384-386); where the
  baseline's queries wait no longer in the hot spot than before it (the model runs each run at
  0.7x its own throughput), no adjustment can cut anything.
- `same_cells` (selection-time claims; default: every compared run): the compared methods chose
  from the same number of candidate cells in the same number of selections ("we run the four
  algorithms on the same worker (having the same set of cells)"; their time "is only determined
  by the number of cells", ps2stream.txt l.396).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.report import results

REQUIRES = ("moves", "latency_floor", "pruned", "same_cells", "reached", "queues")
FIELDS = {"moves": ("after", "of"), "latency_floor": ("resolution_ms", "of"), "pruned": ("of",),
          "same_cells": ("of",), "reached": (), "queues": ("rise", "of")}
MIN_QUEUE_RISE = 0.2  # `queues`: the baseline's snapshot latency in the hot spot over before it, at least x1.2
MIN_EPOCHS_AFTER_MOVE = 3  # measured epochs after the last move the figures are read on (issue 48)
LATENCY_RESOLUTION_MS = 0.01  # latencies are shown and compared to 0.01 ms
PER_CELL_KINDS = ("better", "ratio_at_least", "bound", "between")  # the kinds `compare` judges cell by cell


@dataclass(frozen=True)
class Requirement:
    kind: str
    of: tuple[str, ...] | None = None  # the variants it is asked of (None: the kind's default)
    after: int = MIN_EPOCHS_AFTER_MOVE
    resolution_ms: float = LATENCY_RESOLUTION_MS
    rise: float = MIN_QUEUE_RISE


def parse(claim: dict) -> list[Requirement]:
    """The claim's `requires`, checked (a ValueError naming the claim, the field, its value and
    what is allowed)."""
    cid, raw = claim.get("id"), claim.get("requires")
    if raw is None:
        return []
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"claim {cid!r}: requires={raw!r} is invalid; allowed: a non-empty list of preconditions, "
                         f"each one of {', '.join(REQUIRES)} or a mapping with `kind` "
                         "(harness/report/claims/preconditions.py)")
    kind = claim.get("check", {}).get("kind")
    if kind not in PER_CELL_KINDS:
        raise ValueError(f"claim {cid!r}: requires is only read by the kinds judged cell by cell "
                         f"({', '.join(PER_CELL_KINDS)}), not check.kind={kind!r}")
    out = []
    for item in raw:
        spec = {"kind": item} if isinstance(item, str) else item
        if not isinstance(spec, dict) or spec.get("kind") not in REQUIRES:
            got = spec.get("kind") if isinstance(spec, dict) else spec
            raise ValueError(f"claim {cid!r}: requires kind={got!r} is invalid; allowed: {', '.join(REQUIRES)}")
        k = spec["kind"]
        unknown = sorted(set(spec) - {"kind", *FIELDS[k]})
        if unknown:
            raise ValueError(f"claim {cid!r}: requires {k}: unknown field(s) {unknown}; allowed: "
                             f"{', '.join(FIELDS[k])}")
        of = spec.get("of")
        if of is not None and not (isinstance(of, list) and of and all(isinstance(v, (str, int, float)) for v in of)):
            raise ValueError(f"claim {cid!r}: requires {k}: of={of!r} is invalid; allowed: a non-empty list of the "
                             "compared variants (check.subject / check.others) it is asked of")
        after = spec.get("after", MIN_EPOCHS_AFTER_MOVE)
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            raise ValueError(f"claim {cid!r}: requires {k}: after={after!r} is invalid; allowed: an integer >= 0 "
                             "(measured epochs after the last move)")
        res = spec.get("resolution_ms", LATENCY_RESOLUTION_MS)
        if isinstance(res, bool) or not isinstance(res, (int, float)) or not res > 0:
            raise ValueError(f"claim {cid!r}: requires {k}: resolution_ms={res!r} is invalid; allowed: a number > 0")
        if k == "reached" and not str(claim["check"].get("metric", "")).startswith("latency_share_lt_"):
            raise ValueError(f"claim {cid!r}: requires reached reads a share of tuples under a threshold "
                             f"(latency_share_lt_*), not check.metric={claim['check'].get('metric')!r}")
        rise = spec.get("rise", MIN_QUEUE_RISE)
        if isinstance(rise, bool) or not isinstance(rise, (int, float)) or not rise > 0:
            raise ValueError(f"claim {cid!r}: requires {k}: rise={rise!r} is invalid; allowed: a number > 0 "
                             "(0.2: a 20% rise)")
        if k == "queues" and claim["check"].get("metric") != "snapshot_latency_mean_ms":
            raise ValueError(f"claim {cid!r}: requires queues reads the epochs' snapshot latency "
                             f"(snapshot_latency_mean_ms), not check.metric={claim['check'].get('metric')!r}")
        if k == "latency_floor" and claim["check"].get("metric") != "latency_mean_ms":
            raise ValueError(f"claim {cid!r}: requires latency_floor reads the latency curve of latency_mean_ms, "
                             f"not check.metric={claim['check'].get('metric')!r}")
        out.append(Requirement(k, tuple(str(v) for v in of) if of is not None else None, after, float(res),
                               float(rise)))
    return out


# ------------------------------------------------------------------------------------------ reading


def epochs_of(row: pd.Series) -> pd.DataFrame | None:
    """The run's per-epoch series (its folder's epochs.parquet, or a record's gathered table:
    results.run_frame), or None when it is not there."""
    return results.run_frame(row, "epochs")


def _num(v) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return float("nan")
    return f


def _col(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name not in frame:
        return np.zeros(len(frame))
    return pd.to_numeric(frame[name], errors="coerce").fillna(0.0).to_numpy(np.float64)


def _moves(row: pd.Series, after: int) -> str | None:
    """Why the run's adjustment was not exercised (None: it moved, with `after` quiet epochs after)."""
    epochs = epochs_of(row)
    if epochs is not None and "epoch" in epochs and len(epochs):
        epochs = epochs.sort_values("epoch")
        moved = (_col(epochs, "migrated_queries") + _col(epochs, "migrated_bytes")) > 0
        if not moved.any():
            return f"nothing moved in its {len(epochs)} measured epochs"
        ep = epochs["epoch"].to_numpy()
        last = float(ep[moved].max())
        quiet = int(((ep > last) & (_col(epochs, "pause_max_s") <= 0)).sum())
        if quiet < after:
            return (f"{quiet} measured epochs without a stall after its last move (epoch {last:g}), fewer than "
                    f"the {after} the figures are read on")
        return None
    queries, nbytes = _num(row.get("migrated_queries")), _num(row.get("migrated_bytes"))
    if not (queries > 0 or nbytes > 0):
        return f"nothing moved (migrated_queries {queries:g}, migrated_bytes {nbytes:g})"
    n_epochs, n_adj = _num(row.get("epochs")), _num(row.get("adjustments"))
    if math.isfinite(n_epochs) and math.isfinite(n_adj) and n_epochs - n_adj < after:
        return (f"{n_epochs:g} measured epochs and {n_adj:g} adjustments leave fewer than {after} epochs after "
                f"the last move (runs table; no epochs table)")
    return None


def _pruned(row: pd.Series) -> str | None:
    """Why the run's replication was read before its pruning acted (None: it acted first)."""
    epochs = epochs_of(row)
    if epochs is not None and "epoch" in epochs and "replicas_dropped" in epochs and len(epochs):
        first = epochs.sort_values("epoch").iloc[0]
        if not _num(first["replicas_dropped"]) > 0:
            dropped = float(_col(epochs, "replicas_dropped").sum())
            return (f"no replica pruned in its first measured epoch ({dropped:g} in all): the replication read "
                    f"at the epochs' ends is not all after the pruning")
        return None
    if not _num(row.get("replicas_dropped")) > 0:
        return "no replica pruned in the run: the pruning never acted"
    return None


def _floor(row: pd.Series, basis: str | None, at: float, resolution: float) -> str | None:
    """Why the run's mean latency at the common rate is the model's floor (None: it queues above it)."""
    raw = row.get("latency_curve")
    curve = json.loads(raw).get(basis) if isinstance(raw, str) and raw and basis else None
    if not curve:
        return f"no latency curve on the {basis} basis: the model's floor is unknown"
    floor = float(min(curve)[1])  # the lowest rate: the queues empty
    if not at - floor > resolution:
        return (f"{at * 1e3:,.1f} µs is within {resolution * 1e3:g} µs of the model's floor ({floor * 1e3:,.1f} µs at "
                f"its lowest rate: service time and the profile's fixed hop delays): no queueing to compare")
    return None


def _queues(row: pd.Series, rise: float) -> str | None:
    """Why the hot spot did not make the run's snapshot queries wait (None: it did): their mean
    latency over the second half of its measured epochs against its first measured epoch's."""
    s = epochs_of(row)
    if s is None or "snapshot_latency_mean_ms" not in s or "snapshot_queries" not in s or len(s) < 2:
        return "its epochs table has no snapshot_latency_mean_ms: whether the hot spot queued its queries is unknown"
    s = s.sort_values("epoch")
    n, ms, epoch = _col(s, "snapshot_queries"), _col(s, "snapshot_latency_mean_ms"), _col(s, "epoch")
    first, late = slice(0, 1), slice(len(s) // 2, len(s))
    if not (n[first].sum() > 0 and n[late].sum() > 0):
        return "no snapshot query in its first epoch or in its second half: nothing to compare"
    before = float((n[first] * ms[first]).sum() / n[first].sum())
    during = float((n[late] * ms[late]).sum() / n[late].sum())
    if during > before * (1 + rise):
        return None
    lo, hi = epoch[late].min(), epoch[late].max()
    return (f"its snapshot queries waited {during * 1e3:,.1f} µs on epochs {lo:g}-{hi:g} against "
            f"{before * 1e3:,.1f} µs in its first epoch, not {1 + rise:g}x: the hot spot did not queue them, "
            f"so no adjustment had a wait to cut")


SAME_CELLS_TOLERANCE = 0.01  # candidate-cell counts within 1% are the same cells (a hot spot's edge moves a few)


def _same_cells(rows: dict[str, pd.Series]) -> str | None:
    """Why the compared selections were not timed on the same cells (None: as many selections, and
    candidate-cell counts within SAME_CELLS_TOLERANCE of each other). The premise (ps2stream.txt
    l.396: the running time is "only determined by the number of cells") needs the same order of
    cells, not the same cell to the unit: gr and dp chose from 8,326 and 8,332 cells in the same 5
    selections of the 2026-11-29 re-run, while Fig. 13's two sizes differ 2x (8,326 vs 15,787)."""
    seen = {}
    for name, row in rows.items():
        n_adj, cand = _num(row.get("adjustments")), _num(row.get("select_candidates"))
        if not (n_adj > 0 and cand > 0):
            return f"{name} selected no cells (adjustments {n_adj:g}, candidate cells {cand:g})"
        seen[name] = (n_adj, cand)
    counts = [c for _, c in seen.values()]
    if len({a for a, _ in seen.values()}) > 1 or max(counts) > min(counts) * (1 + SAME_CELLS_TOLERANCE):
        shown = ", ".join(f"{n} {c:,.0f} in {a:g}" for n, (a, c) in seen.items())
        return (f"the methods chose from different cells (candidate cells in selections: {shown}; the same "
                f"cells: as many selections, counts within {SAME_CELLS_TOLERANCE:.0%})")
    return None


def _reached(g: pd.DataFrame, metric: str) -> str | None:
    """Why no run of the cell `g` put a share-under-threshold bound to the test (None: one did)."""
    shares = pd.to_numeric(g[metric], errors="coerce").dropna() if metric in g else pd.Series(dtype=float)
    if len(shares) and (shares < 1.0).any():
        return None
    return (f"no run of the {len(shares)} in this cell had a tuple past the threshold ({metric} = 100% in every "
            "one): the bound cannot fail here")


def unmet(requires: list[Requirement], g: pd.DataFrame, subject, others: list, basis: str | None = None,
          latency_at=None, metric: str | None = None) -> list[str]:
    """The reasons the cell `g` (its runs, one per variant) did not exercise the claim: empty when
    every precondition holds. `latency_at(variant)`: the variant's mean latency (ms) at the common
    rate (latency_floor)."""
    if not requires:
        return []
    compared = [subject, *others]
    rows = {}
    for v in compared:
        hit = g[g["variant"].astype(str) == str(v)]
        if len(hit):
            rows[str(v)] = hit.iloc[-1]
    reasons = []
    for req in requires:
        names = list(req.of) if req.of is not None else None
        if req.kind == "moves":
            for n in _moved(names, rows):
                if n in rows and (why := _moves(rows[n], req.after)):
                    reasons.append(f"{n}: {why}")
        elif req.kind == "pruned":
            for n in names if names is not None else [str(subject)]:
                if n in rows and (why := _pruned(rows[n])):
                    reasons.append(f"{n}: {why}")
        elif req.kind == "latency_floor":
            for n in names if names is not None else list(rows):
                at = latency_at(n) if latency_at is not None and n in rows else None
                if at is None:
                    continue
                if why := _floor(rows[n], basis, at, req.resolution_ms):
                    reasons.append(f"{n}: {why}")
        elif req.kind == "queues":
            baseline = names if names is not None else [n for n in rows if n not in _moved(None, rows)]
            for n in baseline:
                if n in rows and (why := _queues(rows[n], req.rise)):
                    reasons.append(f"{n}: {why}")
        elif req.kind == "reached":
            if metric is not None and (why := _reached(g, metric)):
                reasons.append(why)
        elif req.kind == "same_cells":
            chosen = {n: rows[n] for n in (names if names is not None else list(rows)) if n in rows}
            if why := _same_cells(chosen):
                reasons.append(why)
    return reasons


EPOCH_COLUMNS = {"compute": "throughput_compute_eps", "network": "throughput_network_eps"}


def _moved(names: list[str] | None, rows: dict[str, pd.Series]) -> list[str]:
    """The runs `moves` is asked of: `names`, else the compared runs with an adjuster."""
    if names is not None:
        return [n for n in names if n in rows]
    return [n for n, r in rows.items() if " + " in n
            or (isinstance(r.get("adjust"), str) and r.get("adjust") not in ("", "none"))]


# the metrics an adjustment claim reads after the move
READ_AFTER_MOVES = ("throughput_eps", "busy_max_min", "snapshot_latency_mean_ms")


def _after_value(s: pd.DataFrame, sel: pd.DataFrame, metric: str, basis: str | None) -> tuple[float | None, str | None]:
    """The metric on the selected epochs of one run's series: throughput = events over the epochs'
    summed bottleneck time; balance = the busiest worker's summed busy time over the least busy's
    (busy_max_s / busy_min_s summed over the epochs, so that a short epoch weighs less); snapshot
    latency = the mean over the epochs' snapshot queries (each epoch's mean weighted by its
    queries). (None, why) when the series cannot give it."""
    if metric == "snapshot_latency_mean_ms":
        if "snapshot_latency_mean_ms" not in s or "snapshot_queries" not in s:
            return None, "its epochs table has no snapshot_latency_mean_ms (runs before issue 48's leftovers)"
        n = pd.to_numeric(sel["snapshot_queries"], errors="coerce").fillna(0)
        ms = pd.to_numeric(sel["snapshot_latency_mean_ms"], errors="coerce").fillna(0)
        return (float((n * ms).sum() / n.sum()), None) if n.sum() > 0 else (None, "no snapshot query after the move")
    if metric == "throughput_eps":
        col = EPOCH_COLUMNS.get(basis)
        if col is None or col not in s:
            return None, f"its epochs table has no {col}"
        eps = pd.to_numeric(sel[col], errors="coerce")
        events = pd.to_numeric(sel["events"], errors="coerce")
        if not ((eps > 0).all() and (events > 0).all()):
            return None, "an epoch without its events or throughput"
        return float(events.sum() / (events / eps).sum()), None
    if "busy_min_s" not in s or "busy_max_s" not in s:
        return None, "its epochs table has no busy_min_s (runs before issue 48 part 2)"
    lo = float(pd.to_numeric(sel["busy_min_s"], errors="coerce").sum())
    hi = float(pd.to_numeric(sel["busy_max_s"], errors="coerce").sum())
    return (hi / lo, None) if lo > 0 else (float("inf"), None)


def read_after_moves(requires: list[Requirement], g: pd.DataFrame, subject, others: list, metric: str,
                     basis: str | None, values: dict) -> tuple[dict, str | None]:
    """A throughput or balance claim that requires `moves` (with epochs after them) reads every
    compared run on the same epochs: those after the last move of any of them, without a stall in
    any (the paper's "system throughput after the adjustment", sstd.txt l.384; Fig. 16,
    ps2stream.txt l.425), from each run's epochs table, with the run's own relative repetition
    interval (`_after_value` says how each metric is read). The values as read, and a note on what
    was read (None: nothing changed)."""
    req = next((r for r in requires if r.kind == "moves" and r.after > 0), None)
    if req is None or metric not in READ_AFTER_MOVES or (metric == "throughput_eps" and basis not in EPOCH_COLUMNS):
        return values, None
    rows = {}
    for v in [subject, *others]:
        hit = g[g["variant"].astype(str) == str(v)]
        if len(hit):
            rows[str(v)] = hit.iloc[-1]
    series = {n: epochs_of(r) for n, r in rows.items()}
    if any(s is None or "epoch" not in s or "events" not in s for s in series.values()):
        return values, "read over the whole run (no epochs table)"
    lasts = []
    for n in _moved(list(req.of) if req.of is not None else None, rows):
        s = series[n]
        moved = (_col(s, "migrated_queries") + _col(s, "migrated_bytes")) > 0
        if moved.any():
            lasts.append(float(s["epoch"].to_numpy()[moved].max()))
    if not lasts:
        return values, None  # nothing moved: the precondition says so
    epochs = None
    for s in series.values():
        quiet = set(s.loc[(s["epoch"] > max(lasts)) & (_col(s, "pause_max_s") <= 0), "epoch"].tolist())
        epochs = quiet if epochs is None else epochs & quiet
    if not epochs or len(epochs) < req.after:
        return values, None  # too few: the precondition says so
    out = dict(values)
    for n, s in series.items():
        mid, why = _after_value(s, s[s["epoch"].isin(epochs)], metric, basis)
        if mid is None:
            return values, f"read over the whole run ({why})"
        old = values.get(n)
        if old is None:
            continue
        lo, hi = (old.lo / old.mid, old.hi / old.mid) if old.mid > 0 and math.isfinite(old.mid) else (1.0, 1.0)
        out[n] = type(old)(mid, mid * lo, mid * hi, old.how)
    first, last = min(epochs), max(epochs)
    return out, f"read on epochs {first:g}-{last:g}, after the last move ({len(epochs)} epochs)"
