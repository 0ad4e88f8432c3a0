"""Issue 42: an event file of every query type. Each type's rules are refused naming the row and
the field, before Spark (the family's validate_workload reads the file); what the generators
derive (CTQ reports, lifetimes, routing rectangles, the top-k window) is derived from a file the
same way, whatever the workload's family; the example files run exact in process."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pytest

from harness.core.events import DELETE, INSERT, KNN, OBJECT, RANGE, SNAPSHOT, TERMS, TOPK
from harness.engine.simulate import simulate
from harness.families import registry as families
from harness.families.workload import WorkloadConfig
from harness.report.results import PROJECT_ROOT

EXAMPLES = PROJECT_ROOT / "examples" / "events"
EXTENT = (-10.0, -10.0, 110.0, 110.0)


def _file(tmp_path, query: dict, at: int = 5, n: int = 20, name="e.csv"):
    """n objects on a line, `query` as file row at + 1 (1-based, the header not counted)."""
    rows = [dict(ts=float(i), kind="object", id=i, x=float(5 * i), y=float(5 * i), terms="1 2") for i in range(n)]
    rows.insert(at, {"ts": at - 0.5, **query})
    cols = ("ts", "kind", "family", "id", "x", "y", "xmin", "ymin", "xmax", "ymax", "terms", "op", "k", "alpha",
            "tau", "win", "step")
    types = {c: pa.float64() for c in ("x", "y", "xmin", "ymin", "xmax", "ymax", "alpha", "tau", "win", "step")}
    types.update(ts=pa.float64(), id=pa.int64(), k=pa.int64(), kind=pa.string(), family=pa.string(),
                 terms=pa.string(), op=pa.string())
    table = pa.table({c: pa.array([r.get(c) for r in rows], types[c]) for c in cols})
    pcsv.write_csv(table, tmp_path / name)
    return tmp_path / name


def _cfg(path, family="range", **kw):
    return WorkloadConfig(family=family, source="file", path=str(path), warmup_events=3, **kw)


RECT = dict(xmin=0.0, ymin=0.0, xmax=50.0, ymax=50.0)
REFUSALS = [
    ("frequent_terms", dict(kind="insert", family="frequent_terms", id=1, k=3, step=5.0, tau=30.0, **RECT),
     r"column 'win' has nan, row 6; allowed: a finite value for every frequent_terms insert \(CTQ\)"),
    ("frequent_terms", dict(kind="insert", family="frequent_terms", id=1, k=3, win=5.0, step=10.0, tau=30.0, **RECT),
     r"column 'step' has 10.0, row 6; allowed: at most the CTQ's window win=5.0"),
    ("frequent_terms", dict(kind="snapshot", family="frequent_terms", id=1, k=3, tau=30.0, terms="1 2", **RECT),
     r"column 'terms' has \[1, 2\], row 6; allowed: none: a frequent_terms snapshot \(STQ\) counts every term"),
    ("frequent_terms", dict(kind="snapshot", family="frequent_terms", id=1, k=3, tau=30.0, step=1.0, **RECT),
     r"column 'step' has 1.0, row 6; allowed: empty on a frequent_terms snapshot \(STQ\): a CTQ's reports are derived"),
    ("range", dict(kind="snapshot", family="frequent_terms", id=1, tau=30.0, **RECT),
     r"column 'k' is missing or unknown, row 6; allowed: an integer >= 1 for every frequent_terms snapshot \(STQ\)"),
    ("topk", dict(kind="insert", family="topk", id=1, x=3.0, y=4.0, k=3, alpha=0.5, terms="1", tau=9.0),
     r"column 'tau' has 9.0, row 6; allowed: empty for a top-k insert: its window is workload.window"),
    ("topk", dict(kind="insert", family="topk", id=1, x=3.0, y=4.0, k=3, alpha=1.0, terms="1"),
     r"column 'alpha' has 1.0, row 6; allowed: a number strictly between 0 and 1"),
    ("topk", dict(kind="insert", family="topk", id=1, x=3.0, y=4.0, k=3, terms="1"),
     r"column 'alpha' has nan, row 6"),
    ("topk", dict(kind="snapshot", family="topk", id=1, x=3.0, y=4.0, k=3, alpha=0.5, terms="1", tau=3.0),
     r"column 'kind' has 'snapshot', row 6; allowed: insert or delete \(top-k subscriptions have no snapshot"),
    ("knn", dict(kind="snapshot", family="knn", id=1, x=3.0, y=4.0, k=3, terms="1", tau=30.0, **RECT),
     r"column 'xmin/ymin/xmax/ymax' has \(0.0, 0.0, 50.0, 50.0\), row 6; allowed: a rectangle covering every "
     r"object of the file \(0.0, 0.0, 95.0, 95.0\)"),
    ("knn", dict(kind="insert", family="knn", id=1, x=3.0, y=4.0, k=0, terms="1"),
     r"column 'k' has 0, row 6; allowed: an integer >= 1 for every kNN insert \(CKQ\)"),
    ("range", dict(kind="insert", family="knn", id=1, x=3.0, y=4.0, k=2),
     r"column 'terms' has \[\], row 6; allowed: at least one keyword for every kNN insert \(CKQ\)"),
    ("range", dict(kind="insert", family="range", id=1, terms="1", tau=-1.0, **RECT),
     r"column 'tau' has -1.0, row 6; allowed: a number of seconds > 0"),
    ("range", dict(kind="insert", family="range", id=1, terms="1", win=3.0, **RECT),
     r"column 'win' has 3.0, row 6; allowed: empty for a range insert \(CRQ\)"),
    ("range", dict(kind="snapshot", family="range", id=1, terms="1", **RECT),
     r"column 'tau' has nan, row 6; allowed: a finite value for every range snapshot \(SRQ\)"),
]


@pytest.mark.parametrize("family,query,message", REFUSALS)
def test_each_type_rule_is_refused_in_validation_naming_row_and_field(tmp_path, family, query, message):
    path = _file(tmp_path, query)
    with pytest.raises(ValueError, match=message):
        families.get(family).validate_workload(_cfg(path, family))  # what run/config.validate calls, before Spark


def test_a_ctq_in_a_file_of_another_family_reports(tmp_path):
    """The CTQ-in-a-file bug: its report events are derived whichever family builds the workload."""
    path = _file(tmp_path, dict(kind="insert", family="frequent_terms", id=1, k=2, win=4.0, step=2.0, tau=10.0, **RECT))
    for family in ("range", "frequent_terms"):
        wl = families.get(family).build_workload(None, np.ones(4), EXTENT, _cfg(path, family), 0)
        ev = wl.events
        reports = np.flatnonzero((ev.kind == SNAPSHOT) & (ev.family == TERMS))
        # registered at 4.5, lifetime 10 s, a report every 2 s: 6.5, 8.5, ..., 14.5
        assert ev.ts[reports].tolist() == [6.5, 8.5, 10.5, 12.5, 14.5]
        assert ev.step[reports].tolist() == [1, 2, 3, 4, 5]
        assert wl.info["ctq_reports"] == 5
        for r in reports:  # after every event of its time or earlier
            assert (ev.ts[:r] <= ev.ts[r]).all() and (ev.ts[r + 1:] > ev.ts[r]).all()


def test_tau_on_a_continuous_insert_is_its_lifetime(tmp_path):
    path = _file(tmp_path, dict(kind="insert", family="range", id=1, terms="1", tau=6.0, **RECT))
    wl = families.get("range").build_workload(None, np.ones(4), EXTENT, _cfg(path), 0)
    ev = wl.events
    d = np.flatnonzero(ev.kind == DELETE)
    assert len(d) == 1 and ev.id[d[0]] == 1 and ev.ts[d[0]] == 4.5 + 6.0
    # alive on [4.5, 10.5): the delete comes ahead of the object of time 10.5... there is none; before 11
    assert ev.ts[d[0] - 1] == 10.0 and ev.ts[d[0] + 1] == 11.0
    assert wl.info["lifetime_deletes"] == 1
    # an earlier delete in the file wins: no derived one
    path = _file(tmp_path, dict(kind="insert", family="range", id=1, terms="1", tau=60.0, **RECT), name="long.csv")
    wl = families.get("range").build_workload(None, np.ones(4), EXTENT, _cfg(path), 0)
    assert wl.info["lifetime_deletes"] == 0 and not (wl.events.kind == DELETE).any()


def test_knn_and_topk_inserts_under_another_family_need_no_rectangle(tmp_path):
    """sstd_mix's family is range: a kNN insert with a point, k and a keyword suffices (README)."""
    path = _file(tmp_path, dict(kind="insert", family="knn", id=1, x=3.0, y=4.0, k=2, terms="1", op="or"))
    wl = families.get("range").build_workload(None, np.ones(4), EXTENT, _cfg(path), 0)
    ins = np.flatnonzero(wl.events.kind == INSERT)
    assert wl.events.family[ins].tolist() == [KNN]
    assert (wl.events.xmin[ins], wl.events.xmax[ins]) == (EXTENT[0], EXTENT[2])


def test_a_topk_file_gets_the_generators_window(tmp_path):
    path = _file(tmp_path, dict(kind="insert", family="topk", id=1, x=3.0, y=4.0, k=2, alpha=0.4, terms="1"))
    wl = families.get("topk").build_workload(None, np.ones(4), EXTENT, _cfg(path, "topk", window=5), 0)
    ev = wl.events
    obj = np.flatnonzero(ev.kind == OBJECT)
    assert ev.win[obj[:-5]].tolist() == obj[5:].astype(float).tolist()  # object i leaves when object i + 5 arrives
    assert np.isnan(ev.win[obj[-5:]]).all()
    q = np.flatnonzero(ev.family == TOPK)
    assert ev.win[q].tolist() == [5.0] and ev.op[q].tolist() == [1]


@pytest.mark.parametrize("name,family", [("range", "range"), ("knn", "knn"), ("frequent_terms", "frequent_terms"), ("topk", "topk"),
                                         ("all_types", "range"), ("all_types", "topk")])
def test_the_example_files_run_exact_in_process(name, family):
    cfg = _cfg(EXAMPLES / f"{name}.csv", family, window=20)
    cfg.warmup_events = 12
    families.get(family).validate_workload(cfg)
    wl = families.get(family).build_workload(None, np.ones(10), EXTENT, cfg, 0)
    res = simulate(wl.events, wl.warmup, "hash", 3, epoch_events=20)
    assert res.exact and res.digest.split(":")[0] != "0"


def test_the_parquet_example_is_the_csv_one():
    a = families.get("range").build_workload(None, np.ones(10), EXTENT, _cfg(EXAMPLES / "all_types.csv"), 0)
    b = families.get("range").build_workload(None, np.ones(10), EXTENT, _cfg(EXAMPLES / "all_types.parquet"), 0)
    for c in ("kind", "family", "id", "ts", "k", "win", "step"):
        assert np.array_equal(a.events.cols[c], b.events.cols[c], equal_nan=True)
    assert RANGE in a.events.family


def test_a_stream_cached_under_the_older_reading_is_not_reused():
    """The cache key of a file workload names how the file is read, so a stream cached before the
    issue-42 derivations (no CTQ reports under another family, tau ignored) is built again."""
    from datasets.workloads.events_file import READING
    from harness.run.workload_cache import workload_key

    key = workload_key(_cfg(EXAMPLES / "all_types.csv"))
    assert key["file"]["reading"] == READING >= 2
