"""DSkype's keyword-based distribution (Skype/DSkype Sec. 7.3.3, Algorithm 4, Eqs. 16-17).

The vocabulary, in Skype order (increasing term frequency; here term id = frequency rank with 0 the
most frequent, so Skype order = descending term id), is cut into one run of consecutive keywords
per worker. An object goes to the workers of all its terms, a top-k subscription to the workers of
all its keywords (the mandatory keyword overlap makes that exact), a range query by the usual
AND/OR term rules: the shared TermMapRouter with a run-length term -> worker map.

Algorithm 4 bisects recursively at the keyword w minimising |C(W1) - C(W2)|, C(W) = N(W) x p(W)
(Eq. 16): N(W) = sample subscriptions (INSERT rows, any family) with at least one keyword in W,
p(W) = fraction of sample objects with at least one term in W. Decisions (spec A26, A27):
- The harness has any number of workers, the paper 2^maxdepth bolts: a node with budget n gives
  ceil(n/2) workers to its left run and floor(n/2) to its right and minimises |C1/n1 - C2/n2|
  (= |C1 - C2| / n1 when n is even), so each side's cost is proportional to its workers.
- Each side keeps at least as many keywords as workers, so every worker gets a run; only when a
  run has fewer keywords than workers do the last workers get empty runs (they receive nothing).
- Ties (e.g. a run the sample never touches, where every cut costs 0) go to the cut nearest the
  proportional width L x n1/n, then to the leftmost, so unseen terms are spread by count.
- Costs count every keyword of every subscription, as the paper's Eq. 16 (exact for top-k and OR
  range queries; an AND range query is stored under one keyword only, so it is over-counted).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core.events import Events, csr_take
from strategies.base import FitContext, Router, Strategy
from strategies.load import sample_parts
from strategies.routers.termmap import PartitionedTermRouter, object_terms_for


@dataclass
class ItemRanks:
    """(item, Skype rank) pairs of a set of sample items, sorted by rank: the pairs of a run
    [lo, hi] are one contiguous slice, so a node reads only its own pairs."""

    item: np.ndarray
    rank: np.ndarray
    n_items: int

    @classmethod
    def of(cls, ev: Events, rows: np.ndarray, vocab_size: int) -> "ItemRanks":
        offsets, terms = csr_take(ev.offsets, ev.values, rows)
        item = np.repeat(np.arange(len(rows), dtype=np.int64), np.diff(offsets))
        terms = terms.astype(np.int64)
        keep = terms < vocab_size  # a term outside the context's vocabulary has no run
        rank = vocab_size - 1 - terms[keep]
        order = np.argsort(rank, kind="stable")
        return cls(item[keep][order], rank[order], len(rows))

    def touching(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Each item with a rank in [lo, hi]: its smallest and its largest rank there."""
        a, b = np.searchsorted(self.rank, [lo, hi + 1])
        item, rank = self.item[a:b], self.rank[a:b]
        order = np.argsort(item, kind="stable")  # ranks stay ascending within an item
        item, rank = item[order], rank[order]
        new = np.ones(len(item) + 1, bool)
        new[1:-1] = item[1:] != item[:-1]
        return rank[new[:-1]], rank[new[1:]]

    def split_counts(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """For every cut j of [lo, hi] (W1 = [lo, lo + j], W2 = (lo + j, hi], j = 0..hi-lo): the
        items meeting W1 (smallest rank <= lo + j) and those meeting W2 (largest rank > lo + j)."""
        mins, maxs = self.touching(lo, hi)
        length = hi - lo + 1
        left = np.cumsum(np.bincount(mins - lo, minlength=length))
        right = len(maxs) - np.cumsum(np.bincount(maxs - lo, minlength=length))
        return left, right

    def run_counts(self, starts: np.ndarray) -> np.ndarray:
        """Items meeting each run [starts[i], starts[i + 1]) (N(W_i), or p(W_i) x |items|)."""
        run = np.searchsorted(starts, self.rank, side="right") - 1
        pairs = np.unique(self.item * len(starts) + run)
        return np.bincount(pairs % len(starts), minlength=len(starts) - 1)[: len(starts) - 1]


def run_costs(subs: ItemRanks, objs: ItemRanks, starts: np.ndarray) -> np.ndarray:
    """Eq. 16 per run: C(W_i) = N(W_i) x p(W_i)."""
    p = objs.run_counts(starts) / max(objs.n_items, 1)
    return subs.run_counts(starts) * p


def keyword_partition(subs: ItemRanks, objs: ItemRanks, vocab_size: int, n_workers: int) -> np.ndarray:
    """Algorithm 4: the run starts (length n_workers + 1, in Skype ranks; run i = [s_i, s_{i+1}))
    by recursive bisection, one node's cuts all costed at once from prefix counts: a level costs
    O(P log P + |V|) for its P (item, term) pairs, instead of one pass over the sample per cut."""
    starts = np.zeros(n_workers + 1, np.int64)
    starts[-1] = vocab_size
    m = max(objs.n_items, 1)
    stack = [(0, vocab_size - 1, n_workers, 0)]  # run [lo, hi], worker budget, first worker
    while stack:
        lo, hi, n, first = stack.pop()
        if n == 1:
            continue
        n1, n2 = (n + 1) // 2, n // 2
        length = hi - lo + 1
        if length < n:  # too few keywords for the workers: one each, the rest empty
            cut = min(n1, length)
        else:
            s_left, s_right = subs.split_counts(lo, hi)
            o_left, o_right = objs.split_counts(lo, hi)
            j = np.arange(n1 - 1, length - n2)  # W1 = [lo, lo + j] keeps >= n1 keywords, W2 >= n2
            gap = np.abs(s_left[j] * (o_left[j] / m) / n1 - s_right[j] * (o_right[j] / m) / n2)
            near = np.abs((j + 1) - length * n1 / n)
            cut = int(j[np.lexsort((j, near, gap))[0]]) + 1
        starts[first + n1] = lo + cut
        stack.append((lo, lo + cut - 1, n1, first))
        stack.append((lo + cut, hi, n2, first + n1))
    return starts


def term_worker_of(starts: np.ndarray, vocab_size: int) -> np.ndarray:
    """The worker of every term id: the run holding its Skype rank (empty runs hold none)."""
    rank = vocab_size - 1 - np.arange(vocab_size, dtype=np.int64)
    return np.searchsorted(starts, rank, side="right") - 1


def cost_variance(costs: np.ndarray) -> float:
    """Eq. 17: Var = (1/N) sum_i (C(W_i) - C_mean)^2."""
    return float(np.mean((costs - costs.mean()) ** 2)) if len(costs) else 0.0


class DSkypeKeywordStrategy(Strategy):
    name = "dskype_keyword"
    families = frozenset({"range", "topk"})

    @dataclass
    class Params:
        # "all" (the paper): a message to every bolt whose keyword run meets its terms (Sec. 7.3.3,
        # skype.txt l.616; communication cost min(|m.psi|, N_sb), l.697); "live": only those of its
        # terms that routed a subscription (PS2Stream's rule; ignored with top-k subscriptions)
        object_terms: str = "all"

    def fit(self, sample: Events, n_workers: int, params: Params, context: FitContext) -> Router:
        objs_rows, subs_rows = sample_parts(sample)
        n_workers, vocab = checked_sizes(self.name, n_workers, context)
        term_worker, info = runs_of(ItemRanks.of(sample, subs_rows, vocab), ItemRanks.of(sample, objs_rows, vocab),
                                    vocab, n_workers)
        return PartitionedTermRouter(n_workers, term_worker, info,
                                     object_terms_for(self.name, params.object_terms, sample, context))


def checked_sizes(name: str, n_workers, context: FitContext) -> tuple[int, int]:
    if int(n_workers) < 1:
        raise ValueError(f"{name}: n_workers={n_workers!r} is invalid; allowed: an integer >= 1")
    if context.vocab_size < 1:
        raise ValueError(f"{name}: context.term_df has {context.vocab_size} terms; allowed: a vocabulary of >= 1 term")
    return int(n_workers), context.vocab_size


def runs_of(subs: ItemRanks, objs: ItemRanks, vocab: int, n_workers: int) -> tuple[np.ndarray, dict]:
    """Algorithm 4's term -> worker map and what describe() reports: each run in term ids, Skype
    order ([first (rarest), last (most frequent)], [] when empty), its cost and Eq. 17's Var."""
    starts = keyword_partition(subs, objs, vocab, n_workers)
    costs = run_costs(subs, objs, starts)
    runs = [[int(vocab - 1 - a), int(vocab - b)] if b > a else [] for a, b in zip(starts[:-1], starts[1:])]
    info = {"runs": runs, "run_rank_starts": starts.tolist(), "run_cost": costs.tolist(),
            "cost_var": cost_variance(costs)}
    return term_worker_of(starts, vocab), info
