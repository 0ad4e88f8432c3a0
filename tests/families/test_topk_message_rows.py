"""The top-k index finds its restored buffers' members in the window (buffers.message_rows) as a
binary search does, whichever way it takes: the table over the seq span (a worker's window holds a
share of the stream, so its seqs are sparse in that span) or the binary search; seqs the window
does not hold, below, inside or past its span, get the binary search's answer too."""

from __future__ import annotations

import numpy as np
import pytest

from harness.families.topk.buffers import message_rows


@pytest.mark.parametrize("density", [1.0, 0.25, 1 / 32, 1 / 5000])
def test_message_rows_are_the_binary_search(density):
    rng = np.random.default_rng(int(1 / density))
    for _ in range(50):
        n = int(rng.integers(0, 400))
        span = max(1, int(n / density))
        m_seq = np.unique(rng.integers(10, 10 + span, n)).astype(np.int64)
        held = m_seq[rng.integers(0, len(m_seq), 80)] if len(m_seq) else np.zeros(0, np.int64)
        other = rng.integers(0, span + 20, 20).astype(np.int64)
        seqs = np.concatenate([held, other])
        assert np.array_equal(message_rows(m_seq, seqs), np.searchsorted(m_seq, seqs))
        assert np.array_equal(message_rows(m_seq, held), np.searchsorted(m_seq, held))
