"""The top-k worker index: Skype's subscriber side on the messages this worker receives.

A worker holds its subscriptions (location, keywords, k, alpha) and its local window: every message
routed to it that has not expired. A message's expiry is a seq carried by the stream (the object's
`win` column: the seq of the |W|-th message after it, datasets/workloads/topk.py), so a worker
expires its messages at the right moment whether or not it receives the message that pushes them
out. Per subscription it keeps the local top-k: the k best messages of its local window that share
a keyword with it, in the order (score desc, seq desc), the newer message winning a tie (Skype
Sec. 5.1: "kScore(s) <= Score(s, m)").

Events run in seq order, an expiry at seq t together with the event at t (Skype's Fig. 1: e5
arrives as e1 expires): first the subscriptions losing a top-k member are marked, then the
arriving message is offered to the other subscriptions sharing one of its terms (an insertion into
the top-k), then each marked subscription is re-evaluated against the local window (its top-k
recomputed, the arrival included); a new subscription is initialised against the window at its
insertion (Skype Sec. 4). The worker emits every change of a local top-k as rows (qid, trigger
seq, message seq, oid, score, +1 enter / -1 leave); the merger (merge.py) turns the replicas'
local lists into the global entries.

Pruning is by the postings only (a message meets the subscriptions indexed under its terms); the
re-evaluation scans the window's postings of the subscription's terms. Skype's bounds (IGPT) and
its k-skyband buffer make both cheaper and are a later step (docs/decisions.md).
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
from numba import njit

from harness.core.events import DELETE, INSERT, OBJECT, TOPK, Events
from harness.families.base import NEVER, IndexContext, StateBundle, WorkerIndex, WorkerOutput, deletion_seqs
from harness.families.topk.scoring import normalised_weights, pair_score

# a subscription's local top-k between epochs: one row per member
RESULT_SCHEMA = pa.schema([("qid", pa.int64()), ("mseq", pa.int64()), ("score", pa.float64())])
# what a worker sends its merger: one row per change of a local top-k
CHANGE_FIELDS = ("qid", "trigger", "mseq", "oid", "score", "delta")


def expiry_seqs(win: np.ndarray) -> np.ndarray:
    """The objects' `win` column as int64 expiry seqs (NaN: never within the stream)."""
    out = np.full(len(win), NEVER, np.int64)
    ok = np.isfinite(win)
    out[ok] = win[ok].astype(np.int64)
    return out


def postings(offsets: np.ndarray, values: np.ndarray, n_terms: int) -> tuple[np.ndarray, np.ndarray]:
    """Term -> rows (ascending) as CSR over the term ids."""
    owner = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
    order = np.argsort(values, kind="stable")
    post_off = np.zeros(n_terms + 1, np.int64)
    np.cumsum(np.bincount(values, minlength=n_terms), out=post_off[1:])
    return post_off, owner[order]


@njit(cache=True, inline="always")
def _better(score_a, seq_a, score_b, seq_b):
    return score_a > score_b or (score_a == score_b and seq_a > seq_b)


@njit(cache=True)
def _grow(a, need):
    b = np.empty(max(2 * len(a), need, 16), a.dtype)
    b[: len(a)] = a
    return b


@njit(cache=True)
def _local_topk(s, t, inclusive, min_exp, buf_msg, buf_score, m_seen, stamp, m_seq, m_exp, m_x, m_y, m_off, m_val,
                m_w, m_post_off, m_post, s_x, s_y, s_k, s_alpha, s_off, s_val, s_w, max_dist):
    """The k best window messages at time t sharing a keyword with subscription s (arrived before t,
    or at t too when `inclusive`; not expired at t, nor before `min_exp`) into buf_*, best first;
    returns (count, scored)."""
    k = s_k[s]
    cnt = 0
    scored = 0
    if k < 1:
        return 0, 0
    for j in range(s_off[s], s_off[s + 1]):
        term = s_val[j]
        for p in range(m_post_off[term], m_post_off[term + 1]):
            m = m_post[p]
            if m_seen[m] == stamp:
                continue
            m_seen[m] = stamp
            if m_seq[m] > t or (m_seq[m] == t and not inclusive) or m_exp[m] <= t or m_exp[m] < min_exp:
                continue
            sc = pair_score(s_x[s], s_y[s], s_alpha[s], s_val, s_w, s_off[s], s_off[s + 1],
                            m_x[m], m_y[m], m_val, m_w, m_off[m], m_off[m + 1], max_dist)
            scored += 1
            if cnt == k and not _better(sc, m_seq[m], buf_score[k - 1], m_seq[buf_msg[k - 1]]):
                continue
            pos = cnt if cnt < k else k - 1
            while pos > 0 and _better(sc, m_seq[m], buf_score[pos - 1], m_seq[buf_msg[pos - 1]]):
                buf_msg[pos] = buf_msg[pos - 1]
                buf_score[pos] = buf_score[pos - 1]
                pos -= 1
            buf_msg[pos] = m
            buf_score[pos] = sc
            if cnt < k:
                cnt += 1
    return cnt, scored


@njit(cache=True)
def run_events(ev_seq, ev_kind, ev_ref, exp_seq, exp_msg,
               m_seq, m_exp, m_x, m_y, m_off, m_val, m_w, m_post_off, m_post,
               s_ins, s_del, s_x, s_y, s_k, s_alpha, s_off, s_val, s_w, s_post_off, s_post,
               t_off, t_msg, t_score, t_cnt, max_dist, work):
    """The epoch's events and expiries in seq order (module docstring). ev_ref: the message index of
    an object, the subscription slot of an insert or delete. Returns the change rows (slot,
    trigger, message, score, delta), their count, the re-evaluations and the pairs scored."""
    n_ev, n_exp = len(ev_seq), len(exp_seq)
    n_sub, n_msg = len(s_k), len(m_seq)
    cap = 1024
    o_slot = np.empty(cap, np.int64)
    o_trig = np.empty(cap, np.int64)
    o_msg = np.empty(cap, np.int64)
    o_score = np.empty(cap, np.float64)
    o_delta = np.empty(cap, np.int8)
    n_out = 0
    s_seen = np.full(n_sub, -1, np.int64)
    s_dirty = np.full(n_sub, -1, np.int64)
    m_seen = np.full(n_msg, -1, np.int64)
    dirty = np.empty(max(n_sub, 1), np.int64)
    kmax = 1
    for s in range(n_sub):
        kmax = max(kmax, s_k[s])
    buf_msg = np.empty(kmax, np.int64)
    buf_score = np.empty(kmax, np.float64)
    stamp = 0
    reevals = 0
    scored_total = 0
    i, j = 0, 0
    while i < n_ev or j < n_exp:
        t = ev_seq[i] if i < n_ev else NEVER
        if j < n_exp and exp_seq[j] < t:
            t = exp_seq[j]
        at = i if i < n_ev else n_ev - 1  # the event the work is charged to
        scored = 0
        n_dirty = 0
        # (a) expiries at t: the subscriptions holding an expiring message must be re-evaluated
        while j < n_exp and exp_seq[j] == t:
            e = exp_msg[j]
            j += 1
            stamp += 1
            for q in range(m_off[e], m_off[e + 1]):
                term = m_val[q]
                for p in range(s_post_off[term], s_post_off[term + 1]):
                    s = s_post[p]
                    if s_seen[s] == stamp or s_dirty[s] == t:
                        continue
                    s_seen[s] = stamp
                    if not (s_ins[s] < t < s_del[s]):
                        continue
                    for r in range(t_off[s], t_off[s] + t_cnt[s]):
                        if t_msg[r] == e:
                            s_dirty[s] = t
                            dirty[n_dirty] = s
                            n_dirty += 1
                            break
        # (b) the event at t
        if i < n_ev and ev_seq[i] == t:
            kind = ev_kind[i]
            ref = ev_ref[i]
            if kind == 0:  # an object: offered to the subscriptions indexed under its terms
                m = ref
                stamp += 1
                for q in range(m_off[m], m_off[m + 1]):
                    term = m_val[q]
                    for p in range(s_post_off[term], s_post_off[term + 1]):
                        s = s_post[p]
                        if s_seen[s] == stamp:
                            continue
                        s_seen[s] = stamp
                        if s_dirty[s] == t or not (s_ins[s] < t < s_del[s]):
                            continue
                        sc = pair_score(s_x[s], s_y[s], s_alpha[s], s_val, s_w, s_off[s], s_off[s + 1],
                                        m_x[m], m_y[m], m_val, m_w, m_off[m], m_off[m + 1], max_dist)
                        scored += 1
                        k = s_k[s]
                        base = t_off[s]
                        c = t_cnt[s]
                        if k < 1 or c == k and not _better(sc, m_seq[m], t_score[base + k - 1], m_seq[t_msg[base + k - 1]]):
                            continue
                        if n_out + 2 > len(o_slot):
                            o_slot, o_trig, o_msg = _grow(o_slot, n_out + 2), _grow(o_trig, n_out + 2), \
                                _grow(o_msg, n_out + 2)
                            o_score, o_delta = _grow(o_score, n_out + 2), _grow(o_delta, n_out + 2)
                        if c == k:  # the k-th member leaves
                            o_slot[n_out], o_trig[n_out], o_msg[n_out] = s, t, t_msg[base + k - 1]
                            o_score[n_out], o_delta[n_out] = t_score[base + k - 1], -1
                            n_out += 1
                        pos = c if c < k else k - 1
                        while pos > 0 and _better(sc, m_seq[m], t_score[base + pos - 1], m_seq[t_msg[base + pos - 1]]):
                            t_msg[base + pos] = t_msg[base + pos - 1]
                            t_score[base + pos] = t_score[base + pos - 1]
                            pos -= 1
                        t_msg[base + pos] = m
                        t_score[base + pos] = sc
                        if c < k:
                            t_cnt[s] = c + 1
                        o_slot[n_out], o_trig[n_out], o_msg[n_out], o_score[n_out], o_delta[n_out] = s, t, m, sc, 1
                        n_out += 1
            elif kind == 1 or kind == 3:  # an insertion (3: a replica the route gained): from the window
                s = ref
                stamp += 1
                cnt, sc_n = _local_topk(s, t, kind == 3, 0, buf_msg, buf_score, m_seen, stamp, m_seq, m_exp, m_x, m_y,
                                        m_off, m_val, m_w, m_post_off, m_post, s_x, s_y, s_k, s_alpha, s_off, s_val,
                                        s_w, max_dist)
                scored += sc_n
                if n_out + cnt > len(o_slot):
                    o_slot, o_trig, o_msg = _grow(o_slot, n_out + cnt), _grow(o_trig, n_out + cnt), \
                        _grow(o_msg, n_out + cnt)
                    o_score, o_delta = _grow(o_score, n_out + cnt), _grow(o_delta, n_out + cnt)
                for r in range(cnt):
                    t_msg[t_off[s] + r] = buf_msg[r]
                    t_score[t_off[s] + r] = buf_score[r]
                    o_slot[n_out], o_trig[n_out], o_msg[n_out], o_score[n_out], o_delta[n_out] = \
                        s, t, buf_msg[r], buf_score[r], 1
                    n_out += 1
                t_cnt[s] = cnt
            else:  # a deletion: its replicas go quietly (the merger drops the query at its delete)
                t_cnt[ref] = 0
            i += 1
        # (c) re-evaluate the subscriptions that lost a member, the arrival at t included
        for d in range(n_dirty):
            s = dirty[d]
            reevals += 1
            stamp += 1
            cnt, sc_n = _local_topk(s, t, True, 0, buf_msg, buf_score, m_seen, stamp, m_seq, m_exp, m_x, m_y,
                                    m_off, m_val, m_w, m_post_off, m_post, s_x, s_y, s_k, s_alpha, s_off, s_val,
                                    s_w, max_dist)
            scored += sc_n
            base = t_off[s]
            old = t_cnt[s]
            need = n_out + old + cnt
            if need > len(o_slot):
                o_slot, o_trig, o_msg = _grow(o_slot, need), _grow(o_trig, need), _grow(o_msg, need)
                o_score, o_delta = _grow(o_score, need), _grow(o_delta, need)
            for r in range(old):  # members that left
                keep = False
                for u in range(cnt):
                    if buf_msg[u] == t_msg[base + r]:
                        keep = True
                        break
                if not keep:
                    o_slot[n_out], o_trig[n_out], o_msg[n_out] = s, t, t_msg[base + r]
                    o_score[n_out], o_delta[n_out] = t_score[base + r], -1
                    n_out += 1
            for u in range(cnt):  # members that entered
                new = True
                for r in range(old):
                    if buf_msg[u] == t_msg[base + r]:
                        new = False
                        break
                if new:
                    o_slot[n_out], o_trig[n_out], o_msg[n_out], o_score[n_out], o_delta[n_out] = \
                        s, t, buf_msg[u], buf_score[u], 1
                    n_out += 1
            for u in range(cnt):
                t_msg[base + u] = buf_msg[u]
                t_score[base + u] = buf_score[u]
            t_cnt[s] = cnt
        if at >= 0:
            work[at] += 1 + scored
        scored_total += scored
    return o_slot, o_trig, o_msg, o_score, o_delta, n_out, reevals, scored_total


@njit(cache=True)
def thresholds(slots, t, horizon, m_seq, m_exp, m_x, m_y, m_off, m_val, m_w, m_post_off, m_post, s_x, s_y, s_k,
               s_alpha, s_off, s_val, s_w, max_dist):
    """Per subscription slot: the k-th best score among the window messages at t (the epoch's last
    seq) sharing a keyword with it that stay until `horizon` (0 when fewer than k), and the pairs scored."""
    kmax = 1
    for s in slots:
        kmax = max(kmax, s_k[s])
    buf_msg = np.empty(kmax, np.int64)
    buf_score = np.empty(kmax, np.float64)
    m_seen = np.full(len(m_seq), -1, np.int64)
    out = np.zeros(len(slots))
    scored = 0
    for i in range(len(slots)):
        s = slots[i]
        cnt, sc_n = _local_topk(s, t, True, horizon, buf_msg, buf_score, m_seen, i, m_seq, m_exp, m_x, m_y, m_off,
                                m_val, m_w, m_post_off, m_post, s_x, s_y, s_k, s_alpha, s_off, s_val, s_w, max_dist)
        scored += sc_n
        if cnt == s_k[s] and cnt > 0:
            out[i] = buf_score[cnt - 1]
    return out, scored


class TopkIndex(WorkerIndex):
    """Subscriptions, the local window and each subscription's local top-k (module docstring)."""

    family = "topk"

    def __init__(self, context: IndexContext, **params):
        super().__init__(context)
        if context.term_weight is None:
            raise ValueError("the top-k index scores with the stream's term weights; build it through "
                             "family_setup(..., events=stream) so the family can derive them")
        self.idf = np.asarray(context.term_weight, np.float64)
        self.max_dist = float(context.max_dist) or 1.0
        self.span: tuple[int, int] | None = None
        self.horizon: int | None = None
        self.fed = False  # the merger's thresholds arrived: the router may have narrowed routes
        self.leaving = RESULT_SCHEMA.empty_table()  # local top-k members of replicas dropped before the epoch
        self.subs = Events.empty()
        self.window = Events.empty()
        self.tops = RESULT_SCHEMA.empty_table()

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
        """Drop the replicas of `drop`; their local top-k members leave the merger's union at the
        epoch's start (they cannot change the global top-k: the route kept covers it)."""
        if len(drop) == 0:
            return
        gone = np.isin(self.tops.column("qid").to_numpy(), drop)
        self.leaving = self.tops.filter(pa.array(gone))
        self.tops = self.tops.filter(pa.array(~gone))
        self.subs = self.subs.take(np.flatnonzero(~np.isin(self.subs.id, drop)))

    def restore(self, state: StateBundle) -> float:
        t0 = time.process_time()
        self.subs, self.window = state.queries, state.objects
        self.tops = state.results if state.results is not None else RESULT_SCHEMA.empty_table()
        return time.process_time() - t0

    def process(self, events: Events) -> WorkerOutput:
        t0 = time.process_time()
        lo, hi = self.span if self.span is not None else (
            int(events.seq[0]) if len(events) else 0, int(events.seq[-1]) + 1 if len(events) else 0)
        is_obj = events.kind == OBJECT
        ins = np.flatnonzero((events.kind == INSERT) & (events.family == TOPK))
        # a subscription re-sent from before the epoch is a replica the route gained (none if held)
        resent = events.seq[ins] < lo
        ignored = ins[resent & np.isin(events.id[ins], self.subs.id)]
        ins = ins[~(resent & np.isin(events.id[ins], self.subs.id))]
        msgs = Events.concat([self.window, events.take(np.flatnonzero(is_obj))])
        subs = Events.concat([self.subs, events.take(ins)])
        n_old = len(self.subs)
        s_del, orphans = deletion_seqs(subs.id, events.take(np.flatnonzero(events.kind == DELETE)))
        s_ins = np.concatenate([np.full(n_old, -1, np.int64), events.seq[ins]])
        n_terms = max(len(self.idf), int(msgs.values.max(initial=-1)) + 1, int(subs.values.max(initial=-1)) + 1)
        idf = self.idf if len(self.idf) == n_terms else np.concatenate(
            [self.idf, np.ones(n_terms - len(self.idf))])
        m_seq, m_exp = msgs.seq, expiry_seqs(msgs.win)
        s_k = np.maximum(subs.k.astype(np.int64), 0)
        t_off = np.zeros(len(subs) + 1, np.int64)
        np.cumsum(s_k, out=t_off[1:])
        t_msg = np.full(int(t_off[-1]), -1, np.int64)
        t_score = np.zeros(int(t_off[-1]), np.float64)
        t_cnt = np.zeros(len(subs), np.int64)
        self._load_tops(subs, m_seq, t_off, t_msg, t_score, t_cnt)

        # the epoch's events: objects by message index, insertions and deletions by slot
        ref = np.full(len(events), -1, np.int64)
        ref[is_obj] = len(self.window) + np.arange(int(is_obj.sum()))
        ref[ins] = n_old + np.arange(len(ins))
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
        s_ins[n_old:][events.seq[ins] < lo] = lo - 1
        ref[ignored] = -1
        keep_ev = ref >= 0
        exp_rows = np.flatnonzero(m_exp < hi)
        exp_rows = exp_rows[np.argsort(m_exp[exp_rows], kind="stable")]
        m_post_off, m_post = postings(msgs.offsets, msgs.values, n_terms)
        s_post_off, s_post = postings(subs.offsets, subs.values, n_terms)
        work_kept = np.zeros(int(keep_ev.sum()), np.int64)
        o_slot, o_trig, o_msg, o_score, o_delta, n_out, reevals, scored = run_events(
            ev_seq[keep_ev], ev_kind[keep_ev], ref[keep_ev], m_exp[exp_rows], exp_rows,
            m_seq, m_exp, msgs.x, msgs.y, msgs.offsets, msgs.values, normalised_weights(msgs.offsets, msgs.values, idf),
            m_post_off, m_post,
            s_ins, s_del, subs.x, subs.y, s_k, subs.alpha.astype(np.float64), subs.offsets, subs.values,
            normalised_weights(subs.offsets, subs.values, idf), s_post_off, s_post,
            t_off, t_msg, t_score, t_cnt, self.max_dist, work_kept)
        o_slot, o_msg = o_slot[:n_out], o_msg[:n_out]
        parts = [self._leaving_rows(lo), {"qid": subs.id[o_slot], "trigger": o_trig[:n_out], "mseq": m_seq[o_msg],
                                          "oid": msgs.id[o_msg], "score": o_score[:n_out], "delta": o_delta[:n_out]}]
        work = np.zeros(len(events), np.int64)
        work[keep_ev] = work_kept

        live = s_del == NEVER
        if self.horizon is not None:  # thresholds for the router: valid until the next epoch's end
            slots = np.flatnonzero(live)
            theta, sc_n = thresholds(slots, hi - 1, self.horizon, m_seq, m_exp, msgs.x, msgs.y, msgs.offsets,
                                     msgs.values, normalised_weights(msgs.offsets, msgs.values, idf), m_post_off,
                                     m_post, subs.x, subs.y, s_k, subs.alpha.astype(np.float64), subs.offsets,
                                     subs.values, normalised_weights(subs.offsets, subs.values, idf), self.max_dist)
            scored += sc_n
            n = len(slots)
            parts.append({"qid": subs.id[slots], "trigger": np.full(n, hi - 1, np.int64), "mseq": np.full(n, -1),
                          "oid": np.full(n, -1), "score": theta, "delta": np.zeros(n, np.int8)})
        changes = {c: np.concatenate([np.asarray(p[c]) for p in parts]) for c in CHANGE_FIELDS}
        self.subs = subs.take(np.flatnonzero(live))
        self.window = msgs.take(np.flatnonzero(m_exp >= hi))
        members = np.repeat(np.arange(len(subs)), t_cnt)
        rank = np.arange(len(members)) - np.repeat(np.cumsum(t_cnt) - t_cnt, t_cnt)
        where = t_off[members] + rank
        keep = live[members]
        self.tops = pa.table({"qid": subs.id[members[keep]], "mseq": m_seq[t_msg[where[keep]]],
                              "score": t_score[where[keep]]}, schema=RESULT_SCHEMA)
        counters = {"objects": int(is_obj.sum()), "inserts": int((events.seq[ins] >= lo).sum()), "deletes": len(dels),
                    "orphan_deletes": orphans, "candidates": int(scored), "results": int((o_delta[:n_out] > 0).sum()),
                    "reevaluations": int(reevals), "window": len(self.window)}
        return WorkerOutput(changes, work, counters, time.process_time() - t0)

    def _leaving_rows(self, lo: int) -> dict:
        """The dropped replicas' members as leave rows just before the epoch (apply_narrowing)."""
        t, self.leaving = self.leaving, RESULT_SCHEMA.empty_table()
        n = t.num_rows
        return {"qid": t.column("qid").to_numpy(), "trigger": np.full(n, lo - 1, np.int64),
                "mseq": t.column("mseq").to_numpy(), "oid": np.full(n, -1, np.int64),
                "score": t.column("score").to_numpy(), "delta": np.full(n, -1, np.int8)}

    def _load_tops(self, subs: Events, m_seq, t_off, t_msg, t_score, t_cnt) -> None:
        """The restored local top-k lists into the slot arrays (rows arrive best first per query)."""
        if self.tops.num_rows == 0:
            return
        qid = self.tops.column("qid").to_numpy()
        mseq = self.tops.column("mseq").to_numpy()
        order = np.argsort(subs.id, kind="stable")
        slot = order[np.searchsorted(subs.id[order], qid)]
        msg = np.searchsorted(m_seq, mseq)
        start = np.r_[0, np.flatnonzero(qid[1:] != qid[:-1]) + 1]
        rank = np.arange(len(qid)) - np.repeat(start, np.diff(np.r_[start, len(qid)]))
        t_msg[t_off[slot] + rank] = msg
        t_score[t_off[slot] + rank] = self.tops.column("score").to_numpy()
        np.add.at(t_cnt, slot, 1)

    def export_state(self) -> StateBundle:
        return StateBundle(queries=self.subs, objects=self.window, results=self.tops)

    def size_bytes(self) -> int:
        return int(sum(a.nbytes for e in (self.subs, self.window) for a in (*e.cols.values(), e.offsets, e.values))
                   + self.tops.nbytes)
