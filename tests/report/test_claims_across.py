"""Claims across datasets (check.across: dataset, SSTD Fig. 7): subject and others name datasets,
compared on one variant's runs within each (workload, workers[, x]), through the same comparisons
as claims across strategies; bad settings are refused when the claims load; the Fig. 7 claims of
conf/claims.yaml read cells that the sstd_datasets presets write."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from datasets.config import DATASET_NAMES
from harness.report import claims
from harness.report.results import PROJECT_ROOT, RUNS_TABLE_COLUMNS
from harness.run.config import register_configs

register_configs()
TW14, TW15, UNI, GAU = "synthetic", "synthetic_tw15", "synthetic_uniform", "synthetic_gauss"


def _table(rows: list[dict]) -> pd.DataFrame:
    """Rows in the runs table's shape (every column; x as the runner writes it, text)."""
    full = [{"status": "ok", "workers": 8, "started_at": "2026-01-01", "facet": None, "x": None, **r} for r in rows]
    for r in full:
        r["strategy"] = r["variant"]
        r["x"] = None if r["x"] is None else str(r["x"])
    return pd.DataFrame(full).reindex(columns=RUNS_TABLE_COLUMNS)


def _srq(variant: str, dataset: str, x: float, ms: float, **extra) -> dict:
    return {"variant": variant, "dataset": dataset, "workload": "srq_q", "experiment": "sstd_datasets", "x": x,
            "snapshot_latency_mean_ms": ms, **extra}


def _claim(kind="better", subject=UNI, others=(TW14, TW15, GAU), metric="snapshot_latency_mean_ms",
           experiment="sstd_datasets", **check) -> dict:
    return {"id": "fig7", "paper": "sstd", "claim": "c", "preset": experiment,
            "check": {"kind": kind, "across": "dataset", "variant": "qttree", "metric": metric, "subject": subject,
                      "others": list(others), **check}}


# SRQ latency (ms) per dataset at two region areas; quadtree's runs on the same datasets say the
# opposite, so a comparison that mixed variants, or ignored check.variant, would read them
LATENCY = {1e-6: {TW14: 0.4, TW15: 0.42, UNI: 0.3, GAU: 0.9}, 1e-2: {TW14: 2.0, TW15: 2.1, UNI: 1.5, GAU: 6.0}}
OTHER = {TW14: 0.1, TW15: 0.1, UNI: 9.0, GAU: 0.05}


def _fig7a(latency=LATENCY) -> pd.DataFrame:
    rows = [_srq("qttree", ds, x, ms) for x, per in latency.items() for ds, ms in per.items()]
    rows += [_srq("quadtree", ds, x, ms) for x in latency for ds, ms in OTHER.items()]
    return _table(rows)


def test_a_dataset_claim_holds_at_every_x_and_reports_the_datasets_compared():
    v = claims.evaluate(claims.load_claims_from([_claim()])[0], _fig7a())
    assert v.verdict == "holds" and len(v.comparisons) == 2
    assert v.comparisons[0].startswith("srq_q/qttree/8w at x=1e-06: synthetic_uniform")
    assert all(ds in v.comparisons[1] for ds in (TW14, TW15, GAU))
    # Gau's latency is the largest, so Gau "better" than the others does not hold anywhere
    assert claims.evaluate(_claim(subject=GAU, others=(TW14, TW15, UNI)), _fig7a()).verdict == "does not hold"
    # on quadtree's runs the same table says the opposite
    assert claims.evaluate(_claim(variant="quadtree"), _fig7a()).verdict == "does not hold"


def test_a_dataset_claim_that_fails_at_one_x_holds_partly():
    worse = {x: dict(per) for x, per in LATENCY.items()}
    worse[1e-2][UNI] = 2.05  # Uni above TW14 at 1%: "in most cases"
    v = claims.evaluate(_claim(), _fig7a(worse))
    assert v.verdict == "partly (1/2)"
    assert "(no)" in v.comparisons[1] and "(yes)" in v.comparisons[0]


def test_comparisons_stay_within_workload_and_workers():
    """Two worker counts are two comparisons; a dataset missing from one of them leaves the claim
    not measured, naming the cell."""
    rows = [_srq("qttree", ds, 1e-4, ms, workers=w) for w in (4, 8) for ds, ms in LATENCY[1e-2].items()]
    rows[4]["snapshot_latency_mean_ms"] = 1.0  # TW14 at 8 workers beats Uni there
    table = _table(rows)
    v = claims.evaluate(_claim(others=(TW14,)), table)
    assert v.verdict == "partly (1/2)" and [c.split(":")[0] for c in v.comparisons] == \
        ["srq_q/qttree/4w at x=0.0001", "srq_q/qttree/8w at x=0.0001"]
    only = table[~((table["workers"] == 8) & (table["dataset"] == TW14))]
    v = claims.evaluate(_claim(others=(TW14,)), only)
    assert v.verdict == "not measured" and v.missing == ["srq_q/qttree/8w at x=0.0001: no usable run of synthetic"]
    assert claims.evaluate(_claim(others=(TW14,), variant="kdt"), table).verdict == "not measured"


def test_throughput_ratios_across_datasets_within_a_few_percent():
    """Fig. 7(b): CRQ throughput per dataset, TW15 near TW14 as two one-sided ratio claims."""
    def table(tw15: float) -> pd.DataFrame:
        eps = {TW14: 1000.0, TW15: tw15, UNI: 1500.0, GAU: 600.0}
        return _table([{"variant": "qttree", "dataset": ds, "workload": "sstd_mix", "experiment": "sstd_datasets_crq",
                        "x": 1e-4, "throughput_eps": v, "throughput_compute_eps": v} for ds, v in eps.items()])

    near = [_claim("ratio_at_least", subject=a, others=(b,), metric="throughput_eps",
                   experiment="sstd_datasets_crq", value=0.95) for a, b in ((TW15, TW14), (TW14, TW15))]
    assert [claims.evaluate(c, table(1015.0)).verdict for c in near] == ["holds", "holds"]
    assert [claims.evaluate(c, table(1100.0)).verdict for c in near] == ["holds", "does not hold"]
    assert "x0.91 vs synthetic_tw15" in claims.evaluate(near[1], table(1100.0)).comparisons[0]
    uni = _claim(metric="throughput_eps", experiment="sstd_datasets_crq")  # higher is better here
    assert claims.evaluate(uni, table(1015.0)).verdict == "holds"
    assert claims.evaluate(uni, table(1600.0)).verdict == "does not hold"


def _swept(variant: str, experiment: str, x, **values) -> dict:
    return {"variant": variant, "dataset": TW14, "workload": "topk_q", "workers": 1, "experiment": experiment,
            "x": x, **values}


def _x_claim(kind, subject, others, metric, variant="hash", experiment="skype_reevaluation", **check) -> dict:
    return {"id": "x", "paper": "skype", "claim": "c", "preset": experiment,
            "check": {"kind": kind, "across": "x", "variant": variant, "metric": metric, "subject": subject,
                      "others": others, **check}}


def test_an_x_claim_compares_one_variants_settings():
    """Table 4: hash's buffers under four re-evaluation modes; another variant's runs at the same
    x values say the opposite, so mixing variants would show."""
    sizes = {"cskyband": 30.0, "skyband": 52.0, "kmax": 58.0, "recompute": 20.0}
    rows = [_swept("hash", "skype_reevaluation", x, buffer_size_mean=v) for x, v in sizes.items()]
    rows += [_swept("dskype_prefix", "skype_reevaluation", x, buffer_size_mean=100.0 - v) for x, v in sizes.items()]
    table = _table(rows)
    smallest = _x_claim("better", "cskyband", ["skyband", "kmax"], "buffer_size_mean", higher_is_better=False)
    v = claims.evaluate(claims.load_claims_from([smallest])[0], table)
    assert v.verdict == "holds" and v.comparisons[0].startswith("topk_q/synthetic/1w: cskyband")
    assert "skyband" in v.comparisons[0] and "kmax" in v.comparisons[0]
    assert claims.evaluate(_x_claim("better", "cskyband", ["recompute"], "buffer_size_mean", higher_is_better=False),
                           table).verdict == "does not hold"
    assert claims.evaluate({**smallest, "check": {**smallest["check"], "variant": "dskype_prefix"}},
                           table).verdict == "does not hold"
    band = _x_claim("bound", "kmax", [], "buffer_size_mean", min=48, max=60)
    assert claims.evaluate(claims.load_claims_from([band])[0], table).verdict == "holds"
    assert claims.evaluate({**band, "check": {**band["check"], "subject": "cskyband"}}, table).verdict == \
        "does not hold"
    other_experiment = _table([{**r, "experiment": "dskype_k"} for r in rows])
    assert claims.evaluate(smallest, other_experiment).verdict == "not measured"


def test_a_between_claim_over_numeric_x_checks_every_subject():
    """Fig. 26: a hybrid's tuples per message at the interior splits within those of its two ends
    (x written as text by the runner, compared as numbers and named as `:g`)."""
    tuples = {1: 6.8, 2: 9.0, 4: 12.0, 8: 17.0, 16: 24.0, 32: 32.0}
    rows = [_swept("dskype_spatial_first", "dskype_hybrid", l1, obj_replication=v, workers=32)
            for l1, v in tuples.items()]
    claim = claims.load_claims_from([_x_claim("between", [2, 4, 8, 16], [1, 32], "obj_replication",
                                              variant="dskype_spatial_first", experiment="dskype_hybrid")])[0]
    v = claims.evaluate(claim, _table(rows))
    assert v.verdict == "holds" and len(v.comparisons) == 4
    assert v.comparisons[0].startswith("topk_q/synthetic/32w: 2 ")
    rows[4]["obj_replication"] = 40.0  # 16 x 2 above location-based
    v = claims.evaluate(claim, _table(rows))
    assert v.verdict == "partly (3/4)" and "(no)" in v.comparisons[3]
    falls = _x_claim("better", 1, [2, 4, 8, 16], "throughput_eps", variant="dskype_spatial_first",
                     experiment="dskype_hybrid")
    eps = [_swept("dskype_spatial_first", "dskype_hybrid", l1, throughput_compute_eps=1000.0 / l1, workers=32)
           for l1 in tuples]
    assert claims.evaluate(claims.load_claims_from([falls])[0], _table(eps)).verdict == "holds"


@pytest.mark.parametrize("change, message", [
    ({"kind": "between", "others": ["kmax"]}, r"a between claim needs two or more check.others"),
    ({"kind": "linear", "value": 0.9}, r"check.across=x needs a kind.*'linear'"),
    ({"others": ["cskyband", "kmax"]}, r"needs check.subject \(a swept x value\).*without the subject"),
])
def test_bad_x_claims_are_refused_when_the_claims_load(change, message):
    bad = _x_claim("better", "cskyband", ["skyband"], "throughput_eps")
    bad["check"].update(change)
    with pytest.raises(ValueError, match=message):
        claims.load_claims_from([bad])


@pytest.mark.parametrize("change, message", [
    ({"across": "workload"}, r"check.across='workload' is invalid; allowed: variant, dataset"),
    ({"variant": None}, r"check.across=dataset needs check.variant.*got None"),
    ({"kind": "linear", "value": 0.9}, r"needs a kind that compares a subject with others.*'linear'"),
    ({"others": [UNI, GAU]}, r"needs check.subject \(a dataset\) and check.others.*without the subject"),
    ({"others": []}, r"needs check.subject \(a dataset\) and check.others"),
    ({"across": "variant"}, r"check.variant='qttree' is only read with check.across: dataset"),
])
def test_bad_across_settings_are_refused_when_the_claims_load(change, message):
    bad = _claim()
    bad["check"].update(change)
    with pytest.raises(ValueError, match=message):
        claims.load_claims_from([bad])


def _composed(*overrides):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=True)


def test_the_fig7_claims_read_cells_the_sstd_datasets_presets_write():
    fig7 = [c for c in claims.load_claims() if c["check"].get("across") == "dataset"]
    assert {c["preset"] for c in fig7} == {"sstd_datasets", "sstd_datasets_crq"}
    cells: dict[str, set] = {}
    for name in ("sstd_datasets", "sstd_datasets_crq"):
        base = _composed(f"experiment={name}")
        params = base.hydra.sweeper.params
        axes = [[f"{k}={v.strip()}" for v in str(vals).split(",")] for k, vals in params.items()]
        cells[name] = set()
        for point in itertools.product(*axes):
            cfg = _composed(f"experiment={name}", *point)
            assert list(cfg.strategy.include) == ["qttree"] and cfg.experiment.x
            cells[name].add((cfg.dataset.name, cfg.workload.name, int(cfg.workers)))
    for c in fig7:
        chk = c["check"]
        assert chk["variant"] == "qttree"
        for ds in (chk["subject"], *chk["others"]):
            assert ds in DATASET_NAMES
            for wl, w in itertools.product(chk["where"]["workload"], chk["where"]["workers"]):
                assert (ds, wl, w) in cells[c["preset"]], (c["id"], ds, wl, w)


def test_adjusted_runs_are_labelled_once():
    """A report checks claims on a sweep's rows it already labelled: "qttree + fg" must not become
    "qttree + fg + fg", or every claim on adjusted runs reads "not measured"."""
    from harness.report.results import labelled

    table = pd.DataFrame({"strategy": ["qttree", "qttree", "kdt"], "variant": [None, None, "ps2stream_ext"],
                          "adjust": ["none", "fg", "gr"]})
    once = labelled(table)
    assert once["variant"].tolist() == ["qttree", "qttree + fg", "ps2stream_ext + gr"]
    assert labelled(once)["variant"].tolist() == once["variant"].tolist()
