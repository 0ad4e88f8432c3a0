"""Rows gathered into record batches (harness/engine/blocks.py `Rows`): every row arrives, in
order, with its values; a batch leaves once its payloads reach the flush size, the rest on flush."""

from __future__ import annotations

import json

import pyarrow as pa

from harness.engine.blocks import OUT_SCHEMA, RESULT, STATS, Rows, out_row


def test_rows_leave_in_order_with_their_values_in_few_batches():
    rows = Rows(OUT_SCHEMA, flush_bytes=10)
    out = []
    out += rows.out(STATS, 2, 0, info={"busy_s": 0.5}, lane=1)
    assert out == []  # gathered, not sent
    out += rows.out(RESULT, 2, 3, b"123456", family=0, lane=1)
    out += rows.out(RESULT, 2, 1, b"7890abc", family=0, lane=1)  # 13 bytes: the batch leaves
    assert len(out) == 1 and out[0].num_rows == 3
    out += rows.out(RESULT, 4, 0, b"x", family=0, lane=0)
    out += rows.flush()
    assert [b.num_rows for b in out] == [3, 1] and list(rows.flush()) == []
    got = pa.Table.from_batches(out).to_pylist()
    want = pa.Table.from_batches([out_row(STATS, 2, 0, info={"busy_s": 0.5}, lane=1),
                                  out_row(RESULT, 2, 3, b"123456", family=0, lane=1),
                                  out_row(RESULT, 2, 1, b"7890abc", family=0, lane=1),
                                  out_row(RESULT, 4, 0, b"x", family=0, lane=0)]).to_pylist()
    assert got == want and json.loads(got[0]["info"]) == {"busy_s": 0.5}
    assert out[0].schema == OUT_SCHEMA
