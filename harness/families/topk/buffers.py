"""The top-k worker's result buffers: one arena, each subscription a region of it, and what keeps
them readable.

A subscription's buffer (skyband.py) is a region of the arena holding its members in rank order
(score desc, seq desc) with their dominance counters; its top-k is the region's first k members.
Messages are indexed in seq order, so a buffer's oldest member is its smallest index, and the FIFO
window expires a buffer's members oldest first: per message, the subscriptions whose oldest member
it is form a linked list (`oldest_lists`), and an expiry visits exactly the buffers it leaves.

Before a seq changes a top-k, the top-k is snapshotted; at the seq's end each touched subscription's
top-k is diffed against its snapshot (`emit_changes`): the rows the worker emits. Between epochs
the buffers travel as a table (RESULT_SCHEMA: a header row with theta, then the members).

The growing kernels are kept apart from the loops that use the arrays: a reallocation inside a
loop makes numba count references on every pass of it.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numba import njit

from harness.core.events import Events
from harness.families.topk.skyband import grown

# a subscription's buffer between epochs: a header row (mseq = HEADER, score = its theta), then its
# members in rank order with their dominance counters
RESULT_SCHEMA = pa.schema([("qid", pa.int64()), ("mseq", pa.int64()), ("score", pa.float64()), ("dom", pa.int32())])
HEADER = -1


@njit(cache=True, inline="always")
def oldest(a_msg, o, n):
    """A buffer's oldest member (-1 when empty): messages are indexed in seq order, so the smallest
    index. The FIFO window expires a buffer's members oldest first, so an expiring message is in a
    buffer only if it is that buffer's oldest."""
    out = -1
    for r in range(n):
        if out < 0 or a_msg[o + r] < out:
            out = a_msg[o + r]
    return out


@njit(cache=True)
def buffer_oldest(b_off, b_len, a_msg):
    out = np.empty(len(b_off), np.int64)
    for s in range(len(b_off)):
        out[s] = oldest(a_msg, b_off[s], b_len[s])
    return out


@njit(cache=True)
def oldest_lists(b_old, n_msg):
    """Message -> the subscriptions whose oldest buffer member it is, as doubly linked lists (head
    per message, next and previous per subscription): an expiry visits exactly the buffers it
    leaves instead of every subscription sharing one of its keywords."""
    head = np.full(n_msg, -1, np.int64)
    nxt = np.full(len(b_old), -1, np.int64)
    prv = np.full(len(b_old), -1, np.int64)
    for s in range(len(b_old)):
        if b_old[s] >= 0:
            _link(s, b_old[s], head, nxt, prv)
    return head, nxt, prv


@njit(cache=True, inline="always")
def _link(s, m, head, nxt, prv):
    nxt[s], prv[s] = head[m], -1
    if head[m] >= 0:
        prv[head[m]] = s
    head[m] = s


@njit(cache=True)
def set_oldest(s, m, b_old, head, nxt, prv):
    """s's oldest member is now message m (-1: its buffer is empty); its list follows."""
    if b_old[s] == m:
        return
    if b_old[s] >= 0:
        if prv[s] >= 0:
            nxt[prv[s]] = nxt[s]
        else:
            head[b_old[s]] = nxt[s]
        if nxt[s] >= 0:
            prv[nxt[s]] = prv[s]
    b_old[s] = m
    if m >= 0:
        _link(s, m, head, nxt, prv)


@njit(cache=True, inline="always")
def snap(s, kk, o, a_msg, a_score, touched, snap_off, snap_msg, snap_score, n_touch):
    """Keep s's top-k (its buffer's first kk members from arena offset o) as it was before this
    seq's changes, for the diff at the seq's end, in arrays with room; returns the count."""
    for u in range(kk):
        snap_msg[snap_off[n_touch] + u] = a_msg[o + u]
        snap_score[snap_off[n_touch] + u] = a_score[o + u]
    touched[n_touch] = s
    snap_off[n_touch + 1] = snap_off[n_touch] + kk
    return n_touch + 1


@njit(cache=True)
def snap_growing(s, kk, o, a_msg, a_score, touched, snap_off, snap_msg, snap_score, n_touch):
    """`_snap`, growing the arrays first; returns them and the count."""
    if n_touch + 1 >= len(touched):
        touched = grown(touched, n_touch + 2)
        snap_off = grown(snap_off, n_touch + 3)
    if snap_off[n_touch] + kk > len(snap_msg):
        snap_msg = grown(snap_msg, snap_off[n_touch] + kk)
        snap_score = grown(snap_score, snap_off[n_touch] + kk)
    n_touch = snap(s, kk, o, a_msg, a_score, touched, snap_off, snap_msg, snap_score, n_touch)
    return touched, snap_off, snap_msg, snap_score, n_touch


@njit(cache=True)
def snap_room(n, subs, s_k, touched, snap_off, snap_msg, snap_score, n_touch):
    """The snapshot arrays grown, once, to hold a snapshot of k for each of subs[:n]."""
    need_s = snap_off[n_touch]
    for c in range(n):
        need_s += s_k[subs[c]]
    if n_touch + n + 2 > len(touched):
        touched, snap_off = grown(touched, n_touch + n + 2), grown(snap_off, n_touch + n + 3)
    if need_s > len(snap_msg):
        snap_msg, snap_score = grown(snap_msg, need_s), grown(snap_score, need_s)
    return touched, snap_off, snap_msg, snap_score


@njit(cache=True)
def room_for(n_cand, cand, s_k, b_cap, b_len, a_msg, a_score, a_dom, a_used, touched, snap_off, snap_msg, snap_score,
             n_touch):
    """The arena and snapshot arrays grown, once, to hold every candidate's worst case: a region
    moved to the arena's end (at most max(2 cap, len + 1, 2k)) and a snapshot of k."""
    need_a = a_used
    for c in range(n_cand):
        s = cand[c]
        need_a += max(2 * b_cap[s], b_len[s] + 1, 2 * s_k[s])
    if need_a > len(a_msg):
        a_msg, a_score, a_dom = grown(a_msg, need_a), grown(a_score, need_a), grown(a_dom, need_a)
    touched, snap_off, snap_msg, snap_score = snap_room(n_cand, cand, s_k, touched, snap_off, snap_msg, snap_score,
                                                        n_touch)
    return a_msg, a_score, a_dom, touched, snap_off, snap_msg, snap_score


@njit(cache=True)
def emit_changes(t, n_touch, touched, snap_off, snap_msg, snap_score, s_k, b_off, b_len, a_msg, a_score, m_mark, mark,
                 o_slot, o_trig, o_msg, o_score, o_delta, n_out):
    """Each touched subscription's top-k against its snapshot: the members that left (-1, in the
    snapshot's order), then those that entered (+1, in rank order). Membership by a mark per
    message (two per subscription), so a diff costs O(k), not O(k^2); the output arrays have room."""
    for u in range(n_touch):
        s = touched[u]
        o = b_off[s]
        kk = min(s_k[s], b_len[s])
        lo_, hi_ = snap_off[u], snap_off[u + 1]
        mark += 1
        for v in range(kk):
            m_mark[a_msg[o + v]] = mark
        for r in range(lo_, hi_):
            if m_mark[snap_msg[r]] != mark:
                o_slot[n_out], o_trig[n_out], o_msg[n_out] = s, t, snap_msg[r]
                o_score[n_out], o_delta[n_out] = snap_score[r], -1
                n_out += 1
        mark += 1
        for r in range(lo_, hi_):
            m_mark[snap_msg[r]] = mark
        for v in range(kk):
            if m_mark[a_msg[o + v]] != mark:
                o_slot[n_out], o_trig[n_out], o_msg[n_out] = s, t, a_msg[o + v]
                o_score[n_out], o_delta[n_out] = a_score[o + v], 1
                n_out += 1
    return n_out, mark


@njit(cache=True)
def kept_rows(slots, s_id, bufs, arena, m_seq):
    """The buffers' table columns, slot by slot in one pass: a header row (mseq HEADER, theta, dom
    -1), then the buffer's members. Written out because a dozen numpy passes over every buffered
    row (5M at 156k subscriptions, |W| = 1M) took 0.6 s of each epoch."""
    b_off, b_len, theta = bufs.off, bufs.size, bufs.theta
    a_msg, a_score, a_dom = arena
    n = 0
    for s in slots:
        n += b_len[s] + 1
    qid, mseq = np.empty(n, np.int64), np.empty(n, np.int64)
    score, dom = np.empty(n), np.empty(n, np.int32)
    r = 0
    for s in slots:
        qid[r], mseq[r], score[r], dom[r] = s_id[s], HEADER, theta[s], -1
        r += 1
        o = b_off[s]
        for u in range(b_len[s]):
            qid[r], mseq[r], score[r], dom[r] = s_id[s], m_seq[a_msg[o + u]], a_score[o + u], a_dom[o + u]
            r += 1
    return qid, mseq, score, dom


@njit(cache=True)
def restored_arena(qid, mseq, score, dom, sub_id, s_k, m_seq, depth):
    """The buffers table (rows by query: a header row with theta, then the members in rank order)
    as the epoch's arena (index.TopkIndex._arena): per subscription slot its region's offset and
    capacity (twice its members, at least 2k; none without members), its length and theta, and
    the arena's members (message row, score, dominance counter) with room past the regions. A row's
    query is found once per run of rows (sub_id searched as np.searchsorted over its stable
    argsort, clamped to the last), a member's message as np.searchsorted(m_seq, seq) gives it.
    Written out because some twenty numpy passes over the table's rows (48k a worker at 20,000
    subscriptions) were about a tenth of a keyword-partitioned worker's busy time (issue 50)."""
    n = len(sub_id)
    rows = len(qid)
    if n == 0 and rows:
        raise IndexError("top-k buffers restored for subscriptions the worker does not hold")
    b_len = np.zeros(n, np.int64)
    theta = np.zeros(n)
    order = np.argsort(sub_id, kind="mergesort")
    ids = sub_id[order]
    slot = np.empty(rows, np.int64)
    for r in range(rows):
        if r > 0 and qid[r] == qid[r - 1]:
            slot[r] = slot[r - 1]
        else:
            slot[r] = order[min(np.searchsorted(ids, qid[r]), n - 1)]
    for r in range(rows):
        if mseq[r] == HEADER:
            theta[slot[r]] = score[r]
        else:
            b_len[slot[r]] += 1
    b_cap = np.zeros(n, np.int64)
    b_off = np.zeros(n, np.int64)
    size = 0
    empty = 0
    k_max = 1
    for s in range(n):
        if b_len[s] > 0:
            b_cap[s] = max(2 * b_len[s], 2 * s_k[s])
        else:
            empty += 1
        b_off[s] = size
        size += b_cap[s]
        k_max = max(k_max, s_k[s])
    # room past the regions for the epoch's relocations and new subscriptions: growing a full
    # arena copies every buffer (at 156k subscriptions, 0.2 s on the first relocation of an epoch)
    room = size + size // 2 + depth * k_max * max(empty, 16)
    a_msg, a_score, a_dom = np.empty(room, np.int64), np.empty(room), np.empty(room, np.int64)
    # a member's message row through a table over the window's seq span unless that is far wider
    # than the rows (a worker's window is a sparse share of the stream: a binary search of every
    # row was a third of the epoch kernel's time, ADR-0123), a binary search for a seq it lacks
    lo = m_seq[0] if len(m_seq) else 0
    span = m_seq[-1] - lo + 1 if len(m_seq) else 0
    table = np.full(span if span <= 64 * (len(m_seq) + rows) + 65536 else 0, -1, np.int64)
    if len(table):
        for i in range(len(m_seq)):
            table[m_seq[i] - lo] = i
    prev = -1
    rank = 0
    for r in range(rows):  # members by query, in rank order
        if mseq[r] == HEADER:
            continue
        rank = rank + 1 if slot[r] == prev else 0
        prev = slot[r]
        at = b_off[slot[r]] + rank
        v = mseq[r] - lo
        row = table[v] if 0 <= v < len(table) else -1
        a_msg[at] = row if row >= 0 else np.searchsorted(m_seq, mseq[r])
        a_score[at], a_dom[at] = score[r], dom[r]
    return b_off, b_cap, b_len, theta, a_msg, a_score, a_dom


def top_rows(buffers: pa.Table, subs: Events) -> pa.Table:
    """The top-k members (the first k buffer rows of each query; headers left out)."""
    qid, mseq = buffers.column("qid").to_numpy(), buffers.column("mseq").to_numpy()
    mem = np.flatnonzero(mseq != HEADER)
    if len(mem) == 0:
        return RESULT_SCHEMA.empty_table()
    q = qid[mem]
    first = np.concatenate(([0], np.flatnonzero(q[1:] != q[:-1]) + 1))
    rank = np.arange(len(q)) - np.repeat(first, np.diff(np.concatenate((first, [len(q)]))))
    k = subs.k[np.argsort(subs.id, kind="stable")][np.searchsorted(np.sort(subs.id), q)]
    return buffers.take(pa.array(mem[rank < k]))
