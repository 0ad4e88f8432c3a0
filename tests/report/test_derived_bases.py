"""Derived bases (harness/report/claims/bases.py, issue 51 part 4): a throughput claim is judged on a
derived basis only where its runs have the basis's figure; without any figure every verdict, table
and report is what the compute and network bases alone give; a claim that holds on a derived
basis and does not hold on compute is listed as that basis's finding, and only then."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.report import claims
from harness.report.claims import bases
from harness.report.claims import report as claims_report
from harness.report.claims import verdict_diff


def _row(preset, variant, eps, lo, hi, workers=8):
    return {"run_id": f"{preset}-{variant}-{workers}", "variant": variant, "strategy": variant, "status": "ok",
            "dataset": "synthetic", "workload": "q1", "workers": workers, "experiment": preset,
            "started_at": "2026-01-01", "x": None, "facet": None, "throughput_eps": eps,
            "throughput_compute_eps": eps, "throughput_compute_eps_ci_lo": lo, "throughput_compute_eps_ci_hi": hi,
            "throughput_network_eps": eps, "throughput_network_eps_ci_lo": eps, "throughput_network_eps_ci_hi": eps,
            "oracle_ok": True, "too_short": 0.0, "code_version": "v1"}


def _table() -> pd.DataFrame:
    """Preset p: a 90 [88-92] vs b 100 [98-102] on compute (a loses); preset q: a beats b."""
    return pd.DataFrame([_row("p", "a", 90.0, 88.0, 92.0), _row("p", "b", 100.0, 98.0, 102.0),
                         _row("q", "a", 120.0, 118.0, 122.0), _row("q", "b", 100.0, 98.0, 102.0)])


def _claims():
    def one(cid, preset):
        return {"id": cid, "paper": "ps2stream", "claim": "a beats b", "preset": preset, "source": "Fig. 1",
                "check": {"kind": "better", "metric": "throughput_eps", "subject": "a", "others": ["b"]}}
    return claims.load_claims_from([one("on-p", "p"), one("on-q", "q")])


def _fake(values: dict[str, float]):
    """A derived basis giving `values` (run_id -> events/s) as points."""
    return bases.DerivedBasis("fake", lambda runs, workers, root: pd.Series(values), "a test basis",
                              "the result follows from the fake model")


@pytest.fixture
def only_fake(monkeypatch):
    monkeypatch.setattr(bases, "REGISTRY", {})
    return lambda values: monkeypatch.setitem(bases.REGISTRY, "fake", _fake(values))


def test_without_a_derived_figure_the_verdicts_and_tables_are_the_two_bases_alone(monkeypatch):
    table = _table()
    registered = claims.evaluate_all(table, claims=_claims())  # the registry as shipped: no count run here
    monkeypatch.setattr(bases, "REGISTRY", {})
    bare = claims.evaluate_all(table, claims=_claims())
    for with_, without in zip(registered, bare):
        assert list(with_.verdicts) == ["compute", "network"] == list(without.verdicts)
        assert {b: v.verdict for b, v in with_.verdicts.items()} == {b: v.verdict for b, v in without.verdicts.items()}
        assert with_.derived == [] and with_.findings == []
    assert claims_report.claims_table(registered) == claims_report.claims_table(bare)
    assert claims_report.tally_table(registered) == claims_report.tally_table(bare)
    assert claims_report.derived_note(registered) == []
    assert bases.attach(table) is table  # no figure: the very table


def test_a_claim_gains_a_derived_verdict_only_where_its_runs_have_the_figure(only_fake):
    only_fake({"p-a-8": 150.0, "p-b-8": 100.0})  # p's runs only
    table = bases.attach(_table())
    assert bases.column("fake") in table
    assert table[bases.column("fake")].isna().sum() == 2
    on_p, on_q = (claims.evaluate_both(c, table) for c in _claims())
    assert on_p.derived == ["fake"] and on_p.verdicts["fake"].verdict == "holds"
    assert "(model output)" in on_p.verdicts["fake"].comparisons[0]
    assert on_q.derived == [] and "fake" not in on_q.verdicts
    # the table shows the column when one claim has it; a claim without it reads "-"
    lines = claims_report.claims_table([on_p, on_q])
    assert lines[0].count("| fake |") == 1
    assert "| **holds** (finding) |" in lines[2] and "| - |" in lines[3]
    assert "| fake |" not in claims_report.claims_table([on_q])[0]
    tally = claims_report.tally_table([on_p, on_q])
    assert any("| fake | 1 | 0 |" in line and line.endswith("| 1 |") for line in tally)


def test_the_finding_lists_the_claims_that_hold_derived_and_fail_on_compute(only_fake):
    only_fake({"p-a-8": 150.0, "p-b-8": 100.0, "q-a-8": 150.0, "q-b-8": 100.0})
    results = claims.evaluate_all(_table(), claims=_claims())
    by_id = {r.claim["id"]: r for r in results}
    assert by_id["on-p"].on("compute").kind == "does not hold" and by_id["on-p"].findings == ["fake"]
    assert by_id["on-q"].on("compute").kind == "holds" and by_id["on-q"].findings == []  # holds on both: no finding
    assert [(r.claim["id"], b) for r, b in claims.findings(results)] == [("on-p", "fake")]
    note = "\n".join(claims_report.derived_note(results))
    assert "`on-p`" in note and "`on-q`" not in note and "the result follows from the fake model" in note


def test_no_finding_when_the_derived_basis_fails_too(only_fake):
    only_fake({"p-a-8": 80.0, "p-b-8": 100.0})
    (on_p, _) = claims.evaluate_all(_table(), claims=_claims())
    assert on_p.verdicts["fake"].kind == "does not hold" and on_p.findings == []
    assert claims.findings([on_p]) == []


def test_a_derived_basis_with_a_band_is_compared_beyond_it(only_fake, monkeypatch):
    band = pd.DataFrame({"value": [105.0, 100.0], "lo": [95.0, 90.0], "hi": [115.0, 110.0],
                         "note": ["from a test", "from a test"]}, index=["p-a-8", "p-b-8"])
    monkeypatch.setitem(bases.REGISTRY, "fake", bases.DerivedBasis("fake", lambda r, w, root: band, "t", "f"))
    on_p = claims.evaluate_all(_table(), claims=_claims())[0]
    assert on_p.verdicts["fake"].kind == "inconclusive"  # the bands overlap
    assert any(n == "fake: from a test" for n in on_p.verdicts["fake"].comparisons)


def test_the_record_diff_reads_and_shows_a_derived_column(only_fake, tmp_path):
    only_fake({"p-a-8": 150.0, "p-b-8": 100.0})
    results = claims.evaluate_all(_table(), claims=_claims())
    path = tmp_path / "report.md"
    path.write_text("\n".join(["# Reproduction record", "", *claims_report.claims_table(results), ""]))
    before = verdict_diff.read_record(path)
    assert before["on-p"].derived == {"fake": "holds"} and before["on-q"].derived == {}
    assert before["on-p"].compute == "does not hold"
    only_fake({"p-a-8": 50.0, "p-b-8": 100.0})
    frame = verdict_diff.diff(before, _table(), claims=_claims()).set_index("claim")
    assert frame.loc["on-p", "after_fake"] == "does not hold" and frame.loc["on-p", "moved"] == "fake"
    assert frame.loc["on-q", "after_fake"] == "-"
    text = "\n".join(verdict_diff.markdown(frame.reset_index()))
    assert "fake: before -> after" in text and "holds -> **does not hold**" in text


def test_a_basis_name_and_answer_are_checked():
    with pytest.raises(ValueError, match="derived basis name 'compute'"):
        bases.register("compute", lambda r, w, root: pd.Series(dtype=float), "t", "f")
    with pytest.raises(ValueError, match="allowed: a Series"):
        bases._frame([1.0], "x")


def test_a_claim_fitted_on_by_a_basis_or_of_a_paper_it_has_no_model_for_is_not_judged_on_it(monkeypatch):
    """A calibrated model fitted on a claim's own published figures would hold it by construction:
    the claim names the basis in `fitted_by` and gets no verdict there. A basis that speaks for some
    papers only (`claims`) judges no claim of another paper."""
    monkeypatch.setattr(bases, "REGISTRY", {})
    values = {"p-a-8": 200.0, "p-b-8": 100.0, "q-a-8": 200.0, "q-b-8": 100.0}
    monkeypatch.setitem(bases.REGISTRY, "fake", _fake(values))
    raw = [{"id": cid, "paper": paper, "claim": "a beats b", "preset": "p", "source": "Fig. 1",
            "check": {"kind": "better", "metric": "throughput_eps", "subject": "a", "others": ["b"]}, **extra}
           for cid, paper, extra in (("free", "ps2stream", {}),
                                     ("fitted", "ps2stream", {"fitted_by": {"fake": "its figures were fitted"}}),
                                     ("other-paper", "tornado", {}))]
    results = {r.claim["id"]: r for r in claims.evaluate_all(_table(), claims=claims.load_claims_from(raw))}
    assert "fake" in results["free"].verdicts and "fake" not in results["fitted"].verdicts
    assert "fake" in results["other-paper"].verdicts  # no `claims` filter: every paper
    monkeypatch.setitem(bases.REGISTRY, "fake", bases.DerivedBasis(
        "fake", lambda runs, workers, root: pd.Series(values), "a test basis", "f",
        claims=lambda claim: claim["paper"] == "ps2stream"))
    results = {r.claim["id"]: r for r in claims.evaluate_all(_table(), claims=claims.load_claims_from(raw))}
    assert "fake" in results["free"].verdicts and "fake" not in results["other-paper"].verdicts
    with pytest.raises(ValueError, match="fitted_by=.* is invalid"):
        claims.load_claims_from([{**raw[0], "fitted_by": {"fake": ""}}])
    with pytest.raises(ValueError, match="fitted_by=.* is invalid; allowed: a mapping from a derived basis"):
        claims.load_claims_from([{**raw[0], "fitted_by": {"no_such_basis": "a reason"}}])


def test_the_calibrated_basis_judges_only_the_papers_it_has_constants_for():
    """The shipped registry: the calibrated basis speaks for the papers of the committed constants
    table, and not for Tornado's or DSkype's claims (too few absolute figures to fit)."""
    fitted = set(bases.calibration.basis.load_constants()["paper"])
    assert fitted and not {"tornado", "dskype"} & fitted
    for paper in ("tornado", "dskype"):
        assert not bases.judges("calibrated", {"paper": paper})
    for paper in fitted:
        assert bases.judges("calibrated", {"paper": paper})
