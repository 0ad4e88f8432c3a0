"""The top-k worker index: Skype's subscriber side on the messages this worker receives.

A worker holds its subscriptions (location, keywords, k, alpha) and its local window: every message
routed to it that has not expired. A message's expiry is a seq carried by the stream (the object's
`win` column: the seq of the |W|-th message after it, datasets/workloads/topk.py), so a worker
expires its messages at the right moment whether or not it receives the message that pushes them
out. Per subscription it keeps the local top-k: the k best messages of its local window that share
a keyword with it, in the order (score desc, seq desc), the newer message winning a tie (Skype
Sec. 5.1: "kScore(s) <= Score(s, m)").

The local top-k is the head of Skype's result buffer, a partial k-skyband (skyband.py). Events run
in seq order, an expiry at seq t together with the event at t (Skype's Fig. 1: e5 arrives as e1
expires): expiring messages leave the buffers whose oldest member they are, the arriving message
enters the buffers of the subscriptions it can reach, buffers left with fewer than k members are
re-evaluated against the local window (the arrival included), and a new subscription is
initialised against the window at its insertion (Skype Sec. 4). The worker emits every change of a
local top-k as rows (qid, trigger seq, message seq, oid, score, +1 enter / -1 leave); the merger
(merge.py) turns the replicas' local lists into the global entries.

An arrival reads each of its terms' subscription blocks (subscription_index.py): a block whose
cell, alphas and largest weights cannot reach its smallest theta is skipped whole (Thm 5.3); the
others are read, sorted by the message weight a subscription needs through that term (Thm 5.1 as a
sort key, Thm 5.4's early stop), only as far as the message's largest weight from that term on
reaches (Def. 5's refined prefix); each subscription read is bounded by the common keyword's
product plus Eq. 5 over the rest (Thm 5.2) and by its exact spatial similarity. That is IGPT, the
default `method`; Skype's baselines are selectable (skype.txt l.729-737): ipt reads every block
whole with the same individual bounds (l.761), ciq finds the candidates in CIQ's inverted files
over covering cells (ciq.py, l.64). Registration and
re-evaluation search the window's message index, built once per epoch (message_index.py;
ADR-0046).

The compiled epoch is split by job: epoch.py runs the loop over seqs, one phase per kernel;
arrival.py an arrival's candidates and entries; reevaluation.py expiries and refills; buffers.py
the arena of buffers, their oldest-member lists, snapshots and change rows; bounds.py Skype's text
bounds; state.py the named tuples the kernels take. This module builds their inputs from the
worker's state and keeps that state between epochs.
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from harness.core.events import DELETE, INSERT, OBJECT, TOPK, Events
from harness.families.base import NEVER, IndexContext, StateBundle, WorkerIndex, WorkerOutput, deletion_seqs
from harness.families.topk.arrival import CIQ, METHODS
from harness.families.topk.bounds import rest_max, suffix_weights, text_floors
from harness.families.topk.buffers import RESULT_SCHEMA, buffer_oldest, kept_rows, restored_arena, top_rows
from harness.families.topk.ciq import ciq_index
from harness.families.topk.epoch import run_events, thresholds
from harness.families.topk.message_index import message_grid, search_scratch
from harness.families.topk.scoring import normalised_weights, weights_and_norms
from harness.families.topk.skyband import CSKYBAND, DEPTH, KMAX, PAIR_COST, RATIO
from harness.families.topk.state import Arena, Buffers, Policy, Stream, Subscriptions, Window
from harness.families.topk.subscription_index import subscription_blocks

# what a worker sends its merger: one row per change of a local top-k
CHANGE_FIELDS = ("qid", "trigger", "mseq", "oid", "score", "delta")


def expiry_seqs(win: np.ndarray) -> np.ndarray:
    """The objects' `win` column as int64 expiry seqs (NaN: never within the stream)."""
    out = np.full(len(win), NEVER, np.int64)
    ok = np.isfinite(win)
    out[ok] = win[ok].astype(np.int64)
    return out


class TopkIndex(WorkerIndex):
    """Subscriptions, the local window and each subscription's buffer (module docstring)."""

    family = "topk"

    def __init__(self, context: IndexContext, reevaluation: str = "cskyband", skyband_ratio: float = 0.95,
                 kmax: int = 60, pair_cost: float = PAIR_COST, method: str = "igpt", **params):
        super().__init__(context)
        if context.term_weight is None:
            raise ValueError("the top-k index scores with the stream's term weights; build it through "
                             "family_setup(..., events=stream) so the family can derive them")
        self.idf = np.asarray(context.term_weight, np.float64)
        self.max_dist = float(context.max_dist) or 1.0
        self.mode = {"cskyband": CSKYBAND, "skyband": RATIO, "recompute": RATIO, "kmax": KMAX}[reevaluation]
        self.kmax = int(kmax)
        self.method = METHODS[method]  # how an arrival finds its candidates (family.Params.method)
        self.pair_cost = float(pair_cost)
        self.ratio = 1.0 if reevaluation == "recompute" else float(skyband_ratio)
        self.span: tuple[int, int] | None = None
        self.horizon: int | None = None
        self.fed = False  # the merger's thresholds arrived: the router may have narrowed routes
        self.leaving = RESULT_SCHEMA.empty_table()  # local top-k members of replicas dropped before the epoch
        self.subs = Events.empty()
        self.window = Events.empty()
        self.buffers = RESULT_SCHEMA.empty_table()

    def begin_epoch(self, lo: int, hi: int, horizon: int | None = None) -> None:
        self.span = (int(lo), int(hi))
        self.horizon = horizon

    def observe_feedback(self, table: pa.Table) -> None:
        """The thresholds themselves are the router's business; they only mean routes may narrow."""
        self.fed = True

    def narrowed(self) -> tuple[Events, Events] | None:
        """Every stored subscription, unchanged: routed again with the epoch's router (whose
        thresholds the feedback moved), a worker no longer on its route drops its replica."""
        return (self.subs, self.subs) if self.fed and len(self.subs) else None

    def apply_narrowing(self, drop: np.ndarray, narrow: np.ndarray) -> None:
        """Drop the replicas of `drop`; their top-k members leave the merger's union at the epoch's
        start (they cannot change the global top-k: the route kept covers it)."""
        if len(drop) == 0:
            return
        gone = np.isin(self.buffers.column("qid").to_numpy(), drop)
        self.leaving = top_rows(self.buffers.filter(pa.array(gone)), self.subs)
        self.buffers = self.buffers.filter(pa.array(~gone))
        self.subs = self.subs.take(np.flatnonzero(~np.isin(self.subs.id, drop)))

    def restore(self, state: StateBundle) -> float:
        t0 = time.process_time()
        self.subs, self.window = state.queries, state.objects
        self.buffers = state.results if state.results is not None else RESULT_SCHEMA.empty_table()
        return time.process_time() - t0

    def process(self, events: Events) -> WorkerOutput:
        t0, wall0 = time.process_time(), time.perf_counter()
        lo, hi = self.span if self.span is not None else (
            int(events.seq[0]) if len(events) else 0, int(events.seq[-1]) + 1 if len(events) else 0)
        is_obj = events.kind == OBJECT
        ins = np.flatnonzero((events.kind == INSERT) & (events.family == TOPK))
        # a subscription re-sent from before the epoch is a replica the route gained (none if held)
        held = (events.seq[ins] < lo) & np.isin(events.id[ins], self.subs.id)
        ignored, ins = ins[held], ins[~held]
        msgs = Events.concat([self.window, events.take(np.flatnonzero(is_obj))])
        subs = Events.concat([self.subs, events.take(ins)])
        s_del, orphans = deletion_seqs(subs.id, events.take(np.flatnonzero(events.kind == DELETE)))
        s_ins = np.concatenate([np.full(len(self.subs), -1, np.int64), np.maximum(events.seq[ins], lo - 1)])
        win, sb, bufs, arena, (grid, scratch, sub_index, ciq) = self._epoch_state(msgs, subs, s_ins, s_del)
        stream, keep_ev = self._stream(events, lo, hi, is_obj, ins, ignored, subs, win.exp)
        work_kept = np.zeros(int(keep_ev.sum()), np.int64)
        (changes, n_out, arena, _, reevals, scored, offered, pruned, skipped, arrival_ns, expiry_ns) = run_events(
            stream, len(self.window), win, grid, scratch, sb, sub_index, ciq, bufs, arena, int(bufs.cap.sum()),
            Policy(self.mode, self.ratio, self.kmax, self.pair_cost, self.max_dist, self.method), work_kept)
        work = np.zeros(len(events), np.int64)
        work[keep_ev] = work_kept
        o_slot, o_msg, o_delta = changes.slot[:n_out], changes.msg[:n_out], changes.delta[:n_out]
        parts = [self._leaving_rows(lo), {"qid": subs.id[o_slot], "trigger": changes.trig[:n_out],
                                          "mseq": win.seq[o_msg], "oid": msgs.id[o_msg],
                                          "score": changes.score[:n_out], "delta": o_delta}]
        live = s_del == NEVER
        if self.horizon is not None:  # thresholds for the router: valid until the next epoch's end
            slots = np.flatnonzero(live)
            th, sc_n = thresholds(slots, hi - 1, self.horizon, win, grid, scratch, sb, bufs, arena, self.max_dist)
            scored += sc_n
            n = len(slots)
            parts.append({"qid": subs.id[slots], "trigger": np.full(n, hi - 1, np.int64), "mseq": np.full(n, -1),
                          "oid": np.full(n, -1), "score": th, "delta": np.zeros(n, np.int8)})
        self.subs = subs.take(np.flatnonzero(live))
        self.window = msgs.take(np.flatnonzero(win.exp >= hi))
        self.buffers = self._kept(subs, live, bufs, arena, win.seq)
        counters = {"objects": int(is_obj.sum()), "inserts": int((events.seq[ins] >= lo).sum()),
                    "deletes": int((events.kind == DELETE).sum()), "orphan_deletes": orphans,
                    "candidates": int(scored), "results": int((o_delta > 0).sum()), "reevaluations": int(reevals),
                    "window": len(self.window), "arrival_pairs": int(offered), "pruned_pairs": int(pruned),
                    "skipped_blocks": int(skipped), "expiries": len(stream.exp_seq), "arrival_s": arrival_ns / 1e9,
                    "expiry_s": expiry_ns / 1e9, "buffered": int(bufs.size[live].sum()),
                    "index_wall_s": time.perf_counter() - wall0}
        changes = {c: np.concatenate([np.asarray(p[c]) for p in parts]) for c in CHANGE_FIELDS}
        return WorkerOutput(changes, work, counters, time.process_time() - t0)

    def _epoch_state(self, msgs: Events, subs: Events, s_ins: np.ndarray, s_del: np.ndarray):
        """The epoch's kernel inputs (state.py): the window with its weights and expiries, the
        subscriptions with theirs, the restored buffers and their arena, and the two indexes (the
        window's message index with its search space, the subscriptions' blocks)."""
        n_terms = max(len(self.idf), int(msgs.values.max(initial=-1)) + 1, int(subs.values.max(initial=-1)) + 1)
        idf = self.idf if len(self.idf) == n_terms else np.concatenate(
            [self.idf, np.ones(n_terms - len(self.idf))])
        m_w, m_norm = weights_and_norms(msgs.offsets, msgs.values, idf)
        s_w = normalised_weights(subs.offsets, subs.values, idf)
        s_k = np.maximum(subs.k.astype(np.int64), 0)
        s_alpha = subs.alpha.astype(np.float64)
        b_off, b_cap, b_len, theta, a_msg, a_score, a_dom = self._arena(subs, s_k, msgs.seq)
        b_old = buffer_oldest(b_off, b_len, a_msg)
        grid = message_grid(msgs.x, msgs.y, msgs.offsets, msgs.values, m_w, n_terms, norms=m_norm)
        scratch = search_scratch(grid, int(np.diff(subs.offsets).max(initial=0)))
        lam = text_floors(theta, s_alpha)
        s_wsum = suffix_weights(subs.offsets, s_w)
        s_rmax = rest_max(subs.offsets, s_w)
        sub_index = subscription_blocks(subs.x, subs.y, subs.offsets, subs.values, s_w, s_wsum, s_rmax, theta, lam,
                                        s_alpha, n_terms)
        # CIQ's inverted files only when it is the method (an empty one otherwise: the loop takes both)
        ciq = ciq_index(subs.x, subs.y, subs.offsets, subs.values, s_w, self.max_dist, n_terms,
                        int(np.diff(msgs.offsets).max(initial=0))) if self.method == CIQ else ciq_index(
            subs.x[:0], subs.y[:0], subs.offsets[:1], subs.values[:0], s_w[:0], self.max_dist, n_terms, 1)
        win = Window(msgs.seq, expiry_seqs(msgs.win), msgs.x, msgs.y, msgs.offsets, msgs.values, m_w)
        sb = Subscriptions(s_ins, s_del, subs.x, subs.y, s_k, s_alpha, subs.offsets, subs.values, s_w, s_wsum, s_rmax)
        return (win, sb, Buffers(b_off, b_cap, b_len, b_old, theta, lam), Arena(a_msg, a_score, a_dom),
                (grid, scratch, sub_index, ciq))

    def _stream(self, events: Events, lo: int, hi: int, is_obj: np.ndarray, ins: np.ndarray, ignored: np.ndarray,
                subs: Events, m_exp: np.ndarray) -> tuple[Stream, np.ndarray]:
        """The epoch's events as the kernel runs them (state.Stream: objects by message index,
        insertions and deletions by slot, a new replica from the window as the epoch starts) and the
        expiries before `hi` in seq order; with the mask of the events kept (an ignored re-sent
        replica, a deletion of a query not held: none)."""
        ref = np.full(len(events), -1, np.int64)
        ref[is_obj] = len(self.window) + np.arange(int(is_obj.sum()))
        ref[ins] = len(self.subs) + np.arange(len(ins))
        dels = np.flatnonzero(events.kind == DELETE)
        if len(dels) and len(subs):
            order = np.argsort(subs.id, kind="stable")
            at = np.minimum(np.searchsorted(subs.id[order], events.id[dels]), len(subs) - 1)
            found = subs.id[order][at] == events.id[dels]
            ref[dels[found]] = order[at[found]]
        ev_kind = np.where(is_obj, 0, np.where(events.kind == INSERT, 1, 2)).astype(np.int8)
        ev_seq = events.seq.copy()
        early = np.flatnonzero((events.kind == INSERT) & (events.seq < lo))
        ev_kind[early], ev_seq[early] = 3, lo - 1  # a new replica starts from the window as the epoch starts
        ref[ignored] = -1
        keep = ref >= 0
        exp_rows = np.flatnonzero(m_exp < hi)
        exp_rows = exp_rows[np.argsort(m_exp[exp_rows], kind="stable")]
        return Stream(ev_seq[keep], ev_kind[keep], ref[keep], m_exp[exp_rows], exp_rows), keep

    def _arena(self, subs: Events, s_k: np.ndarray, m_seq: np.ndarray):
        """The restored buffers in one arena: each subscription a region of twice its size (at
        least 2k), members in rank order; theta from its header row. New subscriptions get their
        region at their first re-evaluation."""
        t = self.buffers
        return restored_arena(t.column("qid").to_numpy(), t.column("mseq").to_numpy(), t.column("score").to_numpy(),
                              t.column("dom").to_numpy(), subs.id, s_k, m_seq, DEPTH)

    @staticmethod
    def _kept(subs: Events, live: np.ndarray, bufs: Buffers, arena: Arena, m_seq: np.ndarray) -> pa.Table:
        """Each live subscription's header row (theta) and buffer, by query, in rank order."""
        qid, mseq, score, dom = kept_rows(np.flatnonzero(live), subs.id, bufs, arena, m_seq)
        return pa.table({"qid": qid, "mseq": mseq, "score": score, "dom": dom}, schema=RESULT_SCHEMA)

    def _leaving_rows(self, lo: int) -> dict:
        """The dropped replicas' top-k members as leave rows just before the epoch (apply_narrowing)."""
        t, self.leaving = self.leaving, RESULT_SCHEMA.empty_table()
        n = t.num_rows
        return {"qid": t.column("qid").to_numpy(), "trigger": np.full(n, lo - 1, np.int64),
                "mseq": t.column("mseq").to_numpy(), "oid": np.full(n, -1, np.int64),
                "score": t.column("score").to_numpy(), "delta": np.full(n, -1, np.int8)}

    def kth_scores(self) -> np.ndarray:
        """Each held subscription's k-th score now (0 with fewer than k), in `self.subs` order."""
        tops = top_rows(self.buffers, self.subs)
        qid, score = tops.column("qid").to_numpy(), tops.column("score").to_numpy()
        ids, first, count = np.unique(qid, return_index=True, return_counts=True)  # by query, best first
        out = np.zeros(len(self.subs))
        if len(ids):
            at = np.minimum(np.searchsorted(ids, self.subs.id), len(ids) - 1)
            full = (ids[at] == self.subs.id) & (count[at] >= self.subs.k)
            out[full] = score[first[at] + count[at] - 1][full]
        return out

    def export_state(self) -> StateBundle:
        return StateBundle(queries=self.subs, objects=self.window, results=self.buffers)

    def size_bytes(self) -> int:
        return int(sum(a.nbytes for e in (self.subs, self.window) for a in (*e.cols.values(), e.offsets, e.values))
                   + self.buffers.nbytes)


