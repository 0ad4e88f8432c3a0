"""Top-k subscriptions' merger: the replicas' local top-k lists replayed into the global entries.

A replica's local top-k is the k best of the messages its worker received (index.py). The global
top-k at any moment is the k best of the union of the replicas' local top-k lists: every member of
the global top-k is a message some replica received (the routing contract: a message sharing a
keyword with the subscription reaches a worker holding it), and it ranks no worse among that
replica's messages than among all, so it is in that replica's local top-k. Replaying each query's
changes in seq order, all changes of one seq at once, through the union (a multiset: two replicas
may hold the same message) gives the global top-k after every event; a message that is in it now
and was not before the event is an entry (query, object, trigger seq). The union holds at most k
rows per replica, kept across epochs as the bucket's state (ADR-0046).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
from numba import njit

from harness.core.events import DELETE, INSERT, TOPK, Events, small_ints, sorted_runs
from harness.families import result_rows
from harness.families.base import NEVER, Merger, MergeOutput, qid_buckets
from harness.families.topk import formats
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
def sorted_changes(ints, score, qid):
    """The replicas' changes (rows of `ints` with delta != 0: qid, trigger, mseq, oid, delta) by
    query slot (qid's position), then trigger, then arrival (np.lexsort((trigger, slot))'s order,
    which replay takes), as per-slot offsets and the columns gathered; two stable counting sorts
    (trigger, then slot) instead of a lexsort of every change. Returns (offsets, trigger, mseq,
    oid, delta, score, the first qid not in `qid` or -1)."""
    n = len(ints)
    n_q = len(qid)
    rows = np.empty(n, np.int64)
    slot = np.empty(n, np.int64)
    m = 0
    t_lo, t_hi = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    # qid -> slot: a table over the ids' range when it is not much wider than the changes (a
    # binary search of every change took most of this function's time), else a binary search
    q_lo = qid[0] if n_q else 0
    dense = n_q > 0 and qid[-1] - q_lo <= 4 * (n + n_q) + 65536
    table = np.full(qid[-1] - q_lo + 1 if dense else 0, -1, np.int64)
    if dense:
        for s in range(n_q):
            table[qid[s] - q_lo] = s
    for r in range(n):
        if ints[r, 4] == 0:  # a threshold row (thresholds() reads those)
            continue
        if dense:
            at = ints[r, 0] - q_lo
            s = table[at] if 0 <= at < len(table) else n_q
            s = n_q if s < 0 else s
        else:
            s = np.searchsorted(qid, ints[r, 0])
        if s == n_q or qid[s] != ints[r, 0]:
            return (np.zeros(n_q + 1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                    np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64), ints[r, 0])
        rows[m], slot[m] = r, s
        t_lo, t_hi = min(t_lo, ints[r, 1]), max(t_hi, ints[r, 1])
        m += 1
    by_trig = np.empty(m, np.int64)  # positions 0..m-1 in trigger order, ties in arrival order
    if m and t_hi - t_lo <= 8 * m + 65536:
        count = np.zeros(t_hi - t_lo + 2, np.int64)
        for j in range(m):
            count[ints[rows[j], 1] - t_lo + 1] += 1
        for t in range(len(count) - 1):
            count[t + 1] += count[t]
        for j in range(m):
            t = ints[rows[j], 1] - t_lo
            by_trig[count[t]] = j
            count[t] += 1
    else:
        trig = np.empty(m, np.int64)
        for j in range(m):
            trig[j] = ints[rows[j], 1]
        by_trig[:] = np.argsort(trig, kind="mergesort")
    offsets = np.zeros(n_q + 1, np.int64)
    for j in range(m):
        offsets[slot[j] + 1] += 1
    for s in range(n_q):
        offsets[s + 1] += offsets[s]
    fill = offsets[:-1].copy()
    o_trig, o_mseq, o_oid, o_delta = np.empty(m, np.int64), np.empty(m, np.int64), np.empty(m, np.int64), np.empty(
        m, np.int64)
    o_score = np.empty(m, np.float64)
    for j in by_trig:
        at = fill[slot[j]]
        fill[slot[j]] += 1
        r = rows[j]
        o_trig[at], o_mseq[at], o_oid[at], o_delta[at], o_score[at] = ints[r, 1], ints[r, 2], ints[r, 3], ints[r, 4], \
            score[r]
    return offsets, o_trig, o_mseq, o_oid, o_delta, o_score, -1


@njit(cache=True)
def replay(s_off, s_mseq, s_oid, s_score, s_count, s_top, r_off, r_trig, r_mseq, r_oid, r_score, r_delta, k, dele):
    """Per query slot q: its union (state rows s_off[q]:s_off[q+1], best first) and its changes
    (rows r_off[q]:r_off[q+1], sorted by trigger). Returns the new union as (offsets, mseq, oid,
    score, count, top), the entries as (slot, oid, trigger, score) and the exits (a member of the
    global top-k that left it: slot, oid, trigger).

    After every seq the union holds only members some replica holds, best first, and its first k
    are the top-k (flag `top`). A seq's changes move ranks only from the first member they insert
    or empty; the members before it keep their ranks and flags, so the pass that drops the emptied
    members and sets the flags starts there, and stops once no emptied member and no top-k member
    is left behind it and its rank is past k (the rest keeps its flags and only slides over the
    dropped ones). Entries and exits come out in the order a pass over the whole union gives.

    A seq's entries and exits are each at most its changes: a member leaves the top-k only when it
    empties or a new member enters above it (a member below cannot pass it), and with the top-k full
    each entry takes the place of a member that left (with it not full, every member is in it and
    only new members enter); so the whole call's are at most len(r_mseq), their arrays' size."""
    n_q = len(k)
    cap_u = len(s_mseq) + len(r_mseq)
    u_off = np.zeros(n_q + 1, np.int64)
    u_mseq = np.empty(cap_u, np.int64)
    u_oid = np.empty(cap_u, np.int64)
    u_score = np.empty(cap_u, np.float64)
    u_count = np.empty(cap_u, np.int64)
    u_top = np.empty(cap_u, np.bool_)
    # entries and exits at their bound, allocated once: growing them inside the pass made numba
    # count references to them on every step of it (ten times this kernel's time; ADR-0078's cause)
    cap = len(r_mseq) + 1
    e_slot, e_oid, e_trig, e_score = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64), \
        np.empty(cap, np.float64)
    n_e = 0
    x_slot, x_oid, x_trig = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64)
    n_x = 0
    n_u = 0
    for q in range(n_q):
        base = n_u
        n_top = 0  # the union's top-k members (its first n_top)
        for i in range(s_off[q], s_off[q + 1]):  # the union as the last epoch left it
            u_mseq[n_u], u_oid[n_u], u_score[n_u] = s_mseq[i], s_oid[i], s_score[i]
            u_count[n_u], u_top[n_u] = s_count[i], s_top[i]
            n_top += s_top[i]
            n_u += 1
        i = r_off[q]
        while i < r_off[q + 1]:
            trig = r_trig[i]
            if trig > dele[q]:
                break
            first = n_u  # the first position whose rank this seq's changes can move
            emptied = 0  # members whose count reached 0, not yet dropped
            while i < r_off[q + 1] and r_trig[i] == trig:  # every change of this seq
                found = -1
                for u in range(base, n_u):
                    if u_mseq[u] == r_mseq[i]:
                        found = u
                        break
                if found >= 0:
                    was = u_count[found]
                    u_count[found] += r_delta[i]
                    if was > 0 and u_count[found] <= 0:
                        emptied += 1
                        first = min(first, found)
                    elif was <= 0 and u_count[found] > 0:
                        emptied -= 1
                elif r_delta[i] > 0:  # a new member, placed by rank
                    pos = n_u
                    while pos > base and better(r_score[i], r_mseq[i], u_score[pos - 1], u_mseq[pos - 1]):
                        u_mseq[pos], u_oid[pos], u_score[pos] = u_mseq[pos - 1], u_oid[pos - 1], u_score[pos - 1]
                        u_count[pos], u_top[pos] = u_count[pos - 1], u_top[pos - 1]
                        pos -= 1
                    u_mseq[pos], u_oid[pos], u_score[pos] = r_mseq[i], r_oid[i], r_score[i]
                    u_count[pos], u_top[pos] = r_delta[i], False
                    n_u += 1
                    first = min(first, pos)
                i += 1
            # drop what no replica holds, then the first k are the global top-k
            tops_left = n_top - min(n_top, first - base)  # flagged members at or after `first`
            w = first
            rank = first - base
            u = first
            while u < n_u:
                if emptied == 0 and tops_left == 0 and rank >= k[q]:
                    break  # the rest keeps its flags (off) and counts; it only slides
                if u_top[u]:
                    tops_left -= 1
                if u_count[u] <= 0 or (rank >= k[q] and u_top[u]):
                    if u_top[u]:  # it leaves the global top-k at this seq
                        if n_x == cap:  # cannot happen (docstring): never write past the bound
                            raise RuntimeError("top-k replay: more exits than changes")
                        x_slot[n_x], x_oid[n_x], x_trig[n_x] = q, u_oid[u], trig
                        n_x += 1
                        u_top[u] = False
                    if u_count[u] <= 0:
                        emptied -= 1
                        u += 1
                        continue
                if w != u:
                    u_mseq[w], u_oid[w], u_score[w] = u_mseq[u], u_oid[u], u_score[u]
                    u_count[w], u_top[w] = u_count[u], u_top[u]
                if rank < k[q]:
                    if not u_top[w]:
                        if n_e == cap:  # cannot happen (docstring): never write past the bound
                            raise RuntimeError("top-k replay: more entries than changes")
                        e_slot[n_e], e_oid[n_e], e_trig[n_e], e_score[n_e] = q, u_oid[w], trig, u_score[w]
                        n_e += 1
                    u_top[w] = True
                else:
                    u_top[w] = False
                rank += 1
                w += 1
                u += 1
            if w != u:  # slide the rest over the dropped members
                for v in range(u, n_u):
                    u_mseq[w], u_oid[w], u_score[w] = u_mseq[v], u_oid[v], u_score[v]
                    u_count[w], u_top[w] = u_count[v], u_top[v]
                    w += 1
                n_u = w
            n_top = min(k[q], n_u - base)
        u_off[q + 1] = n_u
    return (u_off, u_mseq[:n_u], u_oid[:n_u], u_score[:n_u], u_count[:n_u], u_top[:n_u], e_slot[:n_e], e_oid[:n_e],
            e_trig[:n_e], e_score[:n_e], x_slot[:n_x], x_oid[:n_x], x_trig[:n_x])


def state_members(st_mseq: np.ndarray, st_qid: np.ndarray, qid: np.ndarray) -> tuple[slice | np.ndarray, np.ndarray]:
    """The state's member rows (a slice when the header rows come first, as `merge` writes them; else
    a mask) and, per query slot of the sorted `qid`, the offsets of its members: those of qid[i]
    from s_off[i] (the state holds them by query, best first). np.searchsorted(s_q,
    arange(len(qid) + 1)) over s_q = each member's slot (np.searchsorted(qid, member qids)): that
    is, s_off[i] = the members whose qid is at most qid[i - 1], found by searching each query in
    the members rather than each member (800k at 20,000 subscriptions) in the queries when the
    members' qids ascend, as `merge` writes them."""
    mem = st_mseq != HEADER
    h = len(mem) - int(np.count_nonzero(mem))
    if not mem[:h].any():
        mem = slice(h, None)
    m_qid = st_qid[mem]
    if len(m_qid) < 2 or bool(np.all(m_qid[1:] >= m_qid[:-1])):
        return mem, np.concatenate(([0], np.searchsorted(m_qid, qid, side="right"))).astype(np.int64)
    return mem, np.searchsorted(np.searchsorted(qid, m_qid), np.arange(len(qid) + 1))


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
    first = np.concatenate(([True], qid[order][1:] != qid[order][:-1]))
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
        r_off, r_trig, r_mseq, r_oid, r_delta, r_score, unknown = sorted_changes(ints, score, qid)
        if unknown >= 0:
            raise RuntimeError(f"top-k merge: changes for subscriptions never inserted: qid {unknown}")
        st = self.state
        mem, s_off = state_members(st.column("mseq").to_numpy(), st.column("qid").to_numpy(), qid)
        u_off, u_mseq, u_oid, u_score, u_count, u_top, e_slot, e_oid, e_trig, e_score, x_slot, x_oid, x_trig = replay(
            s_off, st.column("mseq").to_numpy()[mem], st.column("oid").to_numpy()[mem],
            st.column("score").to_numpy()[mem], st.column("count").to_numpy()[mem],
            st.column("top").to_numpy(zero_copy_only=False)[mem],
            r_off, r_trig, r_mseq, r_oid, r_score, r_delta, k, dele)
        live = dele == NEVER
        n = int(live.sum())
        if n == len(qid):  # no query deleted: every member stays (no gathers through a mask)
            counts = np.diff(u_off)
            m_qid, m_k, keep = np.repeat(qid, counts), np.repeat(k, counts), slice(None)
        else:
            u_q = np.repeat(np.arange(len(qid)), np.diff(u_off))
            keep = live[u_q]
            m_qid, m_k = qid[u_q[keep]], k[u_q[keep]]
        self.state = pa.table({
            "qid": np.concatenate((qid[live], m_qid)), "k": np.concatenate((k[live], m_k)),
            "del_seq": np.full(n + len(m_qid), NEVER, np.int64),
            "mseq": np.concatenate((np.full(n, HEADER, np.int64), u_mseq[keep])),
            "oid": np.concatenate((np.full(n, -1, np.int64), u_oid[keep])),
            "score": np.concatenate((np.full(n, np.nan), u_score[keep])),
            "count": np.concatenate((np.zeros(n, np.int64), u_count[keep])),
            "top": np.concatenate((np.zeros(n, np.bool_), u_top[keep]))}, schema=STATE_SCHEMA)
        if feedback is not None:
            feedback = feedback.filter(pa.array(np.isin(feedback.column("qid").to_numpy(), qid[live])))
        entries = result_rows.rows(TOPK, qid[e_slot], e_oid, seq=e_trig, score=e_score, keys=formats.RESULTS.keys)
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
            qid = np.concatenate((qid, queries.id[ins][new]))
            k = np.concatenate((k, queries.k[ins][new].astype(np.int64)))
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
