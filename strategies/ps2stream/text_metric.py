"""Metric-based text partitioning, PS2Stream's best text baseline (Sec. VI-B, after [28]).

PS2Stream says only that it "uses a metric function to do the partitioning", citing S3-TM (Basik
et al., VLDB J. 2015), whose publication routing assigns words to matchers by a metric that
trades load balance against the "spread" of posts (how many matchers a post is multicast to),
modelling load on the word-to-post bipartite graph (its SALB algorithm). Its exact formula is not
in our sources, so the metric here is our decision (ADR-0028), built from
PS2Stream's own cost model (Definition 1 with every c = 1, Definition 2's objective):

- worker load L_w = sum over its terms t of (n_o(t) * n_q(t) + AND subscriptions indexed under t)
  + one per distinct sample item it receives, items being the objects and OR subscriptions,
  which `TermMapRouter` multicasts to the workers of their terms (each copy is handled once);
- greedy: terms in decreasing load order (as LPT), each to the worker w minimising
      delta(t, w) + beta * k * (the part of delta(t, w) above the balance bound C),
  delta(t, w) = work(t) + weight of t's items not yet at w (new copies). Summed over the
  placements this is sum_w L_w (total work, replication included) plus beta * k times the load
  placed above the bound: Definition 2's "minimise the sum subject to L_max/L_min <= sigma" as
  one metric; k because a unit of overload delays the whole makespan, as k units spread would;
- C = (1 + epsilon) * the level to which the load still to place would fill the workers (water
  filling), that load taken at its lower bound: the work of the unplaced terms plus one copy of
  every item no worker holds yet. (The upper bound, every item once per term, overshoots by the
  very replication the metric saves and left 10-27% imbalance on a topic sample; the lower bound
  keeps it within about epsilon at a few percent more copies.) A term heavier than any room goes
  where it overflows least; ties go to the less loaded worker.

Per term the new copies on every worker come from the term's posting list in the word-to-item
graph: total item weight minus the weight already covered by w, kept per item in a list of at
most |item| workers, so the fit is O(pins * item size + terms * k log k), linear in the sample.
Terms unseen in the sample are spread by LPT on their document frequency, as text_frequency does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from harness.core.events import AND, Events, csr_take
from strategies.base import FitContext, Router, Strategy
from strategies.load import routing_terms, sample_parts, term_loads
from strategies.routers.termmap import PartitionedTermRouter, object_terms_for
from strategies.ps2stream.textpart import (
    dedup_sets,
    sample_items,
    spread_unseen,
    water_level,
)


def term_work(sample: Events, vocab: int) -> np.ndarray:
    """Per term, the load that does not depend on replication: n_o(t) * n_q(t) matching plus one
    per AND subscription indexed under t (objects and OR subscriptions are charged per copy)."""
    objs, qs = sample_parts(sample)
    _, obj_terms = csr_take(sample.offsets, sample.values, objs)
    n_o = np.bincount(obj_terms, minlength=vocab)[:vocab].astype(np.float64)
    q_rows, q_terms = routing_terms(sample, qs)
    n_q = np.bincount(q_terms, minlength=vocab)[:vocab].astype(np.float64)
    is_and = sample.op[q_rows] == AND
    n_and = np.bincount(q_terms[is_and], minlength=vocab)[:vocab].astype(np.float64)
    return n_o * n_q + n_and


@njit(cache=True)
def greedy_metric(order, work, post_off, post_items, item_off, item_weight, k, beta, epsilon):
    """Assign terms `order[...]` one by one to the worker minimising the metric increase.

    post_off/post_items: the items holding each term (CSR by term id); item_off: per item, a slot
    range of its size where the workers it already reaches are listed. Returns the term -> worker
    map (-1 for terms not in `order`), the model loads and the number of item copies."""
    n_terms = len(post_off) - 1
    out = np.full(n_terms, -1, np.int64)
    loads = np.zeros(k, np.float64)
    covered = np.zeros(k, np.float64)
    n_at = np.zeros(len(item_off) - 1, np.int64)
    at = np.empty(item_off[-1], np.int64)
    remaining = 0.0
    for idx in range(len(order)):
        remaining += work[order[idx]]
    unreached = item_weight.sum()
    copies = 0.0
    for idx in range(len(order)):
        t = order[idx]
        cap = (1.0 + epsilon) * water_level(loads, remaining + unreached)
        remaining -= work[t]
        covered[:] = 0.0
        total = 0.0
        for j in range(post_off[t], post_off[t + 1]):
            i = post_items[j]
            total += item_weight[i]
            for s in range(item_off[i], item_off[i] + n_at[i]):
                covered[at[s]] += item_weight[i]
        best = -1
        best_cost = 0.0
        for w in range(k):
            delta = work[t] + total - covered[w]
            over = min(loads[w] + delta - cap, delta)  # the part of delta above the bound
            cost = delta + (beta * k * over if over > 0.0 else 0.0)
            if best < 0 or cost < best_cost or (cost == best_cost and loads[w] < loads[best]):
                best = w
                best_cost = cost
        out[t] = best
        copies += total - covered[best]
        loads[best] += work[t] + total - covered[best]
        for j in range(post_off[t], post_off[t + 1]):
            i = post_items[j]
            known = False
            for s in range(item_off[i], item_off[i] + n_at[i]):
                if at[s] == best:
                    known = True
                    break
            if not known:
                if n_at[i] == 0:
                    unreached -= item_weight[i]
                at[item_off[i] + n_at[i]] = best
                n_at[i] += 1
    return out, loads, copies


def metric_partition(sample: Events, n_workers: int, beta: float, epsilon: float,
                     vocab: int) -> tuple[np.ndarray, dict]:
    """term -> worker for the terms of the sample (-1 elsewhere), and a description of the fit."""
    loads = term_loads(sample, vocab)
    seen = np.flatnonzero(loads > 0)
    if len(seen) == 0:
        return np.full(vocab, -1, np.int64), {"method": "empty sample"}
    work = term_work(sample, vocab)
    off, val = sample_items(sample)
    off, val, weight = dedup_sets(off, val, np.ones(len(off) - 1))
    # word-to-item graph: the items holding each term, CSR by term id
    item_of_pin = np.repeat(np.arange(len(off) - 1, dtype=np.int64), np.diff(off))
    by_term = np.argsort(val, kind="stable")
    post_off = np.zeros(vocab + 1, np.int64)
    np.cumsum(np.bincount(val, minlength=vocab)[:vocab], out=post_off[1:])
    order = seen[np.argsort(-loads[seen], kind="stable")]
    term_worker, worker_load, copies = greedy_metric(
        order, work, post_off, item_of_pin[by_term], off, weight, int(n_workers), float(beta), float(epsilon)
    )
    return term_worker, {
        "method": "greedy metric",
        "model_load_per_worker": worker_load.tolist(),
        "sample_item_copies": float(copies),
        "sample_items": float(weight.sum()),
    }


class MetricTextStrategy(Strategy):
    name = "text_metric"
    families = frozenset({"range", "topk"})
    filters_objects = True  # object_terms="live": an object no subscription's routing term holds goes nowhere

    @dataclass
    class Params:
        beta: float = 1.0  # penalty per unit of load above the balance bound, times k workers
        epsilon: float = 0.03  # slack of the balance bound over the water level
        # "live": an object to the workers of its terms that routed a subscription before it
        # (Definition 2, ps2stream.txt l.102; H2, l.197); "all": to those of all its terms
        object_terms: str = "live"

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        term_worker, info = metric_partition(sample, n_workers, params.beta, params.epsilon, context.vocab_size)
        spread_unseen(term_worker, context.term_df, n_workers)
        return PartitionedTermRouter(n_workers, term_worker, info,
                                     object_terms_for(self.name, params.object_terms, sample, context))
