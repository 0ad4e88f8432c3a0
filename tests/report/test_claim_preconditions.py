"""Claims that were never put to the test (issue 48): each precondition kind a claim may declare
(`requires`: moves, latency_floor, pruned, same_cells, reached, queues) fails a hand-built runs table where the
mechanism did not act and passes one where it did; a tie of two points reads "not exercised"; a
cell whose precondition failed never counts as "does not hold", in the verdict or in the tally."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from harness.report import claims
from harness.report.claims import preconditions
from harness.report.claims import report as claims_report


def _row(variant, value=100.0, *, metric="throughput_eps", preset="p", workload="q1", run_dir=None, **extra):
    """A run whose `metric` is a point (no interval): a count, a model output."""
    base = variant.split(" + ")
    row = {"variant": variant, "strategy": base[0], "adjust": base[1] if len(base) > 1 else None, "status": "ok",
           "dataset": "synthetic", "workload": workload, "workers": 8, "experiment": preset,
           "started_at": "2026-01-01", "x": None, "facet": None, "oracle_ok": True, "too_short": 0.0,
           "run_id": f"{variant}-{workload}-{preset}", "run_dir": run_dir}
    if metric == "throughput_eps":
        row.update(throughput_eps=value, throughput_compute_eps=value, throughput_compute_eps_ci_lo=value * 0.99,
                   throughput_compute_eps_ci_hi=value * 1.01, throughput_network_eps=value,
                   throughput_network_eps_ci_lo=value, throughput_network_eps_ci_hi=value)
    else:
        row[metric] = value
    return {**row, **extra}


def _claim(subject="a", others=("b",), *, metric="throughput_eps", kind="better", requires=None, **check):
    c = {"id": "c", "paper": "sstd", "claim": "x", "preset": "p",
         "check": {"kind": kind, "metric": metric, "subject": subject, "others": list(others), **check}}
    if requires is not None:
        c["requires"] = requires
    return claims.load_claims_from([c])[0]


def _epochs(tmp_path, name, moved_at: dict[int, int], n_epochs=6, stalled=(), dropped=None, eps=None) -> str:
    """A run folder whose epochs.parquet moved `moved_at[epoch]` queries at those epochs, with a
    stall in the `stalled` epochs, `dropped` replicas and a throughput of `eps` per epoch."""
    folder = tmp_path / name.replace(" ", "")
    folder.mkdir()
    epochs = list(range(1, n_epochs + 1))
    eps = eps if eps is not None else [100.0] * n_epochs
    pd.DataFrame({"epoch": epochs, "events": 1000, "throughput_eps": eps, "throughput_compute_eps": eps,
                  "throughput_network_eps": eps,
                  "migrated_queries": [moved_at.get(e, 0) for e in epochs],
                  "migrated_bytes": [8.0 * moved_at.get(e, 0) for e in epochs],
                  "pause_max_s": [0.01 if e in stalled else 0.0 for e in epochs],
                  "replicas_dropped": dropped if dropped is not None else [0] * n_epochs,
                  }).to_parquet(folder / "epochs.parquet", index=False)
    return str(folder)


def _edit_epochs(folder: str, drop: tuple[str, ...] = (), **columns) -> None:
    """Set (or `drop`) columns of the run folder's epochs.parquet."""
    frame = pd.read_parquet(f"{folder}/epochs.parquet").drop(columns=list(drop))
    for name, values in columns.items():
        frame[name] = values
    frame.to_parquet(f"{folder}/epochs.parquet", index=False)


# ------------------------------------------------------------------------------------------ a tie


def test_a_tie_of_two_points_is_not_exercised_unless_the_claim_allows_equality():
    tie = pd.DataFrame([_row("a", 0.0, metric="migrated_queries"), _row("b", 0.0, metric="migrated_queries")])
    v = claims.evaluate(_claim(metric="migrated_queries"), tie)
    assert v.verdict == "not exercised" and "a tie: the experiment did not separate them" in v.comparisons[0]
    assert claims.evaluate(_claim(metric="migrated_queries", equality_ok=True), tie).verdict == "holds"
    # 100% against 100% (a higher-is-better share) is a tie as well; 2.92 against 2.91 copies is not
    shares = pd.DataFrame([_row("a", 1.0, metric="latency_share_lt_100ms"),
                           _row("b", 1.0, metric="latency_share_lt_100ms")])
    assert claims.evaluate(_claim(metric="latency_share_lt_100ms"), shares).verdict == "not exercised"
    apart = pd.DataFrame([_row("a", 2.92, metric="obj_replication"), _row("b", 2.91, metric="obj_replication")])
    assert claims.evaluate(_claim(metric="obj_replication"), apart).verdict == "does not hold"
    # a ratio of two zeros is no infinite win, and a tie against one other leaves the clear loss to another
    zero = claims.evaluate(_claim(metric="migrated_queries", kind="ratio_at_least", value=1.43), tie)
    assert zero.verdict == "not exercised"
    flat = claims.evaluate(_claim(metric="migrated_queries", kind="ratio_at_least", value=0.67), tie)
    assert flat.verdict == "holds"  # "does not grow": a ratio of 1 is what the claim says
    lost = pd.DataFrame([_row("a", 5.0, metric="migrated_queries"), _row("b", 5.0, metric="migrated_queries"),
                         _row("c", 1.0, metric="migrated_queries")])
    assert claims.evaluate(_claim(others=("b", "c"), metric="migrated_queries"), lost).verdict == "does not hold"


def test_equality_ok_must_be_a_boolean():
    with pytest.raises(ValueError, match=r"check.equality_ok='yes' is invalid; allowed: true"):
        _claim(equality_ok="yes")


# ------------------------------------------------------------------------------------------- moves


def test_moves_fails_where_nothing_moved_or_too_late_and_passes_where_it_moved_early(tmp_path):
    claim = _claim("a + pm", ["a"], requires=["moves"])
    still = _epochs(tmp_path, "still", {})
    late = _epochs(tmp_path, "late", {1: 40, 5: 10}, stalled=(2, 6))
    early = _epochs(tmp_path, "early", {1: 40}, stalled=(2,))

    def table(run_dir):
        return pd.DataFrame([_row("a + pm", 200.0, run_dir=run_dir), _row("a", 100.0)])

    v = claims.evaluate(claim, table(still))
    assert v.verdict == "not exercised" and "a + pm: nothing moved in its 6 measured epochs" in v.comparisons[0]
    v = claims.evaluate(claim, table(late))
    assert v.verdict == "not exercised" and "0 measured epochs without a stall after its last move" in v.comparisons[0]
    assert claims.evaluate(claim, table(early)).verdict == "holds"  # epochs 3-6: four quiet epochs after the move
    # a cost claim reads the move itself: none needed after it
    cost = _claim("a + pm", ["a"], requires=[{"kind": "moves", "after": 0}])
    assert claims.evaluate(cost, table(late)).verdict == "holds"


def test_moves_reads_the_runs_tables_counts_without_an_epochs_table():
    claim = _claim("a + pm", ["a + fg"], requires=["moves"])
    none = pd.DataFrame([_row("a + pm", 200.0, migrated_queries=0.0, migrated_bytes=0.0, epochs=6, adjustments=0),
                         _row("a + fg", 100.0, migrated_queries=9.0, migrated_bytes=72.0, epochs=6, adjustments=1)])
    v = claims.evaluate(claim, none)
    assert v.verdict == "not exercised" and "a + pm: nothing moved" in v.comparisons[0]
    busy = none.assign(migrated_queries=9.0, migrated_bytes=72.0, adjustments=4)  # 6 epochs, 4 moves: < 3 after
    assert claims.evaluate(claim, busy).verdict == "not exercised"
    moved = none.assign(migrated_queries=9.0, migrated_bytes=72.0, adjustments=1)
    assert claims.evaluate(claim, moved).verdict == "holds"


# --------------------------------------------------------------------------------------- latency


def _curve(eps, floor_ms, slope):
    pts = [[f * eps, floor_ms + slope * f] for f in (0.05, 0.1, 0.2, 0.35, 0.5, 0.7)]
    return json.dumps({"compute": pts, "network": pts})


def test_latency_floor_fails_at_the_models_fixed_delay_and_passes_where_runs_queue():
    claim = _claim(metric="latency_mean_ms", requires=["latency_floor"])

    def table(slope_a, slope_b):
        return pd.DataFrame([_row("a", 1000.0, latency_mean_ms=0.2, latency_curve=_curve(1000.0, 0.2, slope_a)),
                             _row("b", 1000.0, latency_mean_ms=0.2, latency_curve=_curve(1000.0, 0.2, slope_b))])

    # both at the network model's two hops (0.2 ms), or a queueing only in b: nothing compares queues
    for slopes in ((0.0, 0.004), (0.0, 5.0)):
        v = claims.evaluate(claim, table(*slopes), "network")
        assert v.verdict == "not exercised" and "a: 200.0 µs is within 10 µs of the model's floor" in v.comparisons[0]
    assert claims.evaluate(claim, table(1.0, 5.0), "network").verdict == "holds"  # both queue; a less
    assert claims.evaluate(claim, table(5.0, 1.0), "network").verdict == "does not hold"
    no_curve = pd.DataFrame([_row("a", 1000.0, latency_mean_ms=1.0), _row("b", 1000.0, latency_mean_ms=2.0)])
    assert claims.evaluate(claim, no_curve, "compute").verdict == "not exercised"


# -------------------------------------------------------------------------------------- replication


def test_pruned_fails_where_no_replica_was_dropped_before_the_reading_and_passes_where_it_was(tmp_path):
    claim = _claim("prefix", ["keyword"], metric="stored_replication", requires=["pruned"])

    def table(**prefix):
        return pd.DataFrame([_row("prefix", 2.0, metric="stored_replication", **prefix),
                             _row("keyword", 3.0, metric="stored_replication", replicas_dropped=0.0)])

    v = claims.evaluate(claim, table(replicas_dropped=0.0))
    assert v.verdict == "not exercised" and "the pruning never acted" in v.comparisons[0]
    assert claims.evaluate(claim, table(replicas_dropped=120.0)).verdict == "holds"  # keyword prunes nothing: not asked
    late = _epochs(tmp_path, "late", {}, dropped=[0, 50, 0, 0, 0, 0])
    v = claims.evaluate(claim, table(replicas_dropped=50.0, run_dir=late))
    assert v.verdict == "not exercised" and "no replica pruned in its first measured epoch" in v.comparisons[0]
    first = _epochs(tmp_path, "first", {}, dropped=[120, 0, 3, 0, 0, 0])
    assert claims.evaluate(claim, table(replicas_dropped=123.0, run_dir=first)).verdict == "holds"


# ------------------------------------------------------------------------------------ same cells


def test_same_cells_fails_on_different_cell_counts_and_passes_on_the_same():
    claim = _claim("kdt + gr", ["kdt + dp"], metric="select_cells_s", requires=["same_cells"])

    def table(cells_dp, adj_dp=2):
        return pd.DataFrame([_row("kdt + gr", 0.001, metric="select_cells_s", select_candidates=3582.0, adjustments=2),
                             _row("kdt + dp", 0.010, metric="select_cells_s", select_candidates=cells_dp,
                                  adjustments=adj_dp)])

    v = claims.evaluate(claim, table(6656.0))
    assert v.verdict == "not exercised" and "the methods chose from different cells" in v.comparisons[0]
    assert claims.evaluate(claim, table(3582.0, adj_dp=3)).verdict == "not exercised"
    assert claims.evaluate(claim, table(0.0, adj_dp=0)).verdict == "not exercised"  # dp never selected
    assert claims.evaluate(claim, table(3582.0)).verdict == "holds"
    assert claims.evaluate(claim, table(3582.0 * 1.005)).verdict == "holds"  # a few cells more: the same cells
    assert claims.evaluate(claim, table(3582.0 * 1.02)).verdict == "not exercised"


def test_reached_fails_where_no_method_had_a_tuple_past_the_threshold_and_passes_where_one_did():
    """PS2Stream's Fig. 12(c) bound ("at least 80% under 100 ms") is tested only where some run of
    the cell, another method's included, had tuples past 100 ms."""
    claim = _claim("kdt + gr", [], metric="latency_share_lt_100ms", kind="bound", min=0.8, requires=["reached"])

    def table(gr, dp):
        return pd.DataFrame([_row("kdt + gr", gr, metric="latency_share_lt_100ms"),
                             _row("kdt + dp", dp, metric="latency_share_lt_100ms")])

    v = claims.evaluate(claim, table(1.0, 1.0))
    assert v.verdict == "not exercised" and "no run of the 2 in this cell had a tuple past" in v.comparisons[0]
    assert claims.evaluate(claim, table(1.0, 0.7)).verdict == "holds"  # dp's tuples waited: the bound could fail
    assert claims.evaluate(claim, table(0.6, 0.7)).verdict == "does not hold"
    with pytest.raises(ValueError, match="requires reached reads a share of tuples under a threshold"):
        _claim("kdt + gr", [], metric="latency_mean_ms", kind="bound", min=0.8, requires=["reached"])


# ------------------------------------------------------------------- never a failure, the tallies


def test_a_failed_precondition_never_counts_as_does_not_hold(tmp_path):
    """a + pm reads worse than a in both cells, but only q2's run moved: q1 is not exercised, q2 fails."""
    claim = _claim("a + pm", ["a"], requires=["moves"])
    still, moved = _epochs(tmp_path, "still", {}), _epochs(tmp_path, "moved", {1: 40})
    q1 = [_row("a + pm", 50.0, run_dir=still), _row("a", 100.0)]
    v = claims.evaluate(claim, pd.DataFrame(q1))
    assert v.verdict == "not exercised" and v.kind == "not exercised"
    both = q1 + [_row("a + pm", 50.0, workload="q2", run_dir=moved), _row("a", 100.0, workload="q2")]
    v = claims.evaluate(claim, pd.DataFrame(both))
    assert v.verdict == "does not hold (0/1 exercised cells hold; 1 not exercised)" and v.kind == "does not hold"
    won = q1 + [_row("a + pm", 200.0, workload="q2", run_dir=moved), _row("a", 100.0, workload="q2")]
    v = claims.evaluate(claim, pd.DataFrame(won))
    assert v.verdict == "holds (1/1 exercised cells hold; 1 not exercised)" and v.kind == "holds"
    result = claims.evaluate_both(claim, pd.DataFrame(q1))
    for basis in claims.BASES:
        counts = claims.tally([result], basis)
        assert counts["not exercised"] == 1 and counts["does not hold"] == 0
    assert not result.flips
    table = claims_report.tally_table([result])
    header, compute = ([c.strip() for c in line.split("|")] for line in (table[0], table[2]))
    assert compute[header.index("not exercised")] == "1" and compute[header.index("does not hold")] == "0"
    listed = claims_report.not_exercised([result])
    assert listed[2].startswith("- `c` (compute, network): ") and "a + pm: nothing moved" in listed[2]


def test_verdict_of_keeps_the_exercised_cells_verdict():
    skip, hold, fail, noise = "not exercised", True, False, None
    assert claims.verdict_of([skip, skip]) == "not exercised"
    assert claims.verdict_of([hold, fail, skip]) == "partly (1/2 exercised cells hold; 1 not exercised)"
    assert (claims.verdict_of([noise, skip])
            == "inconclusive (0/1 exercised cells hold, 1 within the noise; 1 not exercised)")
    assert claims.verdict_of([hold, fail]) == "partly (1/2)"  # without a skipped cell, as before
    assert "not exercised" in claims.VERDICTS and "not exercised" in claims_report.tally_table([])[0]


# ------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize("requires, message", [
    ("moves", r"requires='moves' is invalid; allowed: a non-empty list"),
    (["moved"], r"requires kind='moved' is invalid; allowed: moves, latency_floor, pruned, same_cells"),
    ([{"kind": "moves", "epochs": 3}], r"requires moves: unknown field\(s\) \['epochs'\]; allowed: after, of"),
    ([{"kind": "moves", "after": -1}], r"after=-1 is invalid; allowed: an integer >= 0"),
    ([{"kind": "pruned", "of": "a"}], r"of='a' is invalid; allowed: a non-empty list"),
    (["latency_floor"], r"requires latency_floor reads the latency curve of latency_mean_ms, not "
                        r"check.metric='throughput_eps'"),
])
def test_a_bad_requires_is_refused_naming_field_value_and_allowed(requires, message):
    with pytest.raises(ValueError, match=message):
        _claim(requires=requires)


def test_requires_on_a_kind_that_reads_several_cells_is_refused():
    with pytest.raises(ValueError, match=r"requires is only read by the kinds judged cell by cell"):
        _claim(others=(), kind="scales", value=2.0, requires=["moves"])


def test_the_claims_about_these_mechanisms_declare_their_preconditions():
    """conf/claims.yaml: the adjustment claims (SSTD Figs. 14-15, PS2Stream Figs. 12-16), the
    mean-latency claims, DSkype's pruned replication and the selection-time claims."""
    every = claims.load_claims()
    kinds = {c["id"]: {r.kind for r in preconditions.parse(c)} for c in every}
    adjusting = ("sstd_balancing", "sstd_balancing_snapshot", "ps2stream_adjustment", "ps2stream_migration")
    for c in every:
        metric = c["check"]["metric"]
        if c["preset"] in adjusting and metric != "select_cells_s":
            assert "moves" in kinds[c["id"]], c["id"]
        if metric == "select_cells_s":
            assert "same_cells" in kinds[c["id"]], c["id"]
        if metric == "latency_mean_ms":
            assert "latency_floor" in kinds[c["id"]], c["id"]
        if metric == "snapshot_latency_mean_ms" and c["preset"] in adjusting:
            assert "queues" in kinds[c["id"]], c["id"]
    assert {"pruned"} <= kinds["dskype-table5-prefix-below-keyword"] & kinds["dskype-table5-prefix-replication"]


def test_a_throughput_that_requires_moves_is_read_on_the_epochs_after_the_last_move(tmp_path):
    """a + pm stalls on its move and reads below a over the whole run, but above it on epochs 3-6,
    after the move: the paper's throughput after the adjustment. Both runs are read on those epochs."""
    adjusted = _epochs(tmp_path, "pm", {1: 40}, stalled=(2,), eps=[50.0, 10.0, 200.0, 200.0, 200.0, 200.0])
    still = _epochs(tmp_path, "none", {}, eps=[100.0, 100.0, 100.0, 100.0, 100.0, 400.0])
    table = pd.DataFrame([_row("a + pm", 80.0, run_dir=adjusted), _row("a", 100.0, run_dir=still)])
    claim = _claim("a + pm", ["a"], requires=["moves"])
    for basis in claims.BASES:
        v = claims.evaluate(claim, table, basis)
        assert v.verdict == "holds", (basis, v.comparisons)
        assert "read on epochs 3-6, after the last move (4 epochs)" in v.comparisons[0]
    # 4,000 events over 4 x 1,000 / 200 s; a: 4,000 over 3 x 10 + 2.5 s = 123.1 events/s, both +-1%
    assert "a + pm 200" in v.comparisons[0] and "a 123" in v.comparisons[0]
    whole = claims.evaluate(_claim("a + pm", ["a"], requires=[{"kind": "moves", "after": 0}]), table)
    assert whole.verdict == "does not hold"  # after: 0 reads the moves' own run: 80 against 100


def test_a_snapshot_latency_that_requires_moves_is_read_on_the_epochs_after_the_last_move(tmp_path):
    """a + fg's snapshot queries wait 9 ms before its move and 1 ms after it (mean over the run 5 ms);
    a's wait 3 ms throughout. Read after the move (each epoch's mean weighted by its queries), FG
    cuts the latency, as Fig. 14(c) reads new snapshot queries after the adjustment; over the whole
    run it would not. Epochs without the per-epoch latency fall back to the whole run, saying so."""
    adjusted = _epochs(tmp_path, "fg", {2: 40})
    still = _epochs(tmp_path, "none", {})
    _edit_epochs(adjusted, snapshot_latency_mean_ms=[9.0, 9.0, 1.0, 1.0, 1.0, 1.0],
                 snapshot_queries=[10, 10, 5, 5, 5, 5])
    _edit_epochs(still, snapshot_latency_mean_ms=[3.0] * 6, snapshot_queries=[10] * 6)
    table = pd.DataFrame([_row("a + fg", 5.0, metric="snapshot_latency_mean_ms", run_dir=adjusted),
                          _row("a", 3.0, metric="snapshot_latency_mean_ms", run_dir=still)])
    claim = _claim("a + fg", ["a"], metric="snapshot_latency_mean_ms", requires=["moves"])
    v = claims.evaluate(claim, table, None)
    assert v.verdict == "holds", v.comparisons
    assert "read on epochs 3-6, after the last move (4 epochs)" in v.comparisons[0]
    ratio = claims.evaluate(_claim("a + fg", ["a"], metric="snapshot_latency_mean_ms", kind="ratio_at_least",
                                   value=2.5, requires=["moves"]), table, None)
    assert ratio.verdict == "holds", ratio.comparisons  # 3 ms / 1 ms after the move
    for folder in (adjusted, still):
        _edit_epochs(folder, drop=("snapshot_latency_mean_ms",))
    old = claims.evaluate(claim, table, None)
    assert old.verdict == "does not hold"
    assert "no snapshot_latency_mean_ms" in old.comparisons[0]


def test_a_balance_that_requires_moves_is_read_on_the_epochs_after_the_last_move(tmp_path):
    """a + fg's busiest worker is 6x its least busy over the whole run (the hot spot before the
    move) but 1.5x on epochs 3-6, after the move; a stays at 3x. Read after the move, a + fg
    balances better; read over the whole run it would not. Epochs without busy_min_s (runs before
    the column existed) fall back to the whole run, saying so."""
    adjusted = _epochs(tmp_path, "fg", {2: 40})
    still = _epochs(tmp_path, "none", {})
    _edit_epochs(adjusted, busy_max_s=[6.0, 6.0, 1.5, 1.5, 1.5, 1.5], busy_min_s=[1.0] * 6)
    _edit_epochs(still, busy_max_s=[3.0] * 6, busy_min_s=[1.0] * 6)
    table = pd.DataFrame([_row("a + fg", 6.0, metric="busy_max_min", run_dir=adjusted),
                          _row("a", 3.0, metric="busy_max_min", run_dir=still)])
    claim = _claim("a + fg", ["a"], metric="busy_max_min", requires=["moves"])
    v = claims.evaluate(claim, table, None)
    assert v.verdict == "holds", v.comparisons
    assert "read on epochs 3-6, after the last move (4 epochs)" in v.comparisons[0]
    for folder in (adjusted, still):
        _edit_epochs(folder, drop=("busy_min_s",))
    old = claims.evaluate(claim, table, None)  # the tables are read anew: keyed on the file's time
    assert old.verdict == "does not hold"
    assert "no busy_min_s" in old.comparisons[0]


def test_a_snapshot_latency_claim_needs_a_baseline_the_hot_spot_queued(tmp_path):
    """`queues`: Fig. 14(c) reads how much an adjustment cuts the wait a hot spot causes. When no
    action's snapshot queries wait as long in the hot spot as before it, the claim is not
    exercised, whatever the adjusted run reads; when they wait 3x longer, it is judged."""
    adjusted, flat, queued = (_epochs(tmp_path, n, moved) for n, moved in (("fg", {2: 40}), ("flat", {}),
                                                                            ("queued", {})))
    for folder, ms in ((adjusted, [0.3, 0.3, 0.2, 0.2, 0.2, 0.2]), (flat, [0.3, 0.3, 0.29, 0.3, 0.28, 0.3]),
                       (queued, [0.3, 0.5, 0.9, 0.9, 0.9, 0.9])):
        _edit_epochs(folder, snapshot_latency_mean_ms=ms, snapshot_queries=10)
    claim = _claim("a + fg", ["a"], metric="snapshot_latency_mean_ms", requires=["moves", "queues"])
    for baseline, verdict in ((flat, "not exercised"), (queued, "holds")):
        table = pd.DataFrame([_row("a + fg", 0.23, metric="snapshot_latency_mean_ms", run_dir=adjusted),
                              _row("a", 0.3, metric="snapshot_latency_mean_ms", run_dir=baseline)])
        v = claims.evaluate(claim, table, None)
        assert v.verdict == verdict, v.comparisons
    assert "the hot spot did not queue them" in claims.evaluate(claim, pd.DataFrame([
        _row("a + fg", 0.23, metric="snapshot_latency_mean_ms", run_dir=adjusted),
        _row("a", 0.3, metric="snapshot_latency_mean_ms", run_dir=flat)]), None).comparisons[0]
    with pytest.raises(ValueError, match="requires queues reads the epochs' snapshot latency"):
        _claim("a + fg", ["a"], requires=["queues"])
    with pytest.raises(ValueError, match="rise=0 is invalid"):
        _claim("a + fg", ["a"], metric="snapshot_latency_mean_ms", requires=[{"kind": "queues", "rise": 0}])
