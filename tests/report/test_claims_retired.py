"""Retired claims (`retired: <reason>` in conf/claims.yaml): not evaluated, reported as "retired" with
their reason, and outside every tally (the overview's, the per-paper tables', the site's); a
retired field without a reason is refused when the claims load."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.report import claims
from harness.report.claims import report as claims_report
from harness.report.results import RUNS_TABLE_COLUMNS
from harness.report.site.data import tally_groups
from harness.report.site.html import _tally


def _claim(cid: str, **extra) -> dict:
    return {"id": cid, "paper": "dskype", "claim": "a beats b", "preset": "p",
            "check": {"kind": "better", "metric": "stored_replication", "subject": "a", "others": ["b"]}, **extra}


def _table() -> pd.DataFrame:
    rows = [{"variant": v, "strategy": v, "status": "ok", "dataset": "synthetic", "workload": "topk_q",
             "workers": 32, "started_at": "2026-01-01", "experiment": "p", "stored_replication": r}
            for v, r in (("a", 1.5), ("b", 3.0))]
    return pd.DataFrame(rows).reindex(columns=RUNS_TABLE_COLUMNS)


REASON = "a cluster against a 2-core PC, not a same-machine ratio"


def test_a_retired_claim_reports_its_reason_and_is_not_evaluated():
    live, gone = claims.load_claims_from([_claim("live"), _claim("gone", retired=REASON)])
    results = [claims.evaluate_both(c, _table()) for c in (live, gone)]
    assert results[0].on("compute").verdict == "holds"  # the same runs would make it hold
    v = results[1].on("compute")
    assert v.verdict == claims.RETIRED and v.comparisons == [f"retired: {REASON}"] and not v.runs
    row = next(line for line in claims_report.claims_table(results) if "`gone`" in line)
    assert "*(retired)*" in row and "**retired**" in row and REASON in row


def test_retired_claims_are_left_out_of_every_tally():
    cs = claims.load_claims_from([_claim("live"), _claim("gone", retired=REASON), _claim("also", retired=REASON)])
    results = [claims.evaluate_both(c, _table()) for c in cs]
    for basis in claims.BASES:
        counts = claims.tally(results, basis)
        assert sum(counts.values()) == 1 and counts["holds"] == 1
        assert _tally(results, basis) == counts
    assert [len(g) for _, _, g in tally_groups(results)] == [1]
    rows = [line for line in claims_report.tally_table(results) if line.startswith("| Skype")]
    assert rows and all(line.rstrip(" |").endswith("| 1") for line in rows)  # claims counted: the live one


@pytest.mark.parametrize("bad", ["", "  ", True, 3])
def test_a_retired_field_without_a_reason_is_refused(bad):
    with pytest.raises(ValueError, match=r"claim 'x': retired=.* is invalid; allowed: the reason"):
        claims.load_claims_from([_claim("x", retired=bad)])


def test_the_centralised_speedup_claim_is_retired_with_its_reason():
    c = next(c for c in claims.load_claims() if c["id"] == "dskype-sec82-speedup-over-centralised")
    assert "same-machine" in c["retired"] and "2-core" in c["retired"]
