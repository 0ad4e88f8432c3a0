"""Load estimates from the warm-up sample, after PS2Stream's cost model.

Definition 1 charges a worker c1*|O|*|Q| + c2*|O| + c3*|Q_ins| + c4*|Q_del|; Definition 3 the cell
load n_o * n_q. With every c = 1 (ADR-0002) a region or term with n_o sample
objects and n_q sample queries costs n_o * n_q + n_o + n_q.
"""

from __future__ import annotations

import numpy as np

from harness.core.events import AND, INSERT, OBJECT, SNAPSHOT, Events, csr_take
from harness.core import kernels


def unit_load(n_o, n_q):
    return np.asarray(n_o, np.float64) * n_q + n_o + n_q


def sample_parts(sample: Events) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the sample's objects and of its queries: continuous subscriptions' insertions and
    snapshot queries, every family (the sample a strategy sees is the routing view: a family routed
    like range shows as range). A snapshot query's region costs like a subscription's there."""
    return np.flatnonzero(sample.kind == OBJECT), np.flatnonzero((sample.kind == INSERT) | (sample.kind == SNAPSHOT))


def routing_terms(ev: Events, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, term) pairs a text router indexes a query under: the least frequent keyword of an
    AND query (its one conjunct), every keyword of an OR query (one conjunct each); a query without
    keywords (top-k terms) has none."""
    rows = np.asarray(rows, np.int64)
    rows = rows[ev.offsets[rows + 1] > ev.offsets[rows]]
    is_and = ev.op[rows] == AND
    and_rows = rows[is_and]
    or_rows = rows[~is_and]
    or_offsets, or_terms = csr_take(ev.offsets, ev.values, or_rows)
    return (
        np.concatenate([and_rows, np.repeat(or_rows, np.diff(or_offsets))]),
        np.concatenate([kernels.last_terms(and_rows, ev.offsets, ev.values), or_terms.astype(np.int64)]),
    )


def term_loads(sample: Events, vocab_size: int) -> np.ndarray:
    """Per term: objects of the sample containing it times queries indexed under it, plus both."""
    objs, qs = sample_parts(sample)
    _, obj_terms = csr_take(sample.offsets, sample.values, objs)
    f_o = np.bincount(obj_terms, minlength=vocab_size)[:vocab_size]
    _, q_terms = routing_terms(sample, qs)
    f_q = np.bincount(q_terms, minlength=vocab_size)[:vocab_size]
    return unit_load(f_o, f_q)


def locations(ev: Events, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A subscription's location s.p: its point, or its rectangle's centre when it has none."""
    x, y = ev.x[rows], ev.y[rows]
    cx = np.where(np.isfinite(x), x, (ev.xmin[rows] + ev.xmax[rows]) / 2.0)
    cy = np.where(np.isfinite(y), y, (ev.ymin[rows] + ev.ymax[rows]) / 2.0)
    return cx, cy
