"""The top-k merger against a brute force that shares no code with it: replicas keep their own
local top-k of the messages they received within a sliding window, report each change as a +1 or
-1 at its seq, and the merger, fed those changes epoch by epoch with its state carried between
epochs, must report exactly the entries into and exits from the global top-k (the k best live
messages any replica received) at every seq. Ties in score are frequent on purpose (ranked by
message seq), and several replicas often hold the same message, so the union's counts, the
pass that starts at the first member a seq changes and stops early, and the slide over dropped
members are all exercised."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.events import INSERT, Events
from harness.families.topk.merge import HEADER, TopkMerger, pack, state_members


def local_top(msgs: list[tuple[float, int]], k: int) -> set[int]:
    """The k best (score, seq) of a replica's live messages, as seqs."""
    return {seq for _, seq in sorted(msgs, reverse=True)[:k]}


def simulate(seed: int, n_queries: int, n_replicas: int, n_msgs: int, window: int, n_scores: int):
    """Per query: its k, each replica's changes (qid, trigger, mseq, oid, delta, score) in seq
    order, and the expected entries and exits as sets of (qid, oid, seq)."""
    rng = np.random.default_rng(seed)
    ks = rng.integers(1, 5, n_queries)
    changes = [[] for _ in range(n_replicas)]
    entries, exits = set(), set()
    for q in range(n_queries):
        score = rng.integers(0, n_scores, n_msgs) / n_scores  # few distinct scores: many ties
        got = rng.random((n_msgs, n_replicas)) < 0.6  # which replicas receive each message
        before_local = [set() for _ in range(n_replicas)]
        before_global: set[int] = set()
        for t in range(n_msgs):
            live = [m for m in range(max(0, t - window + 1), t + 1)]
            for r in range(n_replicas):
                now = local_top([(score[m], m) for m in live if got[m, r]], int(ks[q]))
                for m in sorted(now - before_local[r]):
                    changes[r].append((q, t, m, 1000 + m, 1, score[m]))
                for m in sorted(before_local[r] - now):
                    changes[r].append((q, t, m, 1000 + m, -1, score[m]))
                before_local[r] = now
            now_global = local_top([(score[m], m) for m in live if got[m].any()], int(ks[q]))
            entries |= {(q, 1000 + m, t) for m in now_global - before_global}
            exits |= {(q, 1000 + m, t) for m in before_global - now_global}
            before_global = now_global
    return ks, changes, entries, exits


def blob(rows: list[tuple]) -> bytes:
    cols = dict(zip(("qid", "trigger", "mseq", "oid", "delta", "score"), map(np.array, zip(*rows))))
    return pack(cols, np.arange(len(rows)))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n_queries=st.integers(1, 3), n_replicas=st.integers(1, 4),
       n_msgs=st.integers(1, 40), window=st.integers(1, 12), n_scores=st.integers(1, 6), n_epochs=st.integers(1, 4))
def test_merger_reports_the_global_topk_changes(seed, n_queries, n_replicas, n_msgs, window, n_scores, n_epochs):
    ks, changes, want_entries, want_exits = simulate(seed, n_queries, n_replicas, n_msgs, window, n_scores)
    queries = Events({"kind": np.full(n_queries, INSERT, np.int8), "id": np.arange(n_queries, dtype=np.int64),
                      "seq": np.full(n_queries, -1, np.int64), "k": ks.astype(np.int32)},
                     np.zeros(n_queries + 1, np.int64), np.zeros(0, np.int32))
    cuts = np.linspace(0, n_msgs, n_epochs + 1).astype(int)
    merger, state = TopkMerger(), None
    got_entries, got_exits = set(), set()
    for e in range(n_epochs):
        merger.restore(state)
        mine = [[c for c in rows if cuts[e] <= c[1] < cuts[e + 1]] for rows in changes]
        blobs = [blob(rows) for rows in mine if rows]  # one per replica that changed, as workers send
        out = merger.merge(blobs, queries if e == 0 else None)
        # the bound replay's arrays are allocated at (merge.replay's docstring): each at most the changes
        n_changes = sum(len(rows) for rows in mine)
        assert out.rows.num_rows <= n_changes and out.exits.num_rows <= n_changes
        got_entries |= set(zip(*(out.rows.column(c).to_pylist() for c in ("qid", "item", "seq"))))
        got_exits |= set(zip(*(out.exits.column(c).to_pylist() for c in ("qid", "item", "seq"))))
        state = merger.export_state()
        assert isinstance(state, pa.Table)
    assert got_entries == want_entries
    assert got_exits == want_exits


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 30), st.integers(0, 200), st.booleans(), st.booleans())
def test_state_members_are_each_querys_rows(seed, n_queries, n_members, headers_first, sorted_members):
    """The members' offsets per query slot equal the formula over every member's slot
    (np.searchsorted(np.searchsorted(qid, member qids), arange)), headers first or mixed in, members
    by query (as merge writes them) or not, some of unknown queries."""
    rng = np.random.default_rng(seed)
    qid = np.unique(rng.integers(0, 60, n_queries))
    m_qid = rng.integers(0, 64, n_members)
    if sorted_members:
        m_qid = np.sort(m_qid)
    st_qid = np.concatenate((qid, m_qid))
    st_mseq = np.concatenate((np.full(len(qid), HEADER), rng.integers(0, 1_000, n_members)))
    if not headers_first:
        perm = rng.permutation(len(st_qid))
        st_qid, st_mseq = st_qid[perm], st_mseq[perm]
    mem, s_off = state_members(st_mseq, st_qid, qid)
    mask = st_mseq != HEADER
    assert np.array_equal(np.arange(len(st_qid))[mem], np.flatnonzero(mask))
    want = np.searchsorted(np.searchsorted(qid, st_qid[mask]), np.arange(len(qid) + 1))
    assert np.array_equal(s_off, want)
