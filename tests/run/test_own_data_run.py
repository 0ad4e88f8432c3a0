"""Issue 52, parts 3 to 6 on the run side: a researcher's own file from the command to readable rows.

- part 3: every refusal the docs promise before Spark (docs/workloads.md: an event file's row
  rules and its snapshot regions against the space; README: bad configuration; configuration.md:
  a user file's checks) is made by the real entry point, `run_experiment`, in a fresh process that
  ends with no Spark session or context ever created;
- part 4: an event-file run prepares no generated data set (no dataset cache is written);
- part 5: the end of a run names the runs table, the run folder and the export command, and the
  command it prints exports;
- part 6: the export gives the user's ids and words: an event file's ids, a file dataset's
  dataset.id_col values (each object's location is that row's), the dataset's words for term ids.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from harness.export import main as export_main
from harness.report.results import PROJECT_ROOT
from harness.report.table import where_lines
from harness.run.app import report_end
from harness.run.runner import run_experiment
from tests.run.test_config import composed

EXAMPLE = PROJECT_ROOT / "examples" / "events" / "all_types.csv"
MINI = PROJECT_ROOT / "tests" / "data" / "tweets_mini.csv"
# the docs' header-less example (tests/datasets/test_own_data.py reads it from the page)
FILE_DATASET = ("dataset=file", f"dataset.path={MINI}", "dataset.header=false", "dataset.id_col=0", "dataset.ts_col=1",
                "dataset.lat_col=2", "dataset.lon_col=3", "dataset.text_col=5", "dataset.text_rest_of_line=true")
EVENTS = ("workload=tiny", "workload.source=file", "workload.warmup_events=12", "workload.window=20")
QUIET = ("progress=false", "mlflow.enabled=false")


def _edited(tmp_path, name: str, rid: int, kind: str, **changes) -> Path:
    """The all-types example with the query `rid` of `kind` changed (a column set to None is dropped
    from that row; a new column name is added to the file)."""
    t = pcsv.read_csv(EXAMPLE, convert_options=pcsv.ConvertOptions(column_types={"terms": pa.string()})).to_pylist()
    at = next(i for i, r in enumerate(t) if r["id"] == rid and r["kind"] == kind)
    t[at].update(changes)
    for r in t:
        for c in changes:
            r.setdefault(c, None)
    path = tmp_path / f"{name}.csv"
    pcsv.write_csv(pa.Table.from_pylist(t), path)
    return path


REFUSALS_SCRIPT = r"""
import json, sys
from harness.run.config import ConfigError, register_configs
from harness.run.runner import run_experiment
from tests.run.test_config import composed

register_configs()
out = {}
for name, overrides in json.loads(sys.argv[1]).items():
    try:
        run_experiment(composed(*overrides))
        out[name] = None
    except ConfigError as exc:
        out[name] = str(exc)
from pyspark import SparkContext
from pyspark.sql import SparkSession
from harness.run import spark
out["_no_spark"] = [spark._SESSION is None, SparkSession.getActiveSession() is None,
                    SparkContext._active_spark_context is None, SparkContext._gateway is None]
print(json.dumps(out))
"""


def test_every_refusal_the_docs_promise_comes_before_spark(tmp_path):
    """Part 3: each case through run_experiment (validate first, then Spark), in one fresh process."""
    far = dict(xmin=1000.0, ymin=1000.0, xmax=1010.0, ymax=1010.0)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    base = (*QUIET, f"results_dir={tmp_path / 'results'}", "strategy=hash")

    def events(path, *more):
        return [*base, *EVENTS, f"workload.path={path}", *more]

    cases = {  # name -> (overrides, what the one-line refusal says)
        "srq outside the space": (events(_edited(tmp_path, "srq", 10, "snapshot", **far)),
                                  r"snapshot query 10 \(seq \d+\) has region=\(1000.0, 1000.0, 1010.0, 1010.0\); "
                                  r"allowed: a rectangle meeting the space"),
        "stq outside the space": (events(_edited(tmp_path, "stq", 12, "snapshot", **far)),
                                  r"snapshot query 12 .* allowed: a rectangle meeting the space"),
        "ctq outside the space": (events(_edited(tmp_path, "ctq", 3, "insert", **far)),
                                  r"CTQ 3 .* has region=.* allowed: a rectangle meeting the space"),
        "skq short of the objects": (events(_edited(tmp_path, "skq", 11, "snapshot", xmin=0.0, ymin=0.0, xmax=10.0,
                                                    ymax=10.0)),
                                     r"column 'xmin/ymin/xmax/ymax' .* allowed: a rectangle covering every object"),
        "srq without look-back": (events(_edited(tmp_path, "tau", 10, "snapshot", tau=None)),
                                  r"column 'tau' has nan, row \d+; allowed: a finite value for every range snapshot"),
        "ctq step over its window": (events(_edited(tmp_path, "step", 3, "insert", step=50.0)),
                                     r"column 'step' has 50.0, row \d+; allowed: at most the CTQ's window"),
        "top-k alpha": (events(_edited(tmp_path, "alpha", 4, "insert", alpha=1.5)),
                        r"column 'alpha' has 1.5, .*strictly between 0 and 1"),
        "top-k lifetime": (events(_edited(tmp_path, "topk_tau", 4, "insert", tau=5.0)),
                           r"column 'tau' has 5.0, .*empty for a top-k insert"),
        "unknown column": (events(_edited(tmp_path, "col", 10, "snapshot", radius=3.0)),
                           r"column 'radius' is missing or unknown; allowed: one of id, kind"),
        "no events file": (events(tmp_path / "nothing.csv"), r"workload.path=.* allowed: an existing Parquet or CSV"),
        "file dataset column": ([*base, *FILE_DATASET, "dataset.text_col=9"],
                                r"dataset.text_col='9' is position 9 but the file has 6 fields"),
        "text not last": ([*base, *FILE_DATASET, "dataset.text_col=4"],
                          r"allowed with dataset.text_rest_of_line=true: the last field"),
        "empty file": ([*base, "dataset=file", f"dataset.path={empty}"], r"dataset.path=.*empty"),
        "workers": ([*base, "workers=0"], r"workers=0 is invalid; allowed: an integer >= 1"),
    }
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    done = subprocess.run([sys.executable, "-c", REFUSALS_SCRIPT, json.dumps({k: v[0] for k, v in cases.items()})],
                          capture_output=True, text=True, cwd=PROJECT_ROOT, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    for name, (_, said) in cases.items():
        assert out[name] is not None, f"{name}: not refused"
        assert "\n" not in out[name] and re.search(said, out[name]), (name, out[name])
    assert out["_no_spark"] == [True, True, True, True]
    assert not (tmp_path / "results" / "runs").exists()  # refused before any run began


def test_the_example_file_still_passes(tmp_path):
    """The checks refuse what breaks a rule, not the docs' own example."""
    from harness.run.config import validate

    validate(composed(*QUIET, *EVENTS, f"workload.path={EXAMPLE}", "strategy=hash"))


def test_where_lines_name_the_table_the_folders_and_the_command(tmp_path):
    """Part 5: once for a table of several runs; the command names a run folder."""
    runs = tmp_path / "runs"
    rows = [{"run_id": f"r{i}", "strategy": s, "variant": s, "run_dir": str(runs / f"r{i}")}
            for i, s in enumerate(["grid", "hash"])]
    lines = where_lines(rows, tmp_path / "runs.parquet", keep_pairs=False)
    assert len(lines) == 2
    assert f"the runs table {tmp_path / 'runs.parquet'}" in lines[0] and "grid r0, hash r1" in lines[0]
    assert f"run folders: {runs}/<run_id>" in lines[0]
    assert lines[1] == (f"readable rows: run again with keep_pairs=true (it keeps every result), then "
                        f"python -m harness.export {runs}/<run_id>")
    one = where_lines(rows[:1], tmp_path / "runs.parquet", keep_pairs=True)
    assert one[1] == f"readable rows: python -m harness.export {runs / 'r0'} (one CSV per query family, in its export/ folder)"


def _export_by_the_printed_command(out: str) -> Path:
    """Runs the export command the end of a run printed; returns its folder."""
    command = re.search(r"readable rows: (python -m harness\.export \S+)", out).group(1)
    args = shlex.split(command)[3:]
    assert export_main(args) == 0
    return Path(args[0]) / "export"


@pytest.mark.spark
def test_an_event_file_run_prepares_only_the_file_and_ends_saying_where(spark, tmp_path, capsys):
    """Parts 4, 5 and 6 for an event file over the default (generated) dataset: no dataset is
    prepared, the run equals the oracle, its end names where its results are and how to export
    them, and the printed command exports the file's own object ids."""
    cfg = composed(*QUIET, f"results_dir={tmp_path}", *EVENTS, f"workload.path={EXAMPLE}", "strategy=hash",
                   "workers=2", "epochs.size=20", "keep_pairs=true")
    assert cfg.dataset.name == "synthetic"
    rows = run_experiment(cfg)
    assert [r["status"] for r in rows] == ["ok"] and rows[0]["oracle_ok"] is True, rows[0].get("traceback")
    assert not (tmp_path / "cache" / "datasets").exists()  # nothing generated
    assert rows[0]["dataset_cache"] is None
    capsys.readouterr()
    report_end(rows, cfg)
    out = capsys.readouterr().out
    run_dir = rows[0]["run_dir"]
    assert f"the runs table {tmp_path / 'runs.parquet'}" in out and rows[0]["run_id"] in out
    assert f"run folder: {run_dir}" in out
    table = pq.read_table(tmp_path / "runs.parquet").to_pandas()
    assert run_dir in set(table.run_dir)
    folder = _export_by_the_printed_command(out)
    rng = pd.read_csv(folder / "range.csv")
    assert list(rng.columns[:3]) == ["qid", "object", "object_id"] and (rng.object_id == rng.object).all()
    assert "word" not in pd.read_csv(folder / "frequent_terms.csv").columns  # the file gives ids, not words


@pytest.mark.spark
def test_a_file_dataset_run_exports_its_ids_and_words(spark, tmp_path):
    """Part 6: a workload generated over the user's file exports each object by its id in the file
    (the object's location is that row's); an event file over the same dataset exports the
    dataset's words beside its term ids."""
    cfg = composed(*QUIET, f"results_dir={tmp_path}", "workload=tiny", *FILE_DATASET, "strategy=hash", "workers=2",
                   "keep_pairs=true")
    rows = run_experiment(cfg)
    assert rows[0]["status"] == "ok" and rows[0]["oracle_ok"] is True, rows[0].get("traceback")
    assert export_main([rows[0]["run_dir"]]) == 0
    rng = pd.read_csv(Path(rows[0]["run_dir"]) / "export" / "range.csv", dtype={"object_id": str})
    assert len(rng)
    # the file's rows by id, and the stream's objects' locations
    lines = MINI.read_bytes().removeprefix(b"\xef\xbb\xbf").decode("utf-8", errors="replace").splitlines()
    by_id = {f[0]: (float(f[3]), float(f[2])) for f in (ln.split(",") for ln in lines) if len(f) >= 6}
    stream = pq.read_table(rows[0]["workload_events"], columns=["kind", "id", "x", "y"]).to_pandas()
    objects = pq.read_table(Path(rows[0]["dataset_cache"]) / "objects.parquet").to_pandas()
    assert set(rng.object_id) <= set(by_id)
    for obj, source in zip(rng.object, rng.object_id):
        row = objects.iloc[obj % len(objects)]  # the dataset row the generator took object obj from
        assert (row.lon, row.lat) == by_id[source]
        ev = stream[(stream.kind == 0) & (stream.id == obj)].iloc[0]
        assert (ev.x, ev.y) == pytest.approx((row.x, row.y))

    cfg = composed(*QUIET, f"results_dir={tmp_path}", *EVENTS, f"workload.path={EXAMPLE}", *FILE_DATASET,
                   "strategy=hash", "workers=2", "epochs.size=20", "keep_pairs=true")
    rows = run_experiment(cfg)
    assert rows[0]["status"] == "ok" and rows[0]["oracle_ok"] is True, rows[0].get("traceback")
    assert export_main([rows[0]["run_dir"]]) == 0
    terms = pd.read_csv(Path(rows[0]["run_dir"]) / "export" / "frequent_terms.csv")
    vocab = dict(pq.read_table(Path(rows[0]["dataset_cache"]) / "vocab.parquet").to_pandas()[["term_id", "term"]]
                 .itertuples(index=False))
    assert len(terms) and list(terms.word) == [vocab[t] for t in terms.term]
    knn = pd.read_csv(Path(rows[0]["run_dir"]) / "export" / "knn.csv")
    assert (knn.object_id == knn.object).all()  # an event file's objects carry their own ids
