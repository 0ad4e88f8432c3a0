"""kNN subscriptions' merger: per query, the workers' local entries replayed in seq order.

A subscription replicated over workers that each see part of the objects (space partitioners,
text routers under OR) gets local entries from each replica. Every global entry is among them: a
replica's local k-th distance is never below the global one (it saw a subset of the objects), so
an object that enters the global A(s) enters the local A(s) of every replica that received it, and
the routing contract sends it to one at least. Replaying the distinct candidates of a query in seq
order through the global A(s) (kept here across epochs, at most k rows per query) with the same
strict rule gives exactly the global entries (ADR-0032). A candidate
after the query's deletion (from a replica the deletion did not reach) is ignored.

Feedback: for each query whose global A(s) is full and changed this epoch, its k-th squared
distance. Workers prune with it from the next epoch on; routers may use it to drop replicas.

A snapshot kNN query (SSTD's SKQ) goes through the same replay: its candidates are each worker's
k nearest stored objects, so its global k nearest by (d2, seq) are among them, and the replay's
strict rule leaves exactly those in its A at the end (the older object first on a tie). Its
answer is that A; it keeps no state and gives no feedback.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
from numba import njit

from harness.core.events import DELETE, INSERT, SNAPSHOT, Events, pair_keys, small_ints, sorted_runs
from harness.families.base import NEVER, Merger, MergeOutput, qid_buckets
from harness.families.knn.nearest import insert_nearest

STATE_SCHEMA = pa.schema([("qid", pa.int64()), ("k", pa.int64()), ("del_seq", pa.int64()), ("oid", pa.int64()),
                          ("seq", pa.int64()), ("d2", pa.float64())])
HEADER = -1  # the seq of a query's header row in the state (its k and deletion seq; no member)


def pack(ids: np.ndarray, d2: np.ndarray) -> bytes:
    return np.int64(len(d2)).tobytes() + np.ascontiguousarray(ids, np.int64).tobytes() + np.ascontiguousarray(
        d2, np.float64).tobytes()


def unpack(blob: bytes) -> tuple[np.ndarray, np.ndarray]:
    n = int(np.frombuffer(blob, np.int64, 1)[0])
    ids = np.frombuffer(blob, np.int64, 3 * n, 8).reshape(n, 3)
    d2 = np.frombuffer(blob, np.float64, n, 8 + 24 * n)
    return ids, d2


@njit(cache=True)
def replay(c_qid, c_oid, c_seq, c_d2, slot, k, dele, koff, count, m_d2, m_seq, m_oid, changed, entered):
    """Candidates sorted by (query, seq) through each query's global A; marks the entries."""
    for i in range(len(c_qid)):
        s = slot[i]
        if c_seq[i] > dele[s]:
            continue
        d2 = c_d2[i]
        base = koff[s]
        c = count[s]
        kk = k[s]
        if c == kk and not d2 < m_d2[base + kk - 1]:
            continue
        count[s] = insert_nearest(m_d2, m_seq, m_oid, base, c, kk, d2, c_seq[i], c_oid[i])
        changed[s] = True
        entered[i] = True


@njit(cache=True)
def merge_runs(key, run_off):
    """Rows of runs each sorted by `key` (a packed (qid, seq): a worker's block, blocks() sorts
    it) merged into one key order with a binary heap over the runs' heads; a row whose key equals
    the previous one (the same object from another replica of the query: an object's seq names
    it) is left out."""
    r = len(run_off) - 1
    heap = np.empty(r, np.int64)  # run ids, a min-heap on their head keys
    top = np.empty(r, np.int64)  # each heap entry's head key, kept beside it
    head = run_off[:-1].copy()
    n_heap = 0
    for k in range(r):
        if head[k] < run_off[k + 1]:
            c = n_heap
            n_heap += 1
            heap[c], top[c] = k, key[head[k]]
            while c > 0 and top[c] < top[(c - 1) >> 1]:
                p = (c - 1) >> 1
                heap[c], heap[p] = heap[p], heap[c]
                top[c], top[p] = top[p], top[c]
                c = p
    out = np.empty(run_off[-1], np.int64)
    n = 0
    last = np.int64(-1)
    while n_heap:
        k = heap[0]
        i = head[k]
        if n == 0 or key[i] != last:
            out[n] = i
            n += 1
            last = key[i]
        head[k] += 1
        if head[k] == run_off[k + 1]:
            n_heap -= 1
            heap[0], top[0] = heap[n_heap], top[n_heap]
        else:
            top[0] = key[head[k]]
        c = 0
        while True:  # sift the root down
            a = 2 * c + 1
            if a >= n_heap:
                break
            if a + 1 < n_heap and top[a + 1] < top[a]:
                a += 1
            if top[a] >= top[c]:
                break
            heap[c], heap[a] = heap[a], heap[c]
            top[c], top[a] = top[a], top[c]
            c = a
    return out[:n]


def packed_keys(qid: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """(qid, seq) as one int64 that orders like the pair: qid below 2^31 (as pair keys need) and
    seq below 2^32; a ValueError otherwise."""
    if len(qid) and (qid.min() < 0 or qid.max() >= 1 << 31 or seq.min() < 0 or seq.max() >= 1 << 32):
        raise ValueError("kNN merge: qid must be in [0, 2^31) and seq in [0, 2^32) "
                         f"(got qid {qid.min()}..{qid.max()}, seq {seq.min()}..{seq.max()})")
    return (qid.astype(np.int64) << 32) | seq.astype(np.int64)


def by_query(qid: np.ndarray) -> np.ndarray:
    """A stable order of the rows by qid: the worker emits its candidates in seq order, so each
    block leaves in (qid, seq) order, the runs merge_runs merges (a sort-merge shuffle: each
    worker sorts its own candidates, the merger only merges). Rows and qids below 2^31 (as pair
    keys need) sort as one packed int64 (qid, row), 6x a lexsort; otherwise a stable argsort."""
    n = len(qid)
    if n and n < 1 << 31 and qid.min() >= 0 and qid.max() < 1 << 31:
        return np.sort((qid.astype(np.int64) << 32) | np.arange(n, dtype=np.int64)) & 0xFFFFFFFF
    return np.argsort(qid, kind="stable")


def _sorted(ids: np.ndarray, d2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A block in (qid, seq) order with its packed keys: as blocks() writes it, else sorted here."""
    key = packed_keys(ids[:, 0], ids[:, 2])
    if len(key) < 2 or (key[1:] >= key[:-1]).all():
        return ids, d2, key
    order = np.argsort(key, kind="stable")
    return ids[order], d2[order], key[order]


class KnnMerger(Merger):
    stateful = True
    needs_queries = True

    @staticmethod
    def blocks(results, n_buckets: int) -> Iterator[tuple[int, bytes]]:
        ids, d2 = results.ids, results.d2
        if len(d2) == 0:
            return
        order = by_query(ids[:, 0])
        bucket = qid_buckets(ids[order, 0], n_buckets)
        by_bucket = np.argsort(small_ints(bucket, n_buckets), kind="stable")
        order, bucket = order[by_bucket], bucket[by_bucket]
        for lo, hi in sorted_runs(bucket):
            rows = order[lo:hi]
            yield int(bucket[lo]), pack(ids[rows], d2[rows])

    def restore(self, state: pa.Table | None) -> None:
        self.state = state if state is not None else STATE_SCHEMA.empty_table()

    def merge(self, blobs: list[bytes], queries: Events | None) -> MergeOutput:
        qid, k, dele, koff, count, m_d2, m_seq, m_oid, snap = self._queries(queries)
        parts = [_sorted(*unpack(b)) for b in blobs]
        ids = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, 3), np.int64)
        d2 = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
        if len(d2):  # by query, then seq; one row per (query, object)
            run_off = np.r_[0, np.cumsum([len(p[1]) for p in parts])].astype(np.int64)
            order = merge_runs(np.concatenate([p[2] for p in parts]), run_off)
            ids, d2 = ids[order], d2[order]
        slot = np.searchsorted(qid, ids[:, 0])  # sorted needles: each search starts at the last
        known = slot < len(qid)
        known[known] = qid[slot[known]] == ids[known, 0]
        if not known.all():
            missing = np.unique(ids[~known, 0])[:5].tolist()
            raise RuntimeError(f"kNN merge: candidates for subscriptions never inserted: qid {missing}")
        changed = np.zeros(len(qid), np.bool_)
        entered = np.zeros(len(d2), np.bool_)
        replay(ids[:, 0], ids[:, 1], ids[:, 2], d2, slot, k, dele, koff, count, m_d2, m_seq, m_oid, changed,
               entered)
        full = np.flatnonzero(changed & (count == k) & (dele == NEVER) & ~snap)
        feedback = pa.table({"qid": qid[full], "value": m_d2[koff[full] + k[full] - 1]})
        # a snapshot query's answer is where the replay ends, its k best by (d2, seq); nothing of it is kept
        entered &= ~snap[slot]
        at = np.flatnonzero(snap)
        members = np.repeat(at, count[at])
        pos = koff[members] + np.arange(len(members)) - np.repeat(np.cumsum(count[at]) - count[at], count[at])
        keys = np.concatenate([pair_keys(ids[entered, 0], ids[entered, 1]), pair_keys(qid[members], m_oid[pos])])
        self._keep(qid, k, dele, koff, count, m_d2, m_seq, m_oid, ~snap)
        return MergeOutput(keys, feedback)

    def _queries(self, queries: Events | None):
        """The global state of every known query of the bucket, the epoch's insertions and
        deletions applied: sorted ids, k, deletion seq, and each A(s) in k slots."""
        st = self.state
        s_seq = st.column("seq").to_numpy()
        head = s_seq == HEADER
        qid = st.column("qid").to_numpy()[head]
        k = st.column("k").to_numpy()[head]
        dele = st.column("del_seq").to_numpy()[head]
        snap_ids = np.zeros(0, np.int64)
        if queries is not None and len(queries):
            ins = np.flatnonzero((queries.kind == INSERT) | (queries.kind == SNAPSHOT))
            snap_ids = queries.id[queries.kind == SNAPSHOT]
            new = ~np.isin(queries.id[ins], qid)
            qid = np.r_[qid, queries.id[ins][new]]
            k = np.r_[k, queries.k[ins][new].astype(np.int64)]
            dele = np.r_[dele, np.full(int(new.sum()), NEVER, np.int64)]
        order = np.argsort(qid, kind="stable")
        qid, k, dele = qid[order], np.maximum(k[order], 1), dele[order].copy()
        if queries is not None and len(queries):
            d = np.flatnonzero(queries.kind == DELETE)
            at = np.searchsorted(qid, queries.id[d])
            ok = at < len(qid)
            ok[ok] = qid[at[ok]] == queries.id[d][ok]
            np.minimum.at(dele, at[ok], queries.seq[d][ok])
        koff = np.r_[0, np.cumsum(k)].astype(np.int64)
        m_d2 = np.full(int(koff[-1]), np.inf)
        m_seq = np.zeros(int(koff[-1]), np.int64)
        m_oid = np.zeros(int(koff[-1]), np.int64)
        count = np.zeros(len(qid), np.int64)
        mem = np.flatnonzero(~head)
        if len(mem):
            m_q = st.column("qid").to_numpy()[mem]
            slot = np.searchsorted(qid, m_q)
            ordered = np.lexsort((s_seq[mem], st.column("d2").to_numpy()[mem], slot))
            slot = slot[ordered]
            first = np.r_[0, np.flatnonzero(np.diff(slot)) + 1]
            rank = np.arange(len(slot)) - np.repeat(first, np.diff(np.r_[first, len(slot)]))
            pos = koff[slot] + rank
            m_d2[pos] = st.column("d2").to_numpy()[mem][ordered]
            m_seq[pos] = s_seq[mem][ordered]
            m_oid[pos] = st.column("oid").to_numpy()[mem][ordered]
            np.add.at(count, slot, 1)
        return qid, k, dele, koff, count, m_d2, m_seq, m_oid, np.isin(qid, snap_ids)

    def _keep(self, qid, k, dele, koff, count, m_d2, m_seq, m_oid, keep) -> None:
        """Headers of every subscription (deleted ones too: a late candidate must still be ignored)
        and the members of live ones; `keep` False for the snapshot queries, answered and done."""
        qid, k, dele, koff, count = qid[keep], k[keep], dele[keep], koff[:-1][keep], count[keep]
        c = np.where(dele == NEVER, count, 0)
        slot = np.repeat(np.arange(len(qid)), c)
        pos = koff[slot] + (np.arange(len(slot)) - np.repeat(np.cumsum(c) - c, c))
        n = len(qid)
        self.state = pa.table({
            "qid": np.r_[qid, qid[slot]], "k": np.r_[k, k[slot]], "del_seq": np.r_[dele, dele[slot]],
            "oid": np.r_[np.full(n, -1, np.int64), m_oid[pos]],
            "seq": np.r_[np.full(n, HEADER, np.int64), m_seq[pos]],
            "d2": np.r_[np.full(n, np.nan), m_d2[pos]],
        }, schema=STATE_SCHEMA)

    def export_state(self) -> pa.Table | None:
        return self.state
