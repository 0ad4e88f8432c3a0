"""The projected basis's cost fit (harness/report/projection.py, issue 51 part 2), on synthetic
workers tables whose busy times are built from known per-operation costs: the non-negative fit
recovers them, constants fitted on small runs project a larger run, and a count-mode folder's
measured epochs are what is projected."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from harness.report import projection

# seconds per unit: per message, per update, per candidate, per result, per worker and epoch
COSTS = {"events": 300e-9, "updates": 1.5e-6, "candidates": 25e-9, "results": 80e-9, "epochs": 2e-3}
DISPATCH = {"events": 400e-9, "messages": 150e-9}


def _busy(w: pd.DataFrame, epochs: float, costs=COSTS) -> np.ndarray:
    return (costs["events"] * w["events"] + costs["updates"] * (w["inserts"] + w["deletes"])
            + costs["candidates"] * w["candidates"] + costs["results"] * w["results"]
            + costs["epochs"] * epochs).to_numpy()


def _run(rng, run_id: str, variant: str, scale: float, n_workers: int = 6, dispatchers: int = 4,
         epochs: int | None = None, costs=COSTS, dispatch=DISPATCH, noise: float = 0.0):
    """One synthetic timed run: its runs-table row and its workers table, `scale` times the counts."""
    epochs = int(rng.integers(2, 12)) if epochs is None else epochs
    w = pd.DataFrame({"worker": np.arange(n_workers),
                      "events": rng.integers(2_000, 20_000, n_workers) * scale,
                      "inserts": rng.integers(100, 3_000, n_workers) * scale,
                      "deletes": rng.integers(50, 2_000, n_workers) * scale,
                      "candidates": rng.integers(10_000, 900_000, n_workers) * scale,
                      "results": rng.integers(100, 60_000, n_workers) * scale,
                      "snapshot_checks": 0.0, "pause_s": 0.0})
    w["busy_s"] = _busy(w, epochs, costs) * (1 + noise * rng.standard_normal(n_workers))
    w["run_id"] = run_id
    events = float(rng.integers(20_000, 60_000)) * scale
    messages = events * float(rng.uniform(1.0, 4.0))
    disp = dispatch["events"] * events / dispatchers + dispatch["messages"] * messages / dispatchers
    row = {"run_id": run_id, "variant": variant, "strategy": variant, "status": "ok", "epochs": float(epochs),
           "events": events, "messages_routed": messages, "dispatchers": dispatchers, "dispatcher_s": disp,
           "throughput_compute_eps": events / max(disp, float(w["busy_s"].max())), "experiment": "p",
           "dataset": "d", "workload": "q1", "workers": n_workers, "x": None, "facet": None, "too_short": 0.0}
    return row, w


def _table(seed=0, variants=("s",), runs=12, scale=1.0, **kw):
    rng = np.random.default_rng(seed)
    rows, ws = [], []
    for v in variants:
        for i in range(runs):
            r, w = _run(rng, f"{v}-{scale:g}-{i}", v, scale, **kw)
            rows.append(r)
            ws.append(w)
    return pd.DataFrame(rows), pd.concat(ws, ignore_index=True)


def test_the_fit_recovers_known_per_operation_costs():
    runs, workers = _table()
    fit = projection.fit_costs(runs, workers)["s"]
    for term, cost in COSTS.items():
        assert fit.cost(term) == pytest.approx(cost, rel=1e-4), term
    # terms zero in every row (no snapshots, no re-evaluations) get no constant
    assert fit.cost("snapshot_checks") == 0.0 and fit.cost("reevaluations") == 0.0
    assert fit.rel_rms < 1e-6 and fit.r2 > 0.999999
    assert np.abs(fit.busiest_err).max() < 1e-6
    assert fit.dispatch_costs[0] == pytest.approx(DISPATCH["events"], rel=1e-4)
    assert fit.dispatch_costs[1] == pytest.approx(DISPATCH["messages"], rel=1e-4)
    assert fit.rows == len(workers) and fit.runs == len(runs)


def test_each_strategy_gets_its_own_constants_never_negative():
    cheap = {k: v / 4 for k, v in COSTS.items()}
    a_runs, a_w = _table(seed=1, variants=("a",))
    b_runs, b_w = _table(seed=2, variants=("b",), costs=cheap)
    fits = projection.fit_costs(pd.concat([a_runs, b_runs]), pd.concat([a_w, b_w]))
    assert set(fits) == {"a", "b"}
    assert fits["a"].cost("candidates") == pytest.approx(COSTS["candidates"], rel=1e-4)
    assert fits["b"].cost("candidates") == pytest.approx(cheap["candidates"], rel=1e-4)
    # noisy times: the constants stay >= 0 and near the truth; the fit states its error
    n_runs, n_w = _table(seed=3, noise=0.05)
    noisy = projection.fit_costs(n_runs, n_w)["s"]
    assert (noisy.costs >= 0).all()
    assert 0.01 < noisy.rel_rms < 0.1
    assert noisy.cost("candidates") == pytest.approx(COSTS["candidates"], rel=0.1)


def test_constants_from_small_runs_project_a_larger_run():
    small_runs, small_w = _table(seed=4, scale=1.0)
    big_runs, big_w = _table(seed=5, scale=50.0, runs=3)
    fits = projection.fit_costs(small_runs, small_w)
    frame = projection.project_runs(fits, big_runs, big_w)
    assert len(frame) == 3
    assert np.abs(frame["busiest_err"]).max() < 1e-4
    assert np.abs(frame["throughput_err"]).max() < 1e-4
    # the projected busiest worker is the largest of the workers' modelled times, by hand
    r = big_runs.iloc[0]
    w = big_w[big_w["run_id"] == r["run_id"]]
    by_hand = _busy(w, r["epochs"]).max()
    assert frame.set_index("run_id").loc[r["run_id"], "busiest_worker_s"] == pytest.approx(by_hand, rel=1e-4)
    # a strategy with no timed runs is not projected
    assert projection.project_runs({}, big_runs, big_w).empty


def test_a_dispatcher_bound_run_is_projected_as_such():
    runs, workers = _table(seed=6, dispatch={"events": 40e-6, "messages": 0.0})
    fits = projection.fit_costs(runs, workers)
    frame = projection.project_runs(fits, runs, workers)
    assert (frame["bottleneck"] == "dispatchers").all()
    assert np.abs(frame["throughput_err"]).max() < 1e-4


def _count_folder(tmp_path, rng, n_workers=4, epochs=3, label="s"):
    """A count-mode folder as harness/counts/app.py writes it: epoch 0 is the warm-up."""
    rows = []
    for e in range(epochs + 1):
        for w in range(n_workers):
            rows.append({"epoch": e, "worker": w, "messages_in": float(rng.integers(1_000, 9_000)),
                         "inserts": float(rng.integers(10, 900)), "deletes": float(rng.integers(10, 500)),
                         "candidates": float(rng.integers(1_000, 400_000)), "results": float(rng.integers(0, 9_000)),
                         "snapshot_checks": 0.0})
    workers = pd.DataFrame(rows)
    ep = pd.DataFrame({"epoch": range(epochs + 1), "measured": [e > 0 for e in range(epochs + 1)],
                       "events_full": [1e6] + [20_000.0] * epochs, "object_copies": 0.0, "query_copies": 0.0})
    disp = pd.DataFrame([{"epoch": e, "dispatcher": d, "events_in": 5_000.0, "messages_out": 9_000.0}
                         for e in range(epochs + 1) for d in range(2)])
    tmp_path.mkdir(parents=True, exist_ok=True)
    workers.to_parquet(tmp_path / "counts_workers.parquet")
    ep.to_parquet(tmp_path / "counts_epochs.parquet")
    disp.to_parquet(tmp_path / "counts_dispatchers.parquet")
    meta = {"label": label, "strategy": label, "adjust": "none", "dispatchers": 2, "workers": n_workers,
            "workload": {"name": "q1", "queries": 5_000_000},
            "run_keys": {"experiment": "p", "variant": label, "dataset": "d", "workload": "q1", "workers": 6,
                         "x": None, "facet": None}}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    return workers, ep, disp


def test_a_count_folder_is_projected_over_its_measured_epochs(tmp_path):
    runs, workers = _table(seed=7)
    fits = projection.fit_costs(runs, workers)
    folder = tmp_path / "counts" / "c1"
    cw, ep, disp = _count_folder(folder, np.random.default_rng(8))
    frame = projection.project_counts(fits, [folder])
    measured = cw[cw["epoch"] > 0].groupby("worker").sum(numeric_only=True).rename(columns={"messages_in": "events"})
    busiest = _busy(measured, 3).max()
    got = frame.iloc[0]
    assert got["busiest_worker_s"] == pytest.approx(busiest, rel=1e-4)
    assert got["events"] == 60_000.0  # the measured epochs' events, not the warm-up's
    d = DISPATCH["events"] * 60_000 / 2 + DISPATCH["messages"] * 6 * 9_000.0 / 2
    assert got["dispatcher_s"] == pytest.approx(d, rel=1e-4)
    assert got["throughput_eps"] == pytest.approx(60_000 / max(busiest, d), rel=1e-4)


def test_the_projected_basis_names_only_the_runs_of_a_counted_cell(tmp_path):
    runs, workers = _table(seed=9)
    # no count folder: no figure at all
    assert projection.projected_throughput(runs, workers, tmp_path).empty
    _count_folder(tmp_path / "counts" / "c1", np.random.default_rng(10))
    other = runs.iloc[[0]].assign(run_id="elsewhere", workers=7)  # another cell: no count run
    got = projection.projected_throughput(pd.concat([runs, other]), workers, tmp_path)
    assert set(got.index) == set(runs["run_id"])  # every run of the counted cell (workers=6), not the other
    v = got.iloc[0]
    assert v["lo"] <= v["value"] <= v["hi"] and "5,000,000 queries" in v["note"]


def test_a_selector_names_runs_table_columns():
    runs, _ = _table(seed=11)
    assert len(projection.select(runs, "variant=s,workers=6")) == len(runs)
    assert projection.select(runs, "variant=t").empty
    with pytest.raises(ValueError, match="not a runs-table column"):
        projection.select(runs, "size=3")
    with pytest.raises(ValueError, match="key=value"):
        projection.select(runs, "variant")


def test_a_claim_is_judged_on_the_projected_basis_once_its_cells_are_counted(tmp_path):
    from harness.report import claims
    from harness.report.results import TABLES_DIR

    a_runs, a_w = _table(seed=12, variants=("a",))
    b_runs, b_w = _table(seed=13, variants=("b",), costs={k: 3 * v for k, v in COSTS.items()})
    runs = pd.concat([a_runs, b_runs], ignore_index=True)
    runs["started_at"] = [f"2026-01-01T00:{i:02d}" for i in range(len(runs))]
    for basis in ("compute", "network"):
        col = f"throughput_{basis}_eps"
        runs[col] = runs["throughput_compute_eps"]
        runs[f"{col}_ci_lo"], runs[f"{col}_ci_hi"] = runs[col] * 0.99, runs[col] * 1.01
    runs[TABLES_DIR] = str(tmp_path)
    pd.concat([a_w, b_w], ignore_index=True).to_parquet(tmp_path / "workers.parquet")
    claim = claims.load_claims_from([{"id": "a-beats-b", "paper": "ps2stream", "claim": "a beats b", "preset": "p",
                                      "check": {"kind": "better", "metric": "throughput_eps", "subject": "a",
                                                "others": ["b"]}}])
    assert list(claims.evaluate_all(runs, claims=claim)[0].verdicts) == ["compute", "network"]  # nothing counted
    for label in ("a", "b"):  # the same counts for both: b's three times dearer operations lose
        _count_folder(tmp_path / "counts" / label, np.random.default_rng(14), label=label)
    (r,) = claims.evaluate_all(runs, claims=claim)
    assert list(r.verdicts) == ["compute", "network", "projected"]
    assert r.verdicts["projected"].kind == "holds"
    assert any(n.startswith("projected: projected at 60,000 measured events") for n in r.verdicts["projected"].comparisons)
