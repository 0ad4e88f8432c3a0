"""The top-k index restores its buffers table into the epoch's arena (buffers.restored_arena) as
the numpy passes it replaced did: regions, lengths, thetas and members equal, each member's message
row np.searchsorted's, whether the window's seqs are dense or sparse in their span (a table or a
binary search) and whether a member's seq is in the window or not."""

from __future__ import annotations

import numpy as np
import pytest

from harness.families.topk.buffers import HEADER, restored_arena
from harness.families.topk.skyband import DEPTH


def plain_arena(qid, mseq, score, dom, sub_id, s_k, m_seq):
    """The numpy passes of TopkIndex._arena before it was compiled (message rows by binary search)."""
    n = len(sub_id)
    b_len, theta = np.zeros(n, np.int64), np.zeros(n)
    order = np.argsort(sub_id, kind="stable")
    heads = np.flatnonzero(np.concatenate(([True], qid[1:] != qid[:-1]))) if len(qid) else np.zeros(0, np.int64)
    at = order[np.minimum(np.searchsorted(sub_id[order], qid[heads]), max(n - 1, 0))] if n else qid[heads]
    slot = np.repeat(at, np.diff(np.concatenate((heads, [len(qid)]))))
    head = mseq == HEADER
    theta[slot[head]] = score[head]
    mem = ~head
    np.add.at(b_len, slot[mem], 1)
    b_cap = np.where(b_len > 0, np.maximum(2 * b_len, 2 * s_k), 0)
    b_off = (np.cumsum(b_cap) - b_cap).astype(np.int64)
    size = int(b_cap.sum())
    room = size + size // 2 + DEPTH * int(s_k.max(initial=1)) * max(n - int((b_len > 0).sum()), 16)
    a_msg, a_score, a_dom = np.empty(room, np.int64), np.empty(room), np.empty(room, np.int64)
    if mem.any():
        q = slot[mem]
        first = np.concatenate(([0], np.flatnonzero(q[1:] != q[:-1]) + 1))
        rank = np.arange(len(q)) - np.repeat(first, np.diff(np.concatenate((first, [len(q)]))))
        where = b_off[q] + rank
        a_msg[where] = np.searchsorted(m_seq, mseq[mem])
        a_score[where], a_dom[where] = score[mem], dom[mem]
    return b_off, b_cap, b_len, theta, a_msg, a_score, a_dom


@pytest.mark.parametrize("density", [1.0, 0.25, 1 / 32, 1 / 5000])
def test_the_restored_arena_is_the_numpy_passes(density):
    rng = np.random.default_rng(int(1 / density))
    for _ in range(40):
        n_msg = int(rng.integers(0, 400))
        span = max(1, int(n_msg / density))
        m_seq = np.unique(rng.integers(10, 10 + span, n_msg)).astype(np.int64)
        n_sub = int(rng.integers(1, 60))
        sub_id = rng.choice(10 * n_sub, n_sub, replace=False).astype(np.int64)  # not sorted: slots by position
        s_k = rng.integers(1, 6, n_sub).astype(np.int64)
        held = np.sort(rng.choice(sub_id, int(rng.integers(0, n_sub + 1)), replace=False))
        qid, mseq, score, dom = [], [], [], []
        for q in held:  # a header row, then the members in rank order (seqs held by the window or not)
            members = int(rng.integers(0, 9))
            seqs = np.where(rng.random(members) < 0.8, rng.choice(m_seq, members) if len(m_seq) else 0,
                            rng.integers(0, span + 20, members))
            qid += [q] * (members + 1)
            mseq += [HEADER] + seqs.tolist()
            score += [float(rng.random())] + sorted(rng.random(members).tolist(), reverse=True)
            dom += [-1] + rng.integers(0, 5, members).tolist()
        qid, mseq = np.array(qid, np.int64), np.array(mseq, np.int64)
        score, dom = np.array(score, np.float64), np.array(dom, np.int32)
        got = restored_arena(qid, mseq, score, dom, sub_id, s_k, m_seq, DEPTH)
        want = plain_arena(qid, mseq, score, dom, sub_id, s_k, m_seq)
        for a, b in zip(got[:4], want[:4]):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        b_off, _, b_len = want[:3]
        used = np.concatenate([np.arange(o, o + k) for o, k in zip(b_off, b_len)] + [np.zeros(0, np.int64)])
        assert len(got[4]) == len(want[4]) and np.any(b_len > 0) == (len(used) > 0)
        for a, b in zip(got[4:], want[4:]):
            assert a.dtype == b.dtype and np.array_equal(a[used], b[used])
