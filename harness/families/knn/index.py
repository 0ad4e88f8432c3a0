"""The kNN worker index: a uniform grid of inverted files over the subscriptions' balls, in seq order.

DkM-SKS's worker structure (Sec. 4.3: "a hybrid structure of a grid and an inverted file, because
this structure is update-friendly"), also SSTD's per-leaf CKQ grid. A subscription whose local
result A(s) is full (or whose global k-th distance came back as feedback) has a ball B(s); it is
posted in every cell the ball's bounding square overlaps, under every keyword (OR) or its least
frequent keyword (AND, the one conjunct). A subscription without a finite ball (fewer than k
results) is posted under its keywords only, in a per-term list that every object holding the term
probes. An object probes its cell's postings and the per-term lists under each of its terms.

Unlike GI2, objects are processed strictly in seq order, because every entry shrinks a ball:
o enters the local A(s) iff |A| < k or d2(o) < d2 of the k-th member (strict: the older object
stays), and the worker emits the candidate (qid, oid, seq, d2). The bound used is
min(local k-th, r_g^2), r_g^2 the global k-th distance at the epoch's start (the merger's
feedback): a worker that sees a subset of the objects has a local k-th distance >= the global
one, so every global entry is a local entry, and r_g only shrinks during the epoch, so nothing a
candidate could be is pruned (ADR-0032).

Postings of filled balls are rebuilt when the state is restored (then they are exact for the
epoch's start); a ball that shrinks during the epoch leaves stale cells that the distance test
rejects; subscriptions inserted during the epoch go to the per-term lists (linked, so inserting is
O(keywords)). The state kept across epochs: the live subscriptions and, per subscription, its local
A(s) (at most k rows) plus a row with the last global bound (`results`, see RESULT_SCHEMA).

The compiled parts live beside it: postings.py builds the postings, stream.py runs the epoch's
events through them; this module keeps the worker's state and decides when to rebuild.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from harness.core.events import AND, DELETE, INSERT, OBJECT, Events
from harness.core.grid import UniformGrid
from harness.core.timing import CompileClock
from harness.families.knn.snapshot import answer_knn
from harness.families.object_store import ObjectStore, with_snapshots
from harness.families.base import IndexContext, StateBundle, WorkerIndex, WorkerOutput
from harness.families.knn.geometry import ball_boxes
from harness.families.knn.postings import ball_postings, link_terms, subset_postings
from harness.families.knn.stream import Chunk, Postings, Results, Subscriptions, run_stream
from harness.families.knn.subsets import ball_squares, sop_subsets

# kept results: one row per member of a subscription's local A(s); a row with seq = BOUND_ROW
# carries the subscription's last global bound r_g^2 in `d2` instead
RESULT_SCHEMA = pa.schema([("qid", pa.int64()), ("oid", pa.int64()), ("seq", pa.int64()), ("d2", pa.float64())])
BOUND_ROW = -1
MAX_BALL_CELLS = 256  # a ball over more grid cells than this stays in the per-term lists
# events per call of the kernel; between calls the postings are rebuilt when the chunk spent more
# checks in the per-term lists than REPOST_MIN and than REPOST_FACTOR x the postings (a rebuild
# costs about a pass over them)
CHUNK = 4096
FIRST_CHUNK = 256
REPOST_MIN = 256
REPOST_FACTOR = 0.25
# cells_per_side=auto: sqrt(live subscriptions / AUTO_BALLS_PER_CELL) per side, within the range
AUTO_BALLS_PER_CELL = 16
AUTO_CELLS = (64, 256)
STORE_CELLS = 64  # the stored objects' grid for snapshot queries (a ring search's cells)


@dataclass
class Candidates:
    """A worker's local entries of an epoch: (qid, oid, seq) rows and their squared distances."""

    ids: np.ndarray  # (n, 3) int64
    d2: np.ndarray  # (n,) float64

    def __len__(self) -> int:
        return len(self.d2)


class KnnIndex(WorkerIndex):
    family = "knn"

    def __init__(self, context: IndexContext, cells_per_side: int | str = "auto", layout: str = "shared",
                 subsets: int = 0, skq_protocol: str = "fanout"):
        super().__init__(context)
        # two_phase: a snapshot kNN query reaching this worker is SSTD's first phase, which returns
        # its radius (`followups`) and no candidates; the second phase is `answer_followups`
        self.two_phase = skq_protocol == "two_phase"
        self._radii: list[pa.Table] = []
        self.cells_per_side = cells_per_side
        self.subsets = int(subsets)  # > 0: SOP's subsets (subsets.py) instead of the grid
        self.grid = UniformGrid.over(context.extent, self.auto_cells(0))
        self.vocab = max(int(context.vocab_size), 1)
        self.feedback: pa.Table | None = None
        # snapshot kNN queries (SSTD's SKQ) answer from the objects this worker was sent
        self.store = (ObjectStore(context.extent, STORE_CELLS, context.look_back, context.vocab_size)
                      if context.look_back > 0 else None)
        self._load(Events.empty(), None)
        self._post_balls()

    # -- state ----------------------------------------------------------------------------------

    def observe_feedback(self, table: pa.Table | None) -> None:
        """The merger's global k-th distances (qid, value = d2) of the previous epoch; applied at restore."""
        self.feedback = table

    def restore(self, state: StateBundle) -> float:
        with CompileClock() as compiling:
            t0 = time.process_time()
            self._load(state.queries, state.results)
            self._post_balls()
            seconds = time.process_time() - t0
        if self.store is not None:
            self.store.restore(state.objects)
        return max(seconds - compiling.seconds, 0.0)

    def _load(self, queries: Events, results: pa.Table | None) -> None:
        n = len(queries)
        self.queries = queries
        self.count = np.zeros(n, np.int64)
        self.rg2 = np.full(n, np.inf)
        k = np.maximum(queries.k.astype(np.int64), 1) if n else np.zeros(0, np.int64)
        self.koff = np.zeros(n + 1, np.int64)
        np.cumsum(k, out=self.koff[1:])
        size = int(self.koff[-1])
        self.top_d = np.full(size, np.inf)
        self.top_seq = np.zeros(size, np.int64)
        self.top_oid = np.zeros(size, np.int64)
        self.order = np.argsort(queries.id, kind="stable") if n else np.zeros(0, np.int64)
        if results is not None and results.num_rows and n:
            self._load_results(results)
        self.fed = np.zeros(0, np.int64)  # slots whose global bound the feedback just lowered
        if self.feedback is not None and self.feedback.num_rows and n:
            slot = self._slots(self.feedback.column("qid").to_numpy())
            ok = slot >= 0
            np.minimum.at(self.rg2, slot[ok], self.feedback.column("value").to_numpy()[ok])
            self.fed = np.unique(slot[ok])
        self.feedback = None
        self.bound = self._radius2()

    def _slots(self, qids: np.ndarray) -> np.ndarray:
        """The slot of each query id (-1: not held)."""
        ids = self.queries.id[self.order]
        at = np.minimum(np.searchsorted(ids, qids), max(len(ids) - 1, 0))
        found = (ids[at] == qids) if len(ids) else np.zeros(len(qids), bool)
        return np.where(found, self.order[at] if len(ids) else 0, -1)

    def _load_results(self, results: pa.Table) -> None:
        qid = results.column("qid").to_numpy()
        seq = results.column("seq").to_numpy()
        d2 = results.column("d2").to_numpy()
        oid = results.column("oid").to_numpy()
        slot = self._slots(qid)
        bound = (seq == BOUND_ROW) & (slot >= 0)
        self.rg2[slot[bound]] = d2[bound]
        m = np.flatnonzero((seq != BOUND_ROW) & (slot >= 0))
        m = m[np.lexsort((seq[m], d2[m], slot[m]))]  # by slot, then (d2, seq)
        s = slot[m]
        first = np.r_[0, np.flatnonzero(np.diff(s)) + 1] if len(s) else np.zeros(0, np.int64)
        rank = np.arange(len(s)) - np.repeat(first, np.diff(np.r_[first, len(s)]))
        pos = self.koff[s] + rank
        self.top_d[pos], self.top_seq[pos], self.top_oid[pos] = d2[m], seq[m], oid[m]
        np.add.at(self.count, s, 1)

    def narrowed(self) -> tuple[Events, Events] | None:
        """Subscriptions whose routing rectangle the new global bound narrows: the rectangle
        intersected with the square around the global ball (a hair wider, so rounding in a
        distance never puts a qualifying object outside it)."""
        s = self.fed[self.alive[self.fed]] if len(self.fed) else self.fed
        if len(s) == 0:
            return None
        q = self.queries
        box = ball_boxes(q, s, np.sqrt(self.rg2[s]) * (1 + 1e-9) + 1e-9)
        changed = np.zeros(len(s), bool)
        for c, v in box.items():
            changed |= v != getattr(q, c)[s]
        s = s[changed]
        if len(s) == 0:
            return None
        before = q.take(s)
        after = Events({**before.cols, **{c: v[changed] for c, v in box.items()}}, before.offsets, before.values)
        return before, after

    def apply_narrowing(self, drop: np.ndarray, narrow: np.ndarray) -> None:
        if len(drop):
            self.bound[self._slots(np.asarray(drop, np.int64))] = -np.inf
        if len(narrow):
            before, after = self.narrowed()
            slot = self._slots(np.asarray(narrow, np.int64))
            at = np.searchsorted(np.sort(before.id), narrow)
            src = np.argsort(before.id)[at]
            cols = dict(self.queries.cols)
            for c in ("xmin", "ymin", "xmax", "ymax"):
                cols[c] = cols[c].copy()
                cols[c][slot] = getattr(after, c)[src]
            self.queries = Events(cols, self.queries.offsets, self.queries.values)
        self.fed = np.zeros(0, np.int64)

    def auto_cells(self, n_live: int) -> int:
        """The grid's cells per side for n_live subscriptions: the configured number, or (auto)
        about AUTO_BALLS_PER_CELL subscriptions per cell. Most balls are far smaller than a cell
        (the k-th nearest of a dense stream), so an object's checks are the balls posted in its
        cell: a finer grid cuts them until the postings per ball grow (500k live subscriptions on
        one core: 64 cells 18.5k objects/s, 128 33.8k, 192 36.3k, 256 26.9k; ADR-0034)."""
        if self.cells_per_side != "auto":
            return int(self.cells_per_side)
        lo, hi = AUTO_CELLS
        return int(np.clip(np.sqrt(n_live / AUTO_BALLS_PER_CELL), lo, hi))

    @property
    def alive(self) -> np.ndarray:
        """Slots of subscriptions inserted and not deleted (the others' bound is -inf)."""
        return self.bound > -np.inf

    def _radius2(self) -> np.ndarray:
        """Per slot, the bound an object must be within to enter: min(local k-th, r_g^2), inf
        without either (the bound the kernel keeps current in `bound`)."""
        n = len(self.queries)
        full = self.count == np.diff(self.koff)
        kth = np.where(full, self.top_d[np.maximum(self.koff[1:] - 1, 0)] if n else 0.0, np.inf)
        return np.minimum(kth, self.rg2)

    def _post_balls(self, reserve: int = 0) -> None:
        """Postings of the live subscriptions as they stand: bounded balls in the grid, the others
        in the per-term lists (with room for `reserve` more links: insertions still to come)."""
        q = self.queries
        n = len(q)
        r2 = self.bound
        cells = self.auto_cells(int((r2 > -np.inf).sum()))
        if cells != self.grid.nx:
            self.grid = UniformGrid.over(self.context.extent, cells)
        finite = np.flatnonzero(np.isfinite(r2))
        self.sub_rect = np.zeros((0, 4))
        if self.subsets:  # SOP: bounded balls in subsets, each with its R
            squares = ball_squares(q.x[finite], q.y[finite], np.sqrt(r2[finite]))
            subset, self.sub_rect = sop_subsets(q.x[finite], q.y[finite], squares, self.context.extent, self.subsets)
            if len(self.sub_rect) == 0:  # no bounded ball yet: one subset that holds nothing
                self.sub_rect = np.array([[np.inf, np.inf, -np.inf, -np.inf]])
            self.ukeys, self.post = subset_postings(finite, subset, q.op, q.offsets, q.values, self.vocab)
            n_cells = len(self.sub_rect)
        else:
            if len(finite):  # a ball over much of the space gains little from the grid: it stays listed
                r = np.sqrt(r2[finite])
                c = self.grid.cell_ranges(q.x[finite] - r, q.y[finite] - r, q.x[finite] + r, q.y[finite] + r)
                finite = finite[(c[:, 1] - c[:, 0] + 1) * (c[:, 3] - c[:, 2] + 1) <= MAX_BALL_CELLS]
            self.ukeys, self.post = ball_postings(finite, q.x, q.y, r2, q.op, q.offsets, q.values, *self.grid.args,
                                                   self.vocab)
            n_cells = self.grid.n_cells
        self.px, self.py = q.x[self.post], q.y[self.post]
        bounds = np.arange(n_cells + 1, dtype=np.int64) * self.vocab
        self.cell_ptr = np.searchsorted(self.ukeys, bounds).astype(np.int64)
        if len(self.ukeys):
            cuts = np.r_[0, np.flatnonzero(np.diff(self.ukeys)) + 1]
            self.starts = np.r_[cuts, len(self.ukeys)].astype(np.int64)
            self.ukeys = self.ukeys[cuts]
            self.cell_ptr = np.searchsorted(self.ukeys, bounds).astype(np.int64)
        else:
            self.starts = np.zeros(1, np.int64)
        self.head = np.full(self.vocab, -1, np.int64)
        listed = np.ones(n, bool)
        listed[finite] = False
        unbounded = np.flatnonzero(listed & (r2 > -np.inf))
        n_terms = np.where(q.op == AND, 1, np.diff(q.offsets)) if n else np.zeros(0, np.int64)
        cap = int(n_terms[unbounded].sum()) + reserve + 16
        self.nxt = np.empty(cap, np.int64)
        self.link_slot = np.empty(cap, np.int64)
        self.n_links = link_terms(unbounded, q.op, q.offsets, q.values, self.head, self.nxt, self.link_slot, 0)

    # -- the epoch ------------------------------------------------------------------------------

    def process(self, ev: Events) -> WorkerOutput:
        with CompileClock() as compiling:
            answer = self._first_phase if self.two_phase else answer_knn
            out = with_snapshots(self.store, ev, self._process, answer, _joined_candidates)
        out.busy_s = max(out.busy_s - compiling.seconds, 0.0)
        out.counters["compile_s"] = compiling.seconds
        return out

    def _first_phase(self, store: ObjectStore, ev: Events, rows: np.ndarray):
        """SSTD's first SKQ phase: the local k nearest give the radius r (their k-th distance; inf
        with fewer than k) that bounds every global answer, kept for `followups`; no candidates."""
        ids, d2, work = answer_knn(store, ev, rows)
        got = np.zeros(len(rows), np.int64)
        last = np.full(len(rows), np.inf)
        if len(d2):
            order = np.argsort(ev.id[rows], kind="stable")  # each row's qid is its own
            at = order[np.searchsorted(ev.id[rows][order], ids[:, 0])]
            np.add.at(got, at, 1)
            last[at] = d2  # each query's rows are in rank order: the last written is its k-th
        full = got >= np.maximum(ev.k[rows].astype(np.int64), 1)
        self._radii.append(pa.table({"qid": ev.id[rows].astype(np.int64), "seq": ev.seq[rows].astype(np.int64),
                                     "value": np.where(full, last, np.inf)}))
        return np.zeros((0, 3), np.int64), np.zeros(0), work

    def followups(self) -> pa.Table | None:
        if not self._radii:
            return None
        out = pa.concat_tables(self._radii)
        self._radii = []
        return out

    def answer_followups(self, state: StateBundle, ev: Events) -> WorkerOutput:
        """SSTD's second SKQ phase over the objects this worker kept (`state.objects`, the store as
        the epoch left it): each query's k nearest within its first phase's radius (`ev.win` holds
        r^2), as of its own arrival."""
        t0 = time.process_time()
        store = ObjectStore(self.context.extent, STORE_CELLS, self.context.look_back, self.context.vocab_size)
        store.restore(state.objects)
        store.index(), store.by_term()  # the worker's live index in SSTD: rebuilt here, not the query's time
        t1 = time.process_time()
        with CompileClock() as compiling:
            ids, d2, work = answer_knn(store, ev, np.arange(len(ev)), r2=ev.win)
        out = WorkerOutput(Candidates(ids, d2), work, {"snapshots": len(ev), "results": len(d2),
                                                      "snapshot_checks": int(work.sum() - len(ev)),
                                                      "rebuild_s": t1 - t0})
        out.busy_s = max(time.process_time() - t1 - compiling.seconds, 0.0)
        return out

    def _grow(self, ev: Events, ins_rows: np.ndarray) -> None:
        """Slots for the epoch's insertions (appended; an id already held keeps its slot)."""
        new = ev.take(ins_rows)
        n_old = len(self.queries)
        self.queries = Events.concat([self.queries, new]) if n_old else new
        k = np.maximum(new.k.astype(np.int64), 1)
        self.koff = np.r_[self.koff, self.koff[-1] + np.cumsum(k)]
        extra = int(k.sum())
        self.top_d = np.r_[self.top_d, np.full(extra, np.inf)]
        self.top_seq = np.r_[self.top_seq, np.zeros(extra, np.int64)]
        self.top_oid = np.r_[self.top_oid, np.zeros(extra, np.int64)]
        self.bound = np.r_[self.bound, np.full(len(new), -np.inf)]  # live from their insertion's seq
        self.count = np.r_[self.count, np.zeros(len(new), np.int64)]
        self.rg2 = np.r_[self.rg2, np.full(len(new), np.inf)]
        self.order = np.argsort(self.queries.id, kind="stable")
        n_terms = np.where(new.op == AND, 1, np.diff(new.offsets))
        need = self.n_links + int(n_terms.sum())
        if need > len(self.nxt):
            self.nxt = np.r_[self.nxt, np.empty(need - len(self.nxt) + 16, np.int64)]
            self.link_slot = np.r_[self.link_slot, np.empty(need - len(self.link_slot) + 16, np.int64)]

    def _process(self, ev: Events) -> WorkerOutput:
        if len(ev.values) and (ev.values.max() >= self.vocab or ev.values.min() < 0):
            # postings are keyed cell * vocab + term: a term outside [0, vocab) would alias another cell's
            raise ValueError(f"kNN index: term ids must be in [0, {self.vocab}) (IndexContext.vocab_size); got "
                             f"{int(ev.values.min())}..{int(ev.values.max())}")
        t0 = time.process_time()
        kind = ev.kind
        ins_rows = np.flatnonzero(kind == INSERT)
        del_rows = np.flatnonzero(kind == DELETE)
        n_old = len(self.queries)
        if len(ins_rows):
            self._grow(ev, ins_rows)
        slot_of_row = np.full(len(ev), -1, np.int64)
        slot_of_row[ins_rows] = n_old + np.arange(len(ins_rows))
        orphans = 0
        if len(del_rows):
            slot = self._slots(ev.id[del_rows])
            # a deletion of an id inserted again later in the epoch names the live slot at its seq
            slot_of_row[del_rows] = slot
            orphans = int((slot < 0).sum())
        q = self.queries
        work = np.ones(len(ev), np.int64)
        subs = Subscriptions(q.x, q.y, q.k.astype(np.int64), q.op, q.offsets, q.values, q.id)
        results = Results(self.bound, np.full(len(q), -1, np.int64), self.count, self.koff, self.top_d, self.top_seq,
                          self.top_oid, self.rg2)
        n_terms = np.where(q.op == AND, 1, np.diff(q.offsets))
        parts, rebuilds, listed = [], 0, 0
        # chunks grow from FIRST_CHUNK to CHUNK events: a first rebuild comes early when the epoch
        # starts with many subscriptions in the lists (the warm-up's all are)
        cuts = [0]
        while cuts[-1] < len(ev):
            cuts.append(min(cuts[-1] + min(FIRST_CHUNK << (len(cuts) - 1), CHUNK), len(ev)))
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            # a rebuild costs about a pass over the postings: worth it once the per-term lists
            # (subscriptions without a ball, balls over most of the space, balls filled since the
            # last build) cost more than that per chunk
            if lo and listed > REPOST_MIN and listed > REPOST_FACTOR * (len(self.post) + self.n_links):
                # balls filled since the postings were built: post them in the grid, where objects
                # far away no longer meet them (the per-term lists are probed by every object)
                later = slot_of_row[lo:][kind[lo:] == INSERT]
                self._post_balls(reserve=int(n_terms[later].sum()))
                rebuilds += 1
            ev_chunk = Chunk(kind[lo:hi], ev.seq[lo:hi], ev.id[lo:hi], ev.x[lo:hi], ev.y[lo:hi],
                             ev.offsets[lo:hi + 1], ev.values, slot_of_row[lo:hi])
            posts = Postings(self.ukeys, self.cell_ptr, self.starts, self.post, self.px, self.py, self.sub_rect,
                             self.head, self.nxt, self.link_slot)
            parts.append(run_stream(ev_chunk, subs, results, posts, self.n_links, self.grid.args, self.vocab,
                                    work[lo:hi]))
            self.n_links, listed = parts[-1][2], parts[-1][3]
        ids = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, 3), np.int64)
        d2 = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
        busy = time.process_time() - t0
        obj_rows = kind == OBJECT
        counters = {
            "objects": int(obj_rows.sum()),
            "inserts": len(ins_rows),
            "deletes": len(del_rows),
            "orphan_deletes": orphans,
            "candidates": int(work[obj_rows].sum() - obj_rows.sum()),
            "results": len(ids),
            "postings": int(len(self.post) + self.n_links),
            "reposts": rebuilds,
        }
        return WorkerOutput(results=Candidates(ids, d2), work=work, counters=counters, busy_s=busy)

    def export_state(self) -> StateBundle:
        live = np.flatnonzero(self.alive)
        q = self.queries.take(live)
        c = self.count[live]
        slot = np.repeat(live, c)
        rank = np.arange(int(c.sum())) - np.repeat(np.cumsum(c) - c, c)
        pos = self.koff[slot] + rank
        bounded = live[np.isfinite(self.rg2[live])]
        results = pa.table({
            "qid": np.r_[self.queries.id[slot], self.queries.id[bounded]].astype(np.int64),
            "oid": np.r_[self.top_oid[pos], np.full(len(bounded), -1, np.int64)],
            "seq": np.r_[self.top_seq[pos], np.full(len(bounded), BOUND_ROW, np.int64)],
            "d2": np.r_[self.top_d[pos], self.rg2[bounded]],
        }, schema=RESULT_SCHEMA)
        return StateBundle(queries=q, results=results,
                           objects=self.store.objects if self.store is not None else Events.empty())

    def size_bytes(self) -> int:
        arrays = [self.bound, self.px, self.py, self.count, self.rg2, self.koff, self.top_d, self.top_seq, self.top_oid, self.ukeys,
                  self.cell_ptr, self.starts, self.post, self.head, self.nxt, self.link_slot, self.sub_rect,
                  self.queries.offsets, self.queries.values, *self.queries.cols.values()]
        stored = self.store.size_bytes() if self.store is not None else 0
        return int(sum(a.nbytes for a in arrays) + stored)


def _joined_candidates(continuous: Candidates, snapshot: tuple[np.ndarray, np.ndarray]) -> Candidates:
    """A snapshot query's local k nearest travel as candidates too: the merger takes the k best of
    each snapshot query's candidates (KnnMerger), where a subscription's are replayed."""
    ids, d2 = snapshot
    if len(d2) == 0:
        return continuous
    return Candidates(np.concatenate([continuous.ids, ids]), np.concatenate([continuous.d2, d2]))
