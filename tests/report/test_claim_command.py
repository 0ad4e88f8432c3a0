"""`python -m harness.report.claims`: a claim's verdict printed from a runs table, and an unknown id
refused with what is allowed."""

from __future__ import annotations

from harness.report import claims, results
from harness.report.claims import __main__ as claim


def test_a_claim_prints_its_verdict_on_both_bases_and_an_unknown_id_is_refused(tmp_path, capsys):
    c = next(c for c in claims.load_claims() if c["check"]["metric"] == "throughput_eps" and not c.get("retired"))
    results.append_runs_table(tmp_path, [{"run_id": "r0", "status": "ok", "strategy": "x", "experiment": "elsewhere",
                                          "started_at": "2026-01-01"}])
    assert claim.main([c["id"], "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"### {c['id']}" in out and "- compute: **not measured**" in out and "- network: **not measured**" in out
    assert claim.main(["no-such-claim", "--results", str(tmp_path)]) == 2
    assert "unknown claim id(s): no-such-claim; allowed: an id of conf/claims.yaml" in capsys.readouterr().err
