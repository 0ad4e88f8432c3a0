"""The record diff (harness/report/claims/verdict_diff.py): the verdicts a record's report.md printed, read
back from the claims table the record writer produces, beside the verdicts of a new runs table;
a claim moves when its verdict's kind changes on either basis."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.report import claims
from harness.report.claims import report as claims_report
from harness.report.claims import verdict_diff
from harness.report.results import RUNS_TABLE_COLUMNS


def _claim(cid: str, metric: str = "stored_replication") -> dict:
    return {"id": cid, "paper": "sstd", "claim": "a | beats b", "preset": "p", "source": "Fig. 1",
            "check": {"kind": "better", "metric": metric, "subject": "a", "others": ["b"]}}


def _table(a: float, b: float) -> pd.DataFrame:
    rows = [{"variant": v, "strategy": v, "status": "ok", "dataset": "synthetic", "workload": "sts_q1",
             "workers": 8, "started_at": "2026-01-01", "experiment": "p", "stored_replication": r,
             "throughput_compute_eps": r, "throughput_network_eps": r}
            for v, r in (("a", a), ("b", b))]
    return pd.DataFrame(rows).reindex(columns=RUNS_TABLE_COLUMNS)


def _record(tmp_path, cs: list[dict], table: pd.DataFrame):
    """A report.md as the record writer prints it (its claims table), from `table`'s verdicts."""
    rows = [claims.evaluate_both(c, table) for c in cs]
    path = tmp_path / "report.md"
    path.write_text("\n".join(["# Reproduction record", "", *claims_report.claims_table(rows), ""]))
    return path


def test_the_record_reads_back_the_verdicts_its_writer_printed(tmp_path):
    cs = claims.load_claims_from([_claim("lower-replication"), _claim("more-throughput", "throughput_eps")])
    before = verdict_diff.read_record(_record(tmp_path, cs, _table(1.0, 2.0)))
    assert before["lower-replication"].compute == before["lower-replication"].network == "holds"
    assert before["more-throughput"].compute == before["more-throughput"].network == "does not hold"


def test_a_claim_moves_when_its_verdict_changes_kind_and_stays_otherwise(tmp_path):
    cs = claims.load_claims_from([_claim("lower-replication"), _claim("more-throughput", "throughput_eps"),
                                  _claim("brand-new")])
    before = verdict_diff.read_record(_record(tmp_path, cs[:2], _table(1.0, 2.0)))
    frame = verdict_diff.diff(before, _table(3.0, 2.0), claims=cs).set_index("claim")
    assert frame.loc["lower-replication", "after_compute"] == "does not hold"
    assert frame.loc["lower-replication", "moved"] == "compute, network"
    assert frame.loc["more-throughput", "after_network"] == "holds"
    assert frame.loc["more-throughput", "moved"] == "compute, network"
    assert frame.loc["brand-new", "before_compute"] == "(new)"
    same = verdict_diff.diff(before, _table(1.0, 2.0), claims=cs[:2])
    assert (same["moved"] == "").all()
    text = "\n".join(verdict_diff.markdown(frame.reset_index()))
    assert "### Verdicts that moved (3)" in text and "holds -> **does not hold**" in text


def test_a_file_without_a_claims_table_is_refused(tmp_path):
    path = tmp_path / "notes.md"
    path.write_text("# Notes\n\nno table here\n")
    with pytest.raises(ValueError, match="no claims table found"):
        verdict_diff.read_record(path)
