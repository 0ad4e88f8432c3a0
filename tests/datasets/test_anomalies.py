"""Anomalous streams have one meaning everywhere: normalised once (datasets.workloads.anomalies),
then every range strategy through the simulator agrees with the oracle; a user's event file loads
through the same policy and a bad one is rejected naming the column."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datasets.workloads.anomalies import COUNTS, normalise, normalise_prefix
from datasets.workloads.events_file import build_file_workload, read_events
from harness.core.events import AND, DELETE, INSERT, OBJECT, OR, RANGE, Events
from harness.engine.simulate import simulate
from harness.families import registry as families
from harness.families.workload import WorkloadConfig
from strategies import registry
from tests.streams import item_events, random_stream

R = (0.0, 0.0, 10.0, 10.0)


def reference(events: Events) -> tuple[list[int], dict]:
    """The policy as a plain per-event loop: kept rows (in seq order) and counts."""
    state, seen_obj = {}, set()
    counts = dict.fromkeys(COUNTS, 0)
    kept = []
    for i in np.argsort(events.seq, kind="stable"):
        k, q = int(events.kind[i]), int(events.id[i])
        if k == INSERT:
            s = state.get(q, "never")
            if s == "never":
                state[q] = "live"
                kept.append(i)
            else:
                counts["duplicate_inserts" if s == "live" else "reused_ids"] += 1
        elif k == DELETE:
            if state.get(q) == "live":
                state[q] = "dead"
                kept.append(i)
            else:
                counts["orphan_deletes"] += 1
        else:
            if k == OBJECT:
                counts["duplicate_object_ids"] += q in seen_obj
                seen_obj.add(q)
            kept.append(i)
    return kept, counts


def inject(ev: Events, seed: int) -> tuple[Events, dict]:
    """`ev` with one of each anomaly added at random places, and how many of each were added."""
    rng = np.random.default_rng(seed)
    rows = list(range(len(ev)))
    ins = np.flatnonzero(ev.kind == INSERT)
    dele = np.flatnonzero(ev.kind == DELETE)
    added = dict.fromkeys(COUNTS, 0)
    gone = int(rng.choice(dele[1:]))  # a deleted subscription whose id comes back (dele[0] is copied below)
    target = int(rng.choice([i for i in ins[ins > 0] if ev.id[i] != ev.id[gone]]))
    live = [i for i in ins if not np.any(ev.id[dele] == ev.id[i]) and ev.id[i] != ev.id[target]]
    dup = int(rng.choice(live))
    # a delete before the insert of the same id (the insert stays: the id becomes live then)
    rows.insert(int(rng.integers(0, target)), target)
    added["orphan_deletes"] += 1
    # an orphan delete of an id never inserted, at the very start (inside any warm-up)
    rows.insert(0, int(dele[0]))
    added["orphan_deletes"] += 1
    # a duplicate insert of an id while live: right after its own insert
    rows.insert(rows.index(dup) + 1, dup)
    added["duplicate_inserts"] += 1
    # the id of a deleted subscription inserted again later, and a second delete of it
    first_ins = int(ins[ev.id[ins] == ev.id[gone]][0])
    rows.insert(rows.index(gone) + 1, first_ins)
    rows.insert(rows.index(gone) + 2, gone)
    added["reused_ids"] += 1
    added["orphan_deletes"] += 1
    # a repeated object id
    obj = np.flatnonzero(ev.kind == OBJECT)
    rows.append(int(obj[0]))
    added["duplicate_object_ids"] += 1
    out = ev.take(np.array(rows))
    n = len(out)
    out.cols["seq"] = np.arange(n, dtype=np.int64)
    out.cols["ts"] = np.arange(n, dtype=np.float64)
    # the first injected row (the delete before its insert) is a DELETE of the insert's id
    pos = np.flatnonzero(np.array(rows) == target)[0]
    out.cols["kind"][pos] = DELETE
    out.cols["id"][0] = int(ev.id.max()) + 1000  # the orphan at the start names an id never inserted
    # a kept delete carrying another rectangle than its insert: it takes the insert's
    special = (out.id[0], ev.id[target], ev.id[gone])
    kept_del = [p for p in np.flatnonzero(out.kind == DELETE) if out.id[p] not in special]
    moved = int(kept_del[0])
    for c in ("xmin", "xmax", "x"):
        out.cols[c][moved] += 500.0
    added["delete_payloads_filled"] += 1
    return out, added


def test_hand_built_anomalies():
    items = [
        ("q", R, [1], AND, DELETE, 7),  # delete before the insert of id 7: orphan
        ("o", 1, 1, [1]),
        ("q", R, [1], AND, INSERT, 7),  # id 7 live
        ("q", R, [1], AND, INSERT, 7),  # duplicate live insert
        ("q", (50, 50, 60, 60), [2], OR, DELETE, 7),  # id 7 dead; its payload becomes the insert's
        ("q", R, [1], AND, INSERT, 7),  # reuse after delete
        ("q", R, [1], AND, DELETE, 7),  # delete of a dead id: orphan
        ("o", 2, 2, [1]),
    ]
    ev = item_events(items, seq0=100)  # seq gaps from 0: renumbered to positions
    ev.cols["id"][7] = ev.id[1]  # the second object repeats the first one's id
    out, warmup, counts = normalise_prefix(ev, 2)  # warm-up: the orphan delete and the first object
    assert counts == {"orphan_deletes": 2, "duplicate_inserts": 1, "reused_ids": 1, "duplicate_object_ids": 1,
                      "delete_payloads_filled": 1}
    kept = [1, 2, 4, 7]
    assert warmup == 1
    np.testing.assert_array_equal(out.seq, np.arange(len(kept)))
    np.testing.assert_array_equal(out.kind, ev.kind[kept])
    np.testing.assert_array_equal(out.id, ev.id[kept])
    np.testing.assert_array_equal(out.ts, ev.ts[kept])
    for c in ("xmin", "ymin", "xmax", "ymax", "op", "family"):  # the delete carries its insert's payload
        assert out.cols[c][2] == ev.cols[c][2]
    assert out.values[out.offsets[2]:out.offsets[3]].tolist() == [1]
    _, ref_counts = reference(ev)
    assert {k: v for k, v in counts.items() if k != "delete_payloads_filled"} == \
        {k: v for k, v in ref_counts.items() if k != "delete_payloads_filled"}


def test_clean_stream_comes_back_unchanged():
    ev = random_stream(3)
    out, counts = normalise(ev)
    assert out is ev
    assert counts == dict.fromkeys(COUNTS, 0)


def test_unsorted_seq_is_put_in_order():
    ev = random_stream(4)
    shuffled = ev.take(np.random.default_rng(0).permutation(len(ev)))
    out, counts = normalise(shuffled)
    assert counts == dict.fromkeys(COUNTS, 0)
    np.testing.assert_array_equal(out.id, ev.id)
    np.testing.assert_array_equal(out.kind, ev.kind)


@pytest.mark.parametrize("seed", range(6))
def test_matches_reference_loop(seed):
    ev, added = inject(random_stream(seed), seed)
    out, counts = normalise(ev)
    kept, ref_counts = reference(ev)
    assert counts == added
    assert {k: counts[k] for k in COUNTS[:4]} == {k: ref_counts[k] for k in COUNTS[:4]}
    np.testing.assert_array_equal(out.id, ev.id[kept])
    np.testing.assert_array_equal(out.kind, ev.kind[kept])
    again, twice = normalise(out)
    assert again is out  # idempotent; repeated object ids are kept, so found again
    assert twice == {**dict.fromkeys(COUNTS, 0), "duplicate_object_ids": counts["duplicate_object_ids"]}


@pytest.mark.parametrize("strategy", registry.supporting("range"))
def test_every_range_strategy_exact_on_anomalous_stream(strategy):
    ev, added = inject(random_stream(11, n_objects=80, n_queries=30), 11)
    warmup = len(ev) // 4
    res = simulate(ev, warmup, strategy, 3, epoch_events=len(ev) // 5)
    assert res.anomalies == added
    assert res.exact, (strategy, res.digest, res.oracle_digest)


def _file_rows():
    """An event file's rows: (kind name, id, x, y, rect, terms, op)."""
    nan = float("nan")
    return [
        ("insert", 1, nan, nan, (0, 0, 10, 10), [3, 1], "AND"),
        ("object", 1, 5.0, 5.0, (nan,) * 4, [1, 3, 3], None),
        ("delete", 5, nan, nan, (nan,) * 4, [], None),  # orphan
        ("insert", 2, nan, nan, (20, 20, 30, 30), [2], "or"),
        ("object", 2, 25.0, 25.0, (nan,) * 4, [2], None),
        ("delete", 1, nan, nan, (nan,) * 4, [], None),  # payload from its insert
        ("object", 3, 6.0, 6.0, (nan,) * 4, [1, 3], None),
    ]


def _write(path, rows, fmt="parquet", drop=()):
    cols = {
        "kind": [r[0] for r in rows], "id": [r[1] for r in rows], "x": [r[2] for r in rows], "y": [r[3] for r in rows],
        "xmin": [r[4][0] for r in rows], "ymin": [r[4][1] for r in rows], "xmax": [r[4][2] for r in rows],
        "ymax": [r[4][3] for r in rows], "op": [r[6] for r in rows],
        "seq": [10 * (len(rows) - i) for i in range(len(rows))][::-1],  # gaps, increasing
    }
    if fmt == "parquet":
        cols["terms"] = [r[5] for r in rows]
        table = pa.table({k: v for k, v in cols.items() if k not in drop})
        pq.write_table(table, path)
    else:
        cols["terms"] = [" ".join(map(str, r[5])) for r in rows]
        table = pa.table({k: v for k, v in cols.items() if k not in drop})
        import pyarrow.csv as pcsv

        pcsv.write_csv(table, path)
    return path


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_event_file_loads(tmp_path, fmt):
    rows = _file_rows()
    path = _write(tmp_path / f"events.{fmt}", rows, fmt)
    cfg = WorkloadConfig(source="file", path=str(path), warmup_events=3)
    wl = families.get("range").build_workload(None, np.ones(10), (0, 0, 100, 100), cfg, 0)
    kinds = {"object": OBJECT, "insert": INSERT, "delete": DELETE}
    inserted_before = [{q[1] for q in rows[:i] if q[0] == "insert"} for i in range(len(rows))]
    orphans = [i for i, r in enumerate(rows) if r[0] == "delete" and r[1] not in inserted_before[i]]
    kept = [i for i in range(len(rows)) if i not in orphans]
    assert wl.info["orphan_deletes"] == len(orphans)
    assert wl.warmup == 3 - sum(i < 3 for i in orphans)
    ev = wl.events
    np.testing.assert_array_equal(ev.seq, np.arange(len(kept)))
    assert ev.kind.tolist() == [kinds[rows[i][0]] for i in kept]
    assert ev.id.tolist() == [rows[i][1] for i in kept]
    assert ev.family.tolist() == [-1 if rows[i][0] == "object" else RANGE for i in kept]
    for j, i in enumerate(kept):
        src = i if rows[i][0] != "delete" else next(
            k for k, r in enumerate(rows) if r[0] == "insert" and r[1] == rows[i][1])
        assert ev.values[ev.offsets[j]:ev.offsets[j + 1]].tolist() == sorted(set(rows[src][5]))
        if rows[i][0] != "object":
            assert (ev.xmin[j], ev.ymin[j], ev.xmax[j], ev.ymax[j]) == rows[src][4]
            assert ev.x[j] == (rows[src][4][0] + rows[src][4][2]) / 2
            assert ev.op[j] == (OR if str(rows[src][6]).lower() == "or" else AND)


def test_bad_event_files_name_the_column(tmp_path):
    rows = _file_rows()
    bad_kind = [("upsert",) + rows[0][1:]] + rows[1:]
    with pytest.raises(ValueError, match=r"column 'kind' has 'upsert', row 1; allowed: object, insert"):
        read_events(_write(tmp_path / "k.parquet", bad_kind), RANGE)
    with pytest.raises(ValueError, match=r"column 'id' is missing"):
        read_events(_write(tmp_path / "i.parquet", rows, drop=("id",)), RANGE)
    bad_terms = [rows[0][:5] + ([1, "x"],) + rows[0][6:]] + rows[1:]
    with pytest.raises(ValueError, match=r"column 'terms' has 'x', row 1"):
        read_events(_write(tmp_path / "t.csv", bad_terms, "csv"), RANGE)
    no_rect = [rows[0][:4] + ((float("nan"),) * 4,) + rows[0][5:]] + rows[1:]
    with pytest.raises(ValueError, match=r"column 'xmin' has nan, row 1"):
        cfg = WorkloadConfig(source="file", path=str(_write(tmp_path / "r.parquet", no_rect)))
        build_file_workload(None, None, cfg, RANGE, needs=("xmin", "ymin", "xmax", "ymax"))
    with pytest.raises(ValueError, match=r"workload.path="):
        families.get("range").validate_workload(WorkloadConfig(source="file", path=str(tmp_path / "none.parquet")))
