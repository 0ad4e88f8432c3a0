"""A figure's counts as the cost model sees them: per window (the measured run, or an epoch) and
per worker, one column per model term, with the standard errors of a sampled count.

Where the counts come from: a count-mode folder (`python -m harness.counts ... counts.out=<dir>`:
counts_workers.parquet per (epoch, worker), counts_epochs.parquet, meta.json; harness/counts/) or
a record's per-run workers table (totals over the measured epochs, `events` for the messages in).
What each term counts depends on the figure's measure (conf/calibration.yaml's header):

    throughput   messages = events in, candidates = candidate + snapshot checks, results,
                 updates = inserts + deletes, migration = bytes migrated in; one window (the run),
                 per measured event
    latency      messages = snapshot queries in, candidates = snapshot checks, results; one
                 window, summed over the workers, per snapshot query: a query's own counts on
                 average (its partitions reached, the objects they check, its results)
    knn_update   messages = objects in, candidates, results; per epoch, per time-stamp
    spread       as knn_update (max - min instead of max)
    insertion    messages = updates = inserts; per epoch, per time-stamp
    deletion     messages = updates = deletes; per epoch, per time-stamp

Throughput takes the run's totals per worker and the busiest worker over the run, as the
harness's own throughput does (events over the busiest worker's CPU time, ADR-0006); latency the
per-query vector (SUMMED below: every worker's snapshot work, per query); the
per-time-stamp measures take the busiest worker per epoch, the closest the count tables come to
DkM-SKS's per-time-stamp maximum (harness/measure/timestamps.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from harness.report.calibration.declaration import TERMS

PER_EPOCH = ("knn_update", "insertion", "deletion", "spread")
SUMMED = ("latency",)  # a query's own counts: every worker's, not the busiest one's
ALIASES = {"messages_in": "events"}  # count-mode column -> the workers table's name for it


@dataclass
class Block:
    """One strategy's counts for one figure: x[window, worker, term] (TERMS order), their
    standard errors, and the number of units (events, snapshot queries, time-stamps) the
    predicted busiest-worker time is divided by."""

    x: np.ndarray
    se: np.ndarray
    units: float
    source: dict  # what the counts are: the count folder's meta (sizes, sample, wall time, memory)
    summed: bool = False  # the workers' counts added (a query's own, SUMMED), not the busiest worker's


def _col(frame: pd.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray]:
    """A counter and its standard error (zeros where the table has none: an exact count)."""
    if name not in frame and ALIASES.get(name) in frame:
        name = ALIASES[name]
    if name not in frame:
        return np.zeros(len(frame)), np.zeros(len(frame))
    se = frame[f"{name}_se"].to_numpy(np.float64) if f"{name}_se" in frame else np.zeros(len(frame))
    return frame[name].to_numpy(np.float64), se


def _sum(frame, *names):
    vals = [_col(frame, n) for n in names]
    return sum(v for v, _ in vals), np.sqrt(sum(s ** 2 for _, s in vals))


def term_columns(frame: pd.DataFrame, measure: str) -> tuple[np.ndarray, np.ndarray]:
    """(counts, standard errors), each rows x TERMS, of a per-worker frame under `measure`."""
    zero = (np.zeros(len(frame)), np.zeros(len(frame)))
    if measure == "throughput" or measure == "throughput_ratio":
        cols = {"messages": _col(frame, "messages_in"), "candidates": _sum(frame, "candidates", "snapshot_checks"),
                "results": _col(frame, "results"), "updates": _sum(frame, "inserts", "deletes"),
                "migration": _col(frame, "migrated_in_bytes")}
    elif measure == "latency":
        cols = {"messages": _col(frame, "snapshots"), "candidates": _col(frame, "snapshot_checks"),
                "results": _col(frame, "results")}
    elif measure in ("knn_update", "spread"):
        cols = {"messages": _col(frame, "objects"), "candidates": _col(frame, "candidates"),
                "results": _col(frame, "results")}
    elif measure == "insertion":
        cols = {"messages": _col(frame, "inserts"), "updates": _col(frame, "inserts")}
    elif measure == "deletion":
        cols = {"messages": _col(frame, "deletes"), "updates": _col(frame, "deletes")}
    else:
        raise ValueError(f"measure={measure!r} is invalid; allowed: throughput, throughput_ratio, latency, "
                         f"{', '.join(PER_EPOCH)}")
    x = np.stack([cols.get(t, zero)[0] for t in TERMS], axis=1)
    se = np.stack([cols.get(t, zero)[1] for t in TERMS], axis=1)
    return x, se


def _windows(frame: pd.DataFrame, x: np.ndarray, se: np.ndarray, per_epoch: bool) -> tuple[np.ndarray, np.ndarray]:
    """x[window, worker, term]: the measured epochs one by one, or summed into one window (errors
    added in quadrature)."""
    epochs = frame["epoch"].to_numpy() if "epoch" in frame else np.zeros(len(frame), np.int64)
    workers = frame["worker"].to_numpy()
    e_ids, e_pos = np.unique(epochs, return_inverse=True)
    w_ids, w_pos = np.unique(workers, return_inverse=True)
    X = np.zeros((len(e_ids), len(w_ids), x.shape[1]))
    V = np.zeros_like(X)
    np.add.at(X, (e_pos, w_pos), x)
    np.add.at(V, (e_pos, w_pos), se ** 2)
    if not per_epoch:
        X, V = X.sum(axis=0, keepdims=True), V.sum(axis=0, keepdims=True)
    return X, np.sqrt(V)


def read_count_folder(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """A count-mode folder's per-(epoch, worker) and per-epoch tables and its meta."""
    folder = Path(folder)
    if not (folder / "counts_workers.parquet").is_file():
        raise FileNotFoundError(f"{folder} has no counts_workers.parquet; allowed: a folder `python -m harness.counts "
                                "... counts.out=<dir>` wrote (one per strategy label)")
    meta = json.loads((folder / "meta.json").read_text()) if (folder / "meta.json").is_file() else {}
    return (pd.read_parquet(folder / "counts_workers.parquet"), pd.read_parquet(folder / "counts_epochs.parquet"),
            meta)


def block_from_counts(workers: pd.DataFrame, epochs: pd.DataFrame, meta: dict, measure: str) -> Block:
    """A figure's Block from a count run's tables: the measured epochs (the warm-up, epoch 0, left
    out), the units from the epochs table (events, the non-object events, i.e. snapshot queries)
    or the workload (time-stamps)."""
    measured = epochs.loc[epochs["measured"].astype(bool), "epoch"]
    rows = workers[workers["epoch"].isin(measured)]
    x, se = term_columns(rows, measure)
    X, SE = _windows(rows, x, se, measure in PER_EPOCH)
    m = epochs[epochs["measured"].astype(bool)]
    if measure in ("throughput", "throughput_ratio"):
        units = float(m["events_full"].sum())
    elif measure == "latency":
        units = float((m["events_full"] - m["objects_full"]).sum())
    else:
        units = float((meta.get("workload") or {}).get("timestamps") or 0)
        if units <= 0:
            raise ValueError(f"measure={measure!r} needs a time-stamped workload (workload.timestamps > 0); the count "
                             f"run {meta.get('label', '?')} has timestamps={units}")
    return Block(X, SE, units, {k: meta.get(k) for k in ("label", "strategy", "workers", "events_full", "warmup",
                                                         "object_sample", "wall_s", "peak_rss_bytes",
                                                         "objects_measured_full")}
                 | {"workload": meta.get("workload", {})}, summed=measure in SUMMED)


def block_from_folder(folder: Path, measure: str) -> Block:
    return block_from_counts(*read_count_folder(folder), measure)


def worker_terms(workers: pd.DataFrame) -> pd.DataFrame:
    """A record's workers table (per run, per worker: totals over the measured epochs) as the
    throughput measure's term columns, with run_id."""
    x, _ = term_columns(workers, "throughput")
    out = pd.DataFrame(x, columns=list(TERMS), index=workers.index)
    out.insert(0, "run_id", workers["run_id"].to_numpy())
    return out
