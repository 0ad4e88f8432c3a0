"""Top-k subscriptions' merger: the replicas' local top-k lists replayed into the global entries.

A replica's local top-k is the k best of the messages its worker received (index.py). The global
top-k at any moment is the k best of the union of the replicas' local top-k lists: every member of
the global top-k is a message some replica received (the routing contract: a message sharing a
keyword with the subscription reaches a worker holding it), and it ranks no worse among that
replica's messages than among all, so it is in that replica's local top-k. Replaying each query's
changes in seq order, all changes of one seq at once, through the union (a multiset: two replicas
may hold the same message) gives the global top-k after every event; a message that is in it now
and was not before the event is an entry (query, object, trigger seq). The union holds at most k
rows per replica, kept across epochs as the bucket's state (docs/decisions.md, "Top-k merge").
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
from numba import njit

from harness.core.events import DELETE, INSERT, TOPK, Events, small_ints, sorted_runs
from harness.families import result_rows
from harness.families.base import NEVER, Merger, MergeOutput, qid_buckets
from harness.families.topk.skyband import better

STATE_SCHEMA = pa.schema([("qid", pa.int64()), ("k", pa.int64()), ("del_seq", pa.int64()), ("mseq", pa.int64()),
                          ("oid", pa.int64()), ("score", pa.float64()), ("count", pa.int64()),
                          ("top", pa.bool_())])
HEADER = -1  # the mseq of a query's header row (its k and deletion seq; no member)


def pack(changes: dict, rows: np.ndarray) -> bytes:
    ints = np.stack([changes[c][rows].astype(np.int64) for c in ("qid", "trigger", "mseq", "oid", "delta")], axis=1)
    return (np.int64(len(rows)).tobytes() + np.ascontiguousarray(ints).tobytes()
            + np.ascontiguousarray(changes["score"][rows], np.float64).tobytes())


def unpack(blob: bytes) -> tuple[np.ndarray, np.ndarray]:
    n = int(np.frombuffer(blob, np.int64, 1)[0])
    return np.frombuffer(blob, np.int64, 5 * n, 8).reshape(n, 5), np.frombuffer(blob, np.float64, n, 8 + 40 * n)


@njit(cache=True)
def replay(s_off, s_mseq, s_oid, s_score, s_count, s_top, r_off, r_trig, r_mseq, r_oid, r_score, r_delta, k, dele):
    """Per query slot q: its union (state rows s_off[q]:s_off[q+1], best first) and its changes
    (rows r_off[q]:r_off[q+1], sorted by trigger). Returns the new union as (offsets, mseq, oid,
    score, count, top), the entries as (slot, oid, trigger, score) and the exits (a member of the
    global top-k that left it: slot, oid, trigger)."""
    n_q = len(k)
    cap_u = len(s_mseq) + len(r_mseq)
    u_off = np.zeros(n_q + 1, np.int64)
    u_mseq = np.empty(cap_u, np.int64)
    u_oid = np.empty(cap_u, np.int64)
    u_score = np.empty(cap_u, np.float64)
    u_count = np.empty(cap_u, np.int64)
    u_top = np.empty(cap_u, np.bool_)
    e_cap = 64
    e_slot = np.empty(e_cap, np.int64)
    e_oid = np.empty(e_cap, np.int64)
    e_trig = np.empty(e_cap, np.int64)
    e_score = np.empty(e_cap, np.float64)
    n_e = 0
    x_cap = 64
    x_slot = np.empty(x_cap, np.int64)
    x_oid = np.empty(x_cap, np.int64)
    x_trig = np.empty(x_cap, np.int64)
    n_x = 0
    n_u = 0
    for q in range(n_q):
        base = n_u
        for i in range(s_off[q], s_off[q + 1]):  # the union as the last epoch left it
            u_mseq[n_u], u_oid[n_u], u_score[n_u] = s_mseq[i], s_oid[i], s_score[i]
            u_count[n_u], u_top[n_u] = s_count[i], s_top[i]
            n_u += 1
        i = r_off[q]
        while i < r_off[q + 1]:
            trig = r_trig[i]
            if trig > dele[q]:
                break
            while i < r_off[q + 1] and r_trig[i] == trig:  # every change of this seq
                found = -1
                for u in range(base, n_u):
                    if u_mseq[u] == r_mseq[i]:
                        found = u
                        break
                if found >= 0:
                    u_count[found] += r_delta[i]
                elif r_delta[i] > 0:  # a new member, placed by rank
                    pos = n_u
                    while pos > base and better(r_score[i], r_mseq[i], u_score[pos - 1], u_mseq[pos - 1]):
                        u_mseq[pos], u_oid[pos], u_score[pos] = u_mseq[pos - 1], u_oid[pos - 1], u_score[pos - 1]
                        u_count[pos], u_top[pos] = u_count[pos - 1], u_top[pos - 1]
                        pos -= 1
                    u_mseq[pos], u_oid[pos], u_score[pos] = r_mseq[i], r_oid[i], r_score[i]
                    u_count[pos], u_top[pos] = r_delta[i], False
                    n_u += 1
                i += 1
            w = base  # drop what no replica holds, then the first k are the global top-k
            rank = 0
            for u in range(base, n_u):
                if u_count[u] <= 0 or (rank >= k[q] and u_top[u]):
                    if u_top[u]:  # it leaves the global top-k at this seq
                        if n_x == x_cap:
                            x_cap *= 2
                            x_slot = np.concatenate((x_slot, np.empty(x_cap - n_x, np.int64)))
                            x_oid = np.concatenate((x_oid, np.empty(x_cap - n_x, np.int64)))
                            x_trig = np.concatenate((x_trig, np.empty(x_cap - n_x, np.int64)))
                        x_slot[n_x], x_oid[n_x], x_trig[n_x] = q, u_oid[u], trig
                        n_x += 1
                        u_top[u] = False
                    if u_count[u] <= 0:
                        continue
                if w != u:
                    u_mseq[w], u_oid[w], u_score[w] = u_mseq[u], u_oid[u], u_score[u]
                    u_count[w], u_top[w] = u_count[u], u_top[u]
                if rank < k[q]:
                    if not u_top[w]:
                        if n_e == e_cap:
                            e_cap *= 2
                            e_slot = np.concatenate((e_slot, np.empty(e_cap - n_e, np.int64)))
                            e_oid = np.concatenate((e_oid, np.empty(e_cap - n_e, np.int64)))
                            e_trig = np.concatenate((e_trig, np.empty(e_cap - n_e, np.int64)))
                            e_score = np.concatenate((e_score, np.empty(e_cap - n_e, np.float64)))
                        e_slot[n_e], e_oid[n_e], e_trig[n_e], e_score[n_e] = q, u_oid[w], trig, u_score[w]
                        n_e += 1
                    u_top[w] = True
                else:
                    u_top[w] = False
                rank += 1
                w += 1
            n_u = w
        u_off[q + 1] = n_u
    return (u_off, u_mseq[:n_u], u_oid[:n_u], u_score[:n_u], u_count[:n_u], u_top[:n_u], e_slot[:n_e], e_oid[:n_e],
            e_trig[:n_e], e_score[:n_e], x_slot[:n_x], x_oid[:n_x], x_trig[:n_x])


def thresholds(ints: np.ndarray, score: np.ndarray) -> pa.Table | None:
    """The router's feedback from the replicas' threshold rows (delta 0): per query the largest. Each
    replica's value is the k-th best score among messages it holds that stay in the window until
    the next epoch's end, a lower bound of the global k-th score all through that epoch, so the
    largest is one too (DSkype's prefix routes by it). None when the workers sent none."""
    rows = np.flatnonzero(ints[:, 4] == 0)
    if len(rows) == 0:
        return None
    qid, value = ints[rows, 0], score[rows]
    order = np.lexsort((-value, qid))
    first = np.r_[True, qid[order][1:] != qid[order][:-1]]
    return pa.table({"qid": qid[order][first], "value": value[order][first]})


class TopkMerger(Merger):
    stateful = True
    needs_queries = True

    @staticmethod
    def blocks(results, n_buckets: int) -> Iterator[tuple[int, bytes]]:
        qid = results["qid"]
        if len(qid) == 0:
            return
        bucket = qid_buckets(qid, n_buckets)
        order = np.argsort(small_ints(bucket, n_buckets), kind="stable")
        for lo, hi in sorted_runs(bucket[order]):
            yield int(bucket[order[lo]]), pack(results, order[lo:hi])

    def restore(self, state: pa.Table | None) -> None:
        self.state = state if state is not None else STATE_SCHEMA.empty_table()

    def merge(self, blobs: list[bytes], queries: Events | None) -> MergeOutput:
        qid, k, dele = self._queries(queries)
        parts = [unpack(b) for b in blobs]
        ints = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, 5), np.int64)
        score = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
        feedback = thresholds(ints, score)
        ints, score = ints[ints[:, 4] != 0], score[ints[:, 4] != 0]
        r_slot = np.searchsorted(qid, ints[:, 0])
        known = r_slot < len(qid)
        known[known] = qid[r_slot[known]] == ints[known, 0]
        if not known.all():
            raise RuntimeError(f"top-k merge: changes for subscriptions never inserted: qid "
                               f"{np.unique(ints[~known, 0])[:5].tolist()}")
        order = np.lexsort((ints[:, 1], r_slot))
        ints, score, r_slot = ints[order], score[order], r_slot[order]
        r_off = np.searchsorted(r_slot, np.arange(len(qid) + 1))
        st = self.state
        mem = st.column("mseq").to_numpy() != HEADER
        s_q = np.searchsorted(qid, st.column("qid").to_numpy()[mem])  # state rows: by query, best first
        s_off = np.searchsorted(s_q, np.arange(len(qid) + 1))
        u_off, u_mseq, u_oid, u_score, u_count, u_top, e_slot, e_oid, e_trig, e_score, x_slot, x_oid, x_trig = replay(
            s_off, st.column("mseq").to_numpy()[mem], st.column("oid").to_numpy()[mem],
            st.column("score").to_numpy()[mem], st.column("count").to_numpy()[mem],
            st.column("top").to_numpy(zero_copy_only=False)[mem],
            r_off, ints[:, 1], ints[:, 2], ints[:, 3], score, ints[:, 4], k, dele)
        live = dele == NEVER
        u_q = np.repeat(np.arange(len(qid)), np.diff(u_off))
        keep = live[u_q]
        n = int(live.sum())
        self.state = pa.table({
            "qid": np.r_[qid[live], qid[u_q[keep]]], "k": np.r_[k[live], k[u_q[keep]]],
            "del_seq": np.full(n + int(keep.sum()), NEVER, np.int64),
            "mseq": np.r_[np.full(n, HEADER, np.int64), u_mseq[keep]], "oid": np.r_[np.full(n, -1), u_oid[keep]],
            "score": np.r_[np.full(n, np.nan), u_score[keep]], "count": np.r_[np.zeros(n, np.int64), u_count[keep]],
            "top": np.r_[np.zeros(n, np.bool_), u_top[keep]]}, schema=STATE_SCHEMA)
        if feedback is not None:
            feedback = feedback.filter(pa.array(np.isin(feedback.column("qid").to_numpy(), qid[live])))
        entries = result_rows.rows(TOPK, qid[e_slot], e_oid, seq=e_trig, score=e_score)
        return MergeOutput(entries.column("key").to_numpy(), feedback, rows=entries,
                           exits=result_rows.exits(TOPK, qid[x_slot], x_oid, x_trig))

    def _queries(self, queries: Events | None):
        """Every known query of the bucket, sorted by id: k and deletion seq, the epoch's applied."""
        st = self.state
        head = st.column("mseq").to_numpy() == HEADER
        qid = st.column("qid").to_numpy()[head]
        k = st.column("k").to_numpy()[head]
        if queries is not None and len(queries):
            ins = np.flatnonzero(queries.kind == INSERT)
            new = ~np.isin(queries.id[ins], qid)
            qid = np.r_[qid, queries.id[ins][new]]
            k = np.r_[k, queries.k[ins][new].astype(np.int64)]
        order = np.argsort(qid, kind="stable")
        qid, k = qid[order], k[order]
        dele = np.full(len(qid), NEVER, np.int64)
        if queries is not None and len(queries):
            d = np.flatnonzero(queries.kind == DELETE)
            at = np.minimum(np.searchsorted(qid, queries.id[d]), max(len(qid) - 1, 0))
            ok = (qid[at] == queries.id[d]) if len(qid) else np.zeros(len(d), np.bool_)
            np.minimum.at(dele, at[ok], queries.seq[d][ok])
        return qid, k, dele

    def export_state(self) -> pa.Table | None:
        return self.state
