"""The calibrated basis (harness/report/calibration/, issue 51 part 3): the fit recovers known
constants from synthetic counts, keeps them non-negative, refuses more constants than fit figures,
never lets a held-out figure into the fit, checks the declaration with errors naming field, value
and what is allowed, and turns a runs + workers table into calibrated throughputs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from harness.report.calibration import calibrate_all, calibrated_throughput
from harness.report.calibration import __main__ as cli
from harness.report.calibration.declaration import DECLARATION_FILE, DeclarationError, Figure, load, parse
from harness.report.calibration.fit import FitFigure, calibrate, fit_constants, predict
from harness.report.calibration.vectors import Block, block_from_counts

TERMS2 = ("messages", "candidates")


def _block(rng, workers=4, windows=1, units=1000.0, scale=(1000.0, 50000.0)) -> Block:
    """Random per-worker counts of messages and candidates (the other terms zero)."""
    x = np.zeros((windows, workers, 5))
    x[:, :, 0] = rng.uniform(0.2, 1.0, (windows, workers)) * scale[0]
    x[:, :, 1] = rng.uniform(0.05, 1.0, (windows, workers)) * scale[1]
    return Block(x, np.zeros_like(x), units, {})


def _fig(i, role="fit", measure="throughput", value=1.0, unit=None, over=None) -> Figure:
    unit = unit or {"throughput": "tuples/s", "latency": "ms", "throughput_ratio": "ratio"}.get(measure, "ms")
    return Figure(f"f{i}", role, measure, value, unit, "x.txt l.1", "r", f"s{i}", over)


def _published(blocks, c, measure="throughput", role="fit"):
    """FitFigures whose published value is what constants c predict (exactly)."""
    out = []
    for i, b in enumerate(blocks):
        ff = FitFigure(_fig(i, role, measure), b)
        out.append(FitFigure(_fig(i, role, measure, value=predict(ff, c, TERMS2)), b))
    return out


@pytest.mark.parametrize("measure", ["throughput", "latency"])
def test_the_fit_recovers_known_constants_from_synthetic_counts(measure):
    rng = np.random.default_rng(3)
    c_true = np.array([2e-6, 4e-8])  # 2 us a message, 40 ns a candidate check
    blocks = [_block(rng) for _ in range(5)]
    rows = _published(blocks, c_true, measure)
    c = fit_constants(rows, TERMS2)
    assert np.allclose(c, c_true, rtol=1e-6), (c, c_true)
    for ff in rows:  # and then predicts its own figures exactly
        assert predict(ff, c, TERMS2) == pytest.approx(ff.figure.value, rel=1e-6)


def test_the_fit_finds_the_busiest_worker_under_the_fitted_constants():
    # worker 0 has the most messages, worker 1 the most candidates: which is busiest depends on c
    x = np.zeros((1, 2, 5))
    x[0, 0, :2] = [1000, 1000]
    x[0, 1, :2] = [100, 100000]
    b = Block(x, np.zeros_like(x), 1000.0, {})
    rng = np.random.default_rng(5)
    c_true = np.array([1e-6, 1e-7])  # worker 1 busiest: 1e-4 + 1e-2 > 1e-3 + 1e-4
    rows = _published([b] + [_block(rng) for _ in range(3)], c_true)
    c = fit_constants(rows, TERMS2)
    assert np.allclose(c, c_true, rtol=1e-6)


def test_constants_stay_non_negative_where_least_squares_would_go_negative():
    rng = np.random.default_rng(7)
    blocks = [_block(rng, workers=1) for _ in range(4)]
    # figures a negative per-candidate cost would fit best: time falls as candidates grow
    rows = []
    for i, b in enumerate(blocks):
        s = (b.x[0, 0, 0] * 1e-6 - b.x[0, 0, 1] * 1e-9) / b.units
        rows.append(FitFigure(_fig(i, value=1.0 / s), b))
    lsq = np.linalg.lstsq(np.array([b.x[0, 0, :2] / b.units * ff.figure.value for b, ff in zip(blocks, rows)]),
                          np.ones(4), rcond=None)[0]
    assert (lsq < 0).any()  # the unconstrained fit does go negative here
    c = fit_constants(rows, TERMS2)
    assert (c >= 0).all()


def test_a_model_with_more_constants_than_fit_figures_is_refused():
    rng = np.random.default_rng(1)
    rows = _published([_block(rng)], np.array([1e-6, 1e-8]))
    with pytest.raises(ValueError, match="2 constants for 1 fit figure.*at most 1 terms"):
        fit_constants(rows, TERMS2)
    doc = _declaration()
    doc["calibration"]["ps2stream"]["terms"] = ["messages", "candidates", "results"]
    with pytest.raises(DeclarationError, match=r"refused: 3 free constants for 2 fit figure\(s\); allowed: at most"):
        parse(doc)


def test_held_out_figures_never_enter_the_fit():
    rng = np.random.default_rng(11)
    c_true = np.array([3e-6, 2e-8])
    fit_rows = _published([_block(rng) for _ in range(3)], c_true)
    sane = _published([_block(rng)], c_true, role="heldout")
    # a held-out figure far off the model: were it fitted on, the constants would move
    absurd = [FitFigure(_fig(9, "heldout", value=sane[0].figure.value * 1000), sane[0].block)]
    a = calibrate("p", TERMS2, fit_rows, sane, bootstrap=0)
    b = calibrate("p", TERMS2, fit_rows, absurd, bootstrap=0)
    assert np.array_equal(a.constants, b.constants)
    assert np.allclose(a.constants, c_true, rtol=1e-6)
    held = [r for r in b.figures if r["role"] == "heldout"]
    assert held[0]["rel_error"] == pytest.approx(1 / 1000 - 1, rel=1e-6)  # the error is reported, not fitted away
    with pytest.raises(ValueError, match="role='heldout' cannot be fitted on; allowed: fit"):
        fit_constants(fit_rows + sane, TERMS2)


def test_intervals_leave_one_out_when_over_determined_and_sampling_from_the_errors():
    rng = np.random.default_rng(13)
    c_true = np.array([1e-6, 5e-8])
    blocks = [_block(rng) for _ in range(4)]
    for b in blocks:
        b.se[:, :, 1] = 0.05 * b.x[:, :, 1]  # 5% standard error on the candidates
    rows = _published(blocks, c_true)
    held = _published([_block(rng)], c_true, role="heldout")
    f = calibrate("p", TERMS2, rows, held, bootstrap=50)
    assert f.loo is not None and f.loo.shape == (2, 2)
    assert (f.sampling[0] <= f.constants + 1e-15).all() and (f.constants <= f.sampling[1] + 1e-15).all()
    assert f.sampling[1, 1] > f.sampling[0, 1]  # the candidates' error widens c_candidates' interval
    exact = calibrate("p", TERMS2, rows[:2], held, bootstrap=0)
    assert exact.loo is None  # two figures, two constants: nothing to leave out


def test_a_throughput_ratio_is_predicted_from_both_strategies():
    rng = np.random.default_rng(17)
    a, b = _block(rng), _block(rng)
    c = np.array([1e-6, 1e-8])
    ff = FitFigure(_fig(0, "heldout", "throughput_ratio", 1.3, over="s1"), a, b)
    want = predict(FitFigure(_fig(0), a), c, TERMS2) / predict(FitFigure(_fig(1), b), c, TERMS2)
    assert predict(ff, c, TERMS2) == pytest.approx(want)


# ------------------------------------------------------------------------------ the declaration


def _declaration() -> dict:
    return {"calibration": {
        "ps2stream": {"status": "calibrated", "terms": ["messages", "candidates"], "why": "l.318",
                      "runs": {"q1": {"overrides": "workload=sts_q1", "gap": "small"}},
                      "figures": [
                          {"id": "a", "role": "fit", "measure": "throughput", "value": 100.0, "unit": "tuples/s",
                           "line": "ps2stream.txt l.318", "run": "q1", "strategy": "grid"},
                          {"id": "b", "role": "fit", "measure": "throughput", "value": 50.0, "unit": "tuples/s",
                           "line": "ps2stream.txt l.318", "run": "q1", "strategy": "text_frequency"},
                          {"id": "c", "role": "heldout", "measure": "throughput", "value": 70.0, "unit": "tuples/s",
                           "line": "ps2stream.txt l.318", "run": "q1", "strategy": "kdtree"}]},
        "tornado": {"status": "too_few_figures", "reason": "no absolute figure"}}}


@pytest.mark.parametrize("edit, match", [
    (lambda d: d["ps2stream"].update(terms=["messages", "cpu"]), r"terms='cpu' is invalid; allowed: messages"),
    (lambda d: d["ps2stream"]["figures"][0].pop("line"), r"figure 'a': line=None is invalid; allowed: the paper"),
    (lambda d: d["ps2stream"]["figures"][0].update(line="somewhere"), r"line='somewhere' is invalid"),
    (lambda d: d["ps2stream"]["figures"][0].update(unit="ms"), r"unit='ms' is invalid; allowed: 'tuples/s'"),
    (lambda d: d["ps2stream"]["figures"][0].update(measure="speed"), r"measure='speed' is invalid; allowed: throu"),
    (lambda d: d["ps2stream"]["figures"][0].update(role="train"), r"role='train' is invalid; allowed: fit, heldout"),
    (lambda d: d["ps2stream"]["figures"][0].update(run="q9"), r"run='q9' is invalid; allowed: q1"),
    (lambda d: d["ps2stream"]["figures"][0].update(value=-3), r"value=-3 is invalid; allowed: the published figure"),
    (lambda d: d["ps2stream"]["figures"][0].update(measure="throughput_ratio", unit="ratio", over="kdtree"),
     r"role='fit' is invalid; allowed: heldout for measure throughput_ratio"),
    (lambda d: d["ps2stream"]["figures"][2].update(role="fit"), r"0 held out.*at least one held-out figure"),
    (lambda d: d["ps2stream"]["figures"][1].update(id="a"), r"figure id='a' is invalid; allowed: ids unique"),
    (lambda d: d["tornado"].pop("reason"), r"calibration tornado: reason=None is invalid"),
    (lambda d: d.update(storm={"status": "calibrated"}), r"paper='storm' is invalid; allowed: ps2stream"),
    (lambda d: d["ps2stream"].update(status="maybe"), r"status='maybe' is invalid; allowed: calibrated, too_few"),
])
def test_declaration_errors_name_field_value_and_what_is_allowed(edit, match):
    doc = _declaration()
    edit(doc["calibration"])
    with pytest.raises(DeclarationError, match=match):
        parse(doc)


def test_the_committed_declaration_loads_and_says_which_papers_publish_too_few_figures():
    models = load(DECLARATION_FILE)
    assert {p for p, m in models.items() if m.status == "too_few_figures"} == {"tornado", "dskype"}
    for p in ("ps2stream", "sstd", "dkmsks"):
        m = models[p]
        assert m.status == "calibrated" and len(m.terms) <= len(m.fit) and m.heldout
        assert not {f.id for f in m.fit} & {f.id for f in m.heldout}


# ------------------------------------------------------------------------- counts and the basis


def _count_tables(per_worker: list[dict], epochs: int = 2, timestamps: int = 0, queries: int = 0):
    """Count-mode-like tables: epoch 0 (warm-up) and measured epochs 1..epochs."""
    rows = []
    for e in range(epochs + 1):
        for w, counts in enumerate(per_worker):
            rows.append({"epoch": e, "worker": w, **{k: (v if e > 0 else 1e9) for k, v in counts.items()}})
    workers = pd.DataFrame(rows)
    ep = pd.DataFrame({"epoch": range(epochs + 1), "measured": [False] + [True] * epochs,
                       "events_full": [10**9] + [1000] * epochs, "objects_full": [0] + [1000 - queries] * epochs})
    meta = {"label": "s", "workload": {"timestamps": timestamps}, "events_full": 10**9 + 1000 * epochs}
    return workers, ep, meta


def test_count_blocks_leave_the_warm_up_out_and_divide_by_the_measure_s_units():
    workers, ep, meta = _count_tables([{"messages_in": 10, "candidates": 100, "snapshots": 4, "snapshot_checks": 8},
                                       {"messages_in": 30, "candidates": 50, "snapshots": 2, "snapshot_checks": 40}],
                                      epochs=2, timestamps=20, queries=10)
    b = block_from_counts(workers, ep, meta, "throughput")
    assert b.x.shape == (1, 2, 5) and b.units == 2000
    assert b.x[0, 1, 0] == 60 and b.x[0, 0, 1] == 2 * (100 + 8)  # measured epochs only; checks of both kinds
    lat = block_from_counts(workers, ep, meta, "latency")
    assert lat.units == 20 and lat.x[0, 0, 0] == 8 and lat.x[0, 1, 1] == 80
    assert lat.summed and not b.summed  # a query's own counts: every worker's
    knn = block_from_counts(workers, ep, meta, "knn_update")
    assert knn.x.shape == (2, 2, 5) and knn.units == 20  # one window per measured epoch
    with pytest.raises(ValueError, match="needs a time-stamped workload"):
        block_from_counts(workers, ep, {"workload": {}}, "insertion")


def test_calibrated_throughput_is_events_over_the_busiest_worker_s_predicted_time():
    runs = pd.DataFrame({"run_id": ["a", "b", "c"], "experiment": ["ps2stream_baselines", "ps2stream_baselines",
                                                                   "tornado_routing"], "events": [1000.0, 500.0, 10.0]})
    workers = pd.DataFrame({"run_id": ["a", "a", "b", "b", "c"], "worker": [0, 1, 0, 1, 0],
                            "events": [100, 300, 50, 50, 7], "candidates": [1000, 0, 0, 2000, 7],
                            "results": [5, 5, 0, 0, 7], "inserts": [1, 1, 0, 0, 7], "deletes": [0, 0, 0, 0, 7]})
    constants = pd.DataFrame({"paper": ["ps2stream", "ps2stream"], "term": ["messages", "candidates"],
                              "value": [1e-3, 1e-4]})
    papers = {"ps2stream_baselines": "ps2stream", "tornado_routing": "tornado"}
    got = calibrated_throughput(runs, workers, constants, papers)
    # run a: worker 0 0.1 + 0.1 = 0.2 s, worker 1 0.3 s -> 1000 / 0.3; run b: worker 1 0.05 + 0.2 s
    assert got["a"] == pytest.approx(1000 / 0.3)
    assert got["b"] == pytest.approx(500 / 0.25)
    assert np.isnan(got["c"])  # Tornado: no fitted constants


def test_the_command_fits_from_count_folders_and_writes_the_page_and_tables(tmp_path, capsys):
    rng = np.random.default_rng(23)
    c_true = np.array([2e-6, 1e-8])
    doc = _declaration()
    counts = tmp_path / "counts"
    for strategy, fig in zip(("grid", "text_frequency", "kdtree"), doc["calibration"]["ps2stream"]["figures"]):
        per_worker = [{"messages_in": float(rng.integers(100, 1000)), "candidates": float(rng.integers(1000, 10**5))}
                      for _ in range(3)]
        workers, ep, meta = _count_tables(per_worker)
        folder = counts / "ps2stream" / "q1" / strategy
        folder.mkdir(parents=True)
        workers.to_parquet(folder / "counts_workers.parquet")
        ep.to_parquet(folder / "counts_epochs.parquet")
        (folder / "meta.json").write_text(json.dumps(meta | {"object_sample": 1.0, "wall_s": 1.0}))
        b = block_from_counts(workers, ep, meta, "throughput")
        fig["value"] = float(predict(FitFigure(_fig(0), b), c_true, TERMS2))
    decl = tmp_path / "calibration.yaml"
    decl.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    assert cli.main(["--counts", str(counts), "--out", str(out), "--declaration", str(decl), "--bootstrap", "5"]) == 0
    printed = capsys.readouterr().out
    assert "tornado: not calibrated, too few absolute figures" in printed
    consts = pd.read_csv(out / "constants.csv").set_index("term")["value"]
    assert consts["messages"] == pytest.approx(c_true[0], rel=1e-6)
    figs = pd.read_csv(out / "figures.csv").set_index("figure")
    assert figs.loc["c", "role"] == "heldout"  # its value came from c_true too: predicted, not fitted, and right
    assert abs(figs.loc["c", "rel_error"]) < 1e-6 and figs.loc["c", "published"] != 70
    page = (out / "calibration.md").read_text()
    assert "python -m harness.counts workload=sts_q1 counts.out=<COUNTS>/ps2stream/q1" in page
    assert str(tmp_path) not in page  # no machine path on the page
    fits, _, missing = calibrate_all(tmp_path / "nothing", load(decl))
    assert not fits and missing["ps2stream"]  # missing counts are named, not skipped silently
    import shutil

    shutil.rmtree(counts / "ps2stream" / "q1" / "kdtree")  # a held-out figure's counts only: the fit stands
    fits, _, missing = calibrate_all(counts, load(decl), bootstrap=0)
    assert len(fits) == 1 and [r["figure"] for r in fits[0].figures] == ["a", "b"]
    assert missing == {"ps2stream (held out, not judged)": ["ps2stream/q1/kdtree"]}


def test_a_claim_s_paper_can_choose_the_constants_and_shared_presets_go_to_the_paper_they_are_named_for():
    runs = pd.DataFrame({"run_id": ["c"], "experiment": ["tornado_routing"], "events": [10.0]})
    workers = pd.DataFrame({"run_id": ["c"], "worker": [0], "events": [100], "candidates": [1000]})
    constants = pd.DataFrame({"paper": ["sstd", "sstd"], "term": ["messages", "candidates"], "value": [1e-3, 1e-4]})
    got = calibrated_throughput(runs, workers, constants, {"tornado_routing": "tornado"}, paper="sstd")
    assert got["c"] == pytest.approx(10 / 0.2)
    from harness.report.calibration.basis import preset_papers
    papers = preset_papers()
    assert papers["sstd_crq"] == "sstd" and papers["ps2stream_baselines"] == "ps2stream"
