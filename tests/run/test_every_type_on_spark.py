"""Issue 42, done when: a user's event file holding all six SSTD types, a kNN and a top-k
subscription runs through Spark and equals the oracle, and `harness.export` lists its results in
plain form; the export re-digests to the run's digest (its rows' keys recomputed from the plain
columns), and the run's row names the stream it read."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from harness.export import ExportError, export, main
from harness.report import metrics
from harness.report.results import PROJECT_ROOT, RUN_KEYS
from harness.run.config import register_configs
from harness.run.runner import run_experiment

register_configs()
EXAMPLE = PROJECT_ROOT / "examples" / "events" / "all_types.csv"


@pytest.mark.spark
def test_a_file_of_every_type_equals_the_oracle_on_spark_and_exports(spark, tmp_path, capsys):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        cfg = compose(config_name="config", overrides=[
            "workload=tiny", "dataset.size=4000", "progress=false", "mlflow.enabled=false", f"results_dir={tmp_path}",
            "workload.source=file", f"workload.path={EXAMPLE}", "workload.warmup_events=12", "workload.window=20",
            "strategy=all", "strategy.include=[hash,text_frequency]", "workers=3", "epochs.size=20",
            "keep_pairs=true"])
    rows = run_experiment(cfg)
    assert sorted(r["strategy"] for r in rows) == ["hash", "text_frequency"]
    for r in rows:
        assert r["status"] == "ok", r.get("traceback")
        assert r["family"] == "frequent_terms+knn+range+topk"
        assert r["oracle_ok"] is True and r["result_count"] > 0
        assert r["ctq_reports"] == 6 and r["lifetime_deletes"] == 1
        written = json.loads((Path(r["run_dir"]) / "metrics.json").read_text())  # every key registered
        assert not [k for k in written if k not in RUN_KEYS and not metrics.known(k)]
        stream = Path(r["workload_events"])
        assert r["workload_events_sha256"] == hashlib.sha256(stream.read_bytes()).hexdigest()
        res = export(r["run_dir"])
        assert res["digest"] == r["result_digest"]
        out = Path(res["out"])
        assert set(res["written"]) == {"range", "knn", "topk", "frequent_terms"}
        assert sum(res["written"].values()) == r["result_count"]
        rng, knn = pd.read_csv(out / "range.csv"), pd.read_csv(out / "knn.csv")
        topk, terms = pd.read_csv(out / "topk.csv"), pd.read_csv(out / "frequent_terms.csv")
        assert set(rng.type) == {"crq", "srq"} and set(knn.type) == {"ckq", "skq"}
        assert set(terms.type) == {"ctq", "stq"} and set(terms[terms.type == "ctq"].report) == {1, 2, 3, 4, 5, 6}
        # the CRQ (registered at 10.5, lifetime 40 s) gets only objects that arrived while it lived
        crq = rng[rng.qid == 1]
        assert len(crq) and crq.ts.between(10.5, 50.5, inclusive="left").all()
        # the SKQ answers k = 2 objects at its own time; the SRQ's answers too
        assert len(knn[knn.qid == 11]) == 2 and (knn[knn.qid == 11].ts == 30.5).all()
        assert (rng[rng.qid == 10].ts == 30.5).all()
        # each top-k entry: a score in (0, 1], entered at or after the registration, left after it entered
        assert topk.score.between(0, 1, inclusive="right").all() and (topk.entered_ts >= 10.5).all()
        left = topk.dropna(subset=["left_seq"])
        assert (left.left_seq > left.entered_seq).all() and len(left) > 0  # a window of 20 expires entries
        # at most k = 3 at a time in the subscription's top-k
        events = sorted([(s, 1) for s in topk.entered_seq] + [(s, -1) for s in left.left_seq])
        live = 0
        for _, d in events:
            live += d
            assert live <= 3
    # the command line, one family, Parquet
    assert main([rows[0]["run_dir"], "--family", "frequent_terms", "--format", "parquet", "--out", str(tmp_path / "x")]) == 0
    assert (tmp_path / "x" / "frequent_terms.parquet").is_file() and not (tmp_path / "x" / "range.parquet").exists()
    assert "= the run's result_digest" in capsys.readouterr().out
    # a run whose row says another digest is refused: export and check cannot disagree
    m = Path(rows[0]["run_dir"]) / "metrics.json"
    row = json.loads(m.read_text())
    row["result_digest"] = "1:0000000000000000"
    m.write_text(json.dumps(row))
    with pytest.raises(ExportError, match=r"the kept rows digest to .*, the run's result_digest is 1:0000000000000000"):
        export(rows[0]["run_dir"])
