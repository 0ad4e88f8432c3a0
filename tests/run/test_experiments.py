"""Experiment presets (real Hydra composition), strategy variants, scale=paper, the published
claims and their evaluation, and one tiny experiment end to end through the real CLI."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from datasets.config import DATASET_NAMES
from harness.report import claims, metrics
from harness.run.config import ConfigError, register_configs, validate
from harness.report.results import EPOCH_KEYS, PROJECT_ROOT, RUN_KEYS, RUNS_TABLE_COLUMNS, read_runs_table
from strategies import registry
from strategies.adjust_base import adjuster_names

register_configs()
PRESETS = sorted(p.stem for p in (PROJECT_ROOT / "conf" / "experiment").glob("*.yaml"))


def composed(*overrides):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=True)


def sweep_points(cfg) -> list[list[str]]:
    params = cfg.hydra.sweeper.params or {}
    axes = [[f"{k}={v.strip()}" for v in str(vals).split(",")] for k, vals in params.items()]
    return [list(p) for p in itertools.product(*axes)]


def test_the_issue_presets_exist():
    assert {"ps2stream_baselines", "ps2stream_hybrid", "ps2stream_scalability", "tornado_routing", "sstd_crq",
            "grand_range"} <= set(PRESETS)


@pytest.mark.parametrize("name", PRESETS)
def test_every_job_of_every_preset_is_valid(name):
    base = composed(f"experiment={name}")
    assert base.experiment.name == name and base.hydra.mode.name == "MULTIRUN"
    points = sweep_points(base)
    assert points, f"{name} sweeps nothing"
    for point in points:
        cfg = composed(f"experiment={name}", *point)
        runs = validate(cfg)
        assert runs, (name, point)
        for r in runs:
            assert r.name in registry.names()


def test_scale_paper_sets_the_papers_sizes_per_workload():
    small = composed("workload=sts_q2")
    paper = composed("workload=sts_q2", "scale=paper")
    assert paper.workload.queries == 10_000_000 > small.workload.queries
    assert paper.workload.updates == 2 * paper.workload.queries
    assert paper.dataset.size > small.dataset.size and paper.oracle.enabled is False
    scal = composed("experiment=ps2stream_scalability", "workload=sts_q3", "scale=paper")
    assert scal.workload.queries == 20_000_000  # Fig. 11 (TWEETS-UK) overrides PS2Stream's default


def test_variants_run_under_their_label_and_bad_ones_are_rejected():
    cfg = composed("strategy.include=[grid]", "+strategy.variants=[{label: g32, name: grid, params: "
                   "{cells_per_side: 32}}]")
    assert [(r.label, r.name, r.params) for r in validate(cfg)] == [
        ("grid", "grid", {}), ("g32", "grid", {"cells_per_side": 32})]
    bad = {"no such strategy": ("{label: x, name: gird, params: {}}", "valid strategies"),
           "bad param": ("{label: x, name: grid, params: {cell: 3}}", "valid parameters"),
           "duplicate label": ("{label: grid, name: grid, params: {}}", "unique")}
    for case, (variant, message) in bad.items():
        with pytest.raises(ConfigError, match=message):
            validate(composed("strategy.include=[grid]", f"+strategy.variants=[{variant}]"))


def test_include_names_are_checked():
    with pytest.raises(ConfigError, match="valid strategies"):
        validate(composed("strategy.include=[grid,kd_tree]"))


def test_unknown_plot_is_rejected_with_the_valid_ones():
    with pytest.raises(ConfigError, match="throughput_vs_x"):
        validate(composed("experiment.plots=[thruput]"))


def test_claims_name_registered_strategies_and_runs_table_metrics():
    listed = claims.load_claims()
    assert len({c["id"] for c in listed}) == len(listed) > 10
    import yaml

    presets = [yaml.safe_load(p.read_text()) for p in (PROJECT_ROOT / "conf" / "experiment").glob("*.yaml")]
    variant_labels = {v["label"] for p in presets for v in (p.get("strategy") or {}).get("variants") or []}
    assert {"agrid_nosummary", "ps2stream_ext"} <= variant_labels
    for c in listed:
        chk = c["check"]
        assert c["paper"] in {"ps2stream", "sstd", "tornado", "dkmsks", "dskype"}, c["id"]
        assert chk["metric"] in RUNS_TABLE_COLUMNS, c["id"]
        # the runs table's `dataset` column holds dataset names; a swept claim names a preset
        assert set(_listed((chk.get("where") or {}).get("dataset"))) <= set(DATASET_NAMES), c["id"]
        assert c["preset"] in PRESETS, c["id"]
        assert "higher_is_better" not in chk or metrics.higher_is_better(chk["metric"]) is None, c["id"]
        across_datasets = chk.get("across") == "dataset"  # SSTD Fig. 7: subject and others name datasets
        if chk.get("across"):
            base, _, adjusted = chk["variant"].partition(" + ")  # an adjusted variant: "kdt + gr"
            assert base in registry.names() or base in variant_labels, c["id"]
            assert not adjusted or adjusted in adjuster_names(), c["id"]
        if chk.get("across") == "x":  # subject and others name x values (test_top_k_claims_are_checkable...)
            continue
        for s in [*claims._subjects(chk), *(chk.get("others") or [])]:
            if across_datasets:
                assert s in DATASET_NAMES, (c["id"], s)
                continue
            name, _, adjuster = s.partition(" + ")  # adjusted runs: "<strategy> + <adjuster>"
            assert name in registry.names() or name in variant_labels, (c["id"], s)
            assert not adjuster or adjuster in adjuster_names(), (c["id"], s)


def _listed(value) -> list:
    return [] if value is None else value if isinstance(value, list) else [value]


def _preset_cells(name: str) -> tuple[set[tuple], set[str], bool, set[str]]:
    """The (dataset, workload, workers) cells a preset's sweep writes to the runs table, the variants
    it runs, whether it sweeps an x (then only claims naming it as `experiment` read its runs), and
    the x values it writes."""
    base = composed(f"experiment={name}")
    cells, variants, xs = set(), set(), set()
    for point in sweep_points(base):
        cfg = composed(f"experiment={name}", *point)
        cells.add((cfg.dataset.name, cfg.workload.name, int(cfg.workers)))
        variants |= (set(cfg.strategy.include) or {cfg.strategy.name}) | {v.label for v in cfg.strategy.variants or []}
        if base.experiment.x:
            xs.add(str(OmegaConf.select(cfg, base.experiment.x)))
    return cells, variants, base.experiment.x is not None, xs


def test_top_k_claims_are_checkable_from_the_skype_and_dskype_presets():
    """Every (dataset, workload, workers) a Skype or DSkype claim lists is a cell that one of their
    presets' sweeps writes, with the claim's strategies (or, across x, its variant and x values),
    and is read the way the claim reads (no x, or its experiment). Whether a claim holds is a
    finding for results/report.md, never asserted here."""
    presets = {name: _preset_cells(name) for name in PRESETS if name.startswith(("dskype_", "skype_"))}
    listed = [c for c in claims.load_claims() if c["paper"] == "dskype"]
    assert {c["preset"] for c in listed if c["check"].get("across") == "x"} == \
        {"skype_reevaluation", "skype_index", "skype_index_time", "dskype_hybrid", "dskype_k", "dskype_subscriptions"}
    for c in listed:
        chk, where = c["check"], c["check"].get("where") or {}
        named = {str(v) for v in claims._subjects(chk)} | {str(o) for o in chk.get("others") or []}
        across_x = chk.get("across") == "x"
        produced, variants, _, xs = presets[c["preset"]]
        assert (chk["variant"] in variants and named <= xs) if across_x else named <= variants, c["id"]
        lists = [_listed(where.get(k)) for k in ("dataset", "workload", "workers")]
        for cell in itertools.product(*[values or [None] for values in lists]):
            assert any(all(want is None or want == got for want, got in zip(cell, have)) for have in produced), \
                (c["id"], cell)


def _row(variant, value, workers=8, workload="sts_q1", started="2026-01-01", **extra):
    return {"variant": variant, "strategy": variant, "status": "ok", "dataset": "synthetic",
            "workload": workload, "workers": workers, "throughput_eps": value, "throughput_compute_eps": value,
            "started_at": started, "x": None, "facet": None, "experiment": "p", **extra}


CLAIM = {"id": "t", "paper": "ps2stream", "claim": "a beats b", "preset": "p",
         "check": {"kind": "better", "metric": "throughput_eps", "subject": "a", "others": ["b"],
                   "where": {"workload": ["sts_q1", "sts_q2"]}}}


def _on(claim: dict, **where) -> dict:
    return {**claim, "check": {**claim["check"], "where": where}}


def test_claim_verdicts_follow_the_measurements():
    table = pd.DataFrame([_row("a", 10), _row("b", 5), _row("a", 3, workload="sts_q2"),
                          _row("b", 4, workload="sts_q2")])
    v = claims.evaluate(CLAIM, table)
    assert v.verdict.startswith("partly (1/2)") and len(v.comparisons) == 2
    q1, q2 = _on(CLAIM, workload=["sts_q1"]), _on(CLAIM, workload=["sts_q2"])
    assert claims.evaluate(q1, table).verdict == "holds"
    assert claims.evaluate(q2, table).verdict == "does not hold"
    # a cell the claim lists with no run is named, never dropped
    v = claims.evaluate(CLAIM, table[table["workload"] == "sts_q1"])
    assert v.verdict == "not measured" and v.missing == ["sts_q2/synthetic/8w: no usable run of the preset"]
    v = claims.evaluate(CLAIM, table[table["variant"] == "a"])
    assert v.verdict == "not measured" and "no usable run of b" in v.missing[0]
    # the newest run counts; another preset's newer runs never do
    newer = pd.concat([table, pd.DataFrame([_row("a", 1, started="2026-02-01"),
                                            _row("b", 0.1, started="2026-03-01", experiment="other")])])
    assert claims.evaluate(q1, newer).verdict == "does not hold"
    ratio = {**q1, "check": {**q1["check"], "kind": "ratio_at_least", "value": 2.0}}
    assert claims.evaluate(ratio, table).verdict == "holds"
    assert claims.evaluate({**ratio, "check": {**ratio["check"], "value": 2.5}}, table).verdict == "does not hold"
    scales = {**CLAIM, "check": {"kind": "scales", "metric": "throughput_eps", "subject": "a", "value": 1.5}}
    grow = pd.DataFrame([_row("a", 10, workers=4), _row("a", 18, workers=16)])
    assert claims.evaluate(scales, grow).verdict == "holds"
    assert claims.evaluate({**scales, "check": {**scales["check"], "value": 2.0}}, grow).verdict == "does not hold"


def test_a_gap_that_grows_along_the_sweep():
    """SSTD Fig. 8(a): qttree's latency advantage is larger at the largest region than at the smallest."""
    gap = {"id": "g", "paper": "sstd", "claim": "the gap grows", "preset": "sstd_srq",
           "check": {"kind": "gap_grows", "metric": "snapshot_latency_mean_ms", "subject": "a", "others": ["b"]}}
    rows = [_row(v, 0, x=x, experiment="sstd_srq", snapshot_latency_mean_ms=ms)
            for v, x, ms in (("a", 1e-6, 4.0), ("b", 1e-6, 16.0), ("a", 1e-2, 32.0), ("b", 1e-2, 172.0))]
    assert claims.evaluate(gap, pd.DataFrame(rows)).verdict == "holds"  # x4 then x5.4
    rows[3]["snapshot_latency_mean_ms"] = 100.0  # x3.1: the gap shrank
    assert claims.evaluate(gap, pd.DataFrame(rows)).verdict == "does not hold"
    with pytest.raises(ValueError, match="check.experiment is no longer read"):
        claims.load_claims_from([{**gap, "check": {**gap["check"], "experiment": "sstd_srq"}}])


def test_a_tiny_experiment_end_to_end(tmp_path):
    """The real CLI: a two-job sweep with a variant writes its runs (one sweep id), its figures and
    the report with the claims table."""
    env = {**os.environ, "STPS_RESULTS": str(tmp_path), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    cmd = [sys.executable, "-m", "harness", "experiment=tornado_routing", "workers=2,3", "workload=tiny",
           "workload.updates=600",  # the preset lengthens its stream; the test keeps tiny's
           "strategy.include=[grid,text_hash]", "experiment.report=true", "mlflow.enabled=false", "progress=false"]
    proc = subprocess.run(cmd, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = read_runs_table(tmp_path)
    assert sorted(runs["variant"]) == sorted(["grid", "text_hash", "agrid_nosummary"] * 2)
    assert set(runs["strategy"]) == {"grid", "text_hash", "agrid"}
    assert runs["sweep_id"].nunique() == 1 and set(runs["experiment"]) == {"tornado_routing"}
    assert (runs["status"] == "ok").all() and runs["oracle_ok"].all()
    for plot in ("throughput_vs_x", "replication_balance"):
        assert (tmp_path / "plots" / "tornado_routing" / f"{plot}.png").stat().st_size > 1000
    for run_dir in runs["run_dir"]:  # what the runner really writes: every metric registered
        row = json.loads((Path(run_dir) / "metrics.json").read_text())
        assert not [k for k in row if k not in RUN_KEYS and not metrics.known(k)]
        series = pd.read_parquet(Path(run_dir) / "epochs.parquet")
        assert not [k for k in series.columns if k not in EPOCH_KEYS and not metrics.known(k)]
    # the preset's report: both throughputs per run, then every claim that reads the preset with a
    # verdict per basis; the overview: every claim, its row's "|" escaped (six cells)
    own = (tmp_path / "plots" / "tornado_routing" / "report.md").read_text()
    assert "agrid_nosummary" in own and "| strategy | workers | x | compute-only | network | bottleneck |" in own
    assert "too short" in own  # tiny runs are shown, flagged, and no claim reads them
    tornado = [c for c in claims.load_claims() if c["preset"] == "tornado_routing"]
    assert tornado and all(f"[{c['id']}]" not in own and f"`{c['id']}`" in own for c in tornado)
    report = (tmp_path / "report.md").read_text()
    assert "| claim | source | published (paper's setting) | compute | network |" in report
    claim_rows = [line for line in report.splitlines() if line.startswith("| [")]
    assert len(claim_rows) == len(claims.load_claims())  # every claim has its row
    for row in claim_rows:  # a "|" inside a claim's text (|S|) is escaped: six cells per row
        assert len(re.findall(r"(?<!\\)\|", row)) == 7, row


def test_adjusted_runs_are_claimed_under_strategy_plus_adjuster():
    table = pd.DataFrame([
        _row("kdt", 100.0, workload="sts_q3_drift", adjust="none"),
        _row("kdt", 150.0, workload="sts_q3_drift", adjust="gr"),
    ])
    claim = {"id": "t", "claim": "gr helps", "preset": "p", "check": {
        "kind": "ratio_at_least", "metric": "throughput_eps", "subject": "kdt + gr",
        "others": ["kdt"], "where": {"workload": ["sts_q3_drift"], "workers": [8]}, "value": 1.26}}
    assert claims.evaluate(claim, table).verdict == "holds"
    claim["check"]["value"] = 1.6
    assert claims.evaluate(claim, table).verdict == "does not hold"


@pytest.mark.slow  # CI time: make test-cluster runs it
def test_a_sweep_run_again_with_resume_runs_only_what_is_missing_or_failed(tmp_path):
    """The first job stands for a sweep killed after its first run: the resumed sweep skips that
    run (the same configuration has an ok row), runs the missing one, and says how many it skipped."""
    env = {**os.environ, "STPS_RESULTS": str(tmp_path), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    common = ["workload=tiny", "dataset.size=4000", "strategy=grid", "mlflow.enabled=false", "progress=false"]
    first = subprocess.run([sys.executable, "-m", "harness", "workers=2", *common], cwd=PROJECT_ROOT, env=env,
                           capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    again = subprocess.run([sys.executable, "-m", "harness", "-m", "workers=2,3", "resume=true", "tag=sweep", *common],
                           cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "resume: skipped 1 of 1 runs already in the runs table (grid)" in again.stdout
    assert "resume: the sweep skipped 1 runs already in the runs table" in again.stdout
    runs = read_runs_table(tmp_path)
    assert sorted(runs["workers"]) == [2, 3] and (runs["status"] == "ok").all()
    assert runs["config_key"].nunique() == 2


def test_the_measurement_key_is_the_configuration_whichever_preset_ran_it():
    """Two presets that run one configuration (dskype_k at k = 20, dskype_subscriptions at |S| =
    20,000, both the topk_q defaults) get one measurement key and two config keys; another k on
    the same stream is another measurement."""
    from harness.run.config import RunSpec
    from harness.run.record import config_key, measurement_key, run_config

    base = ["workload=topk_q", "dataset=synthetic"]
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        k = compose(config_name="config", overrides=["experiment=dskype_k", *base, "workload.k_max=20"])
        subs = compose(config_name="config", overrides=["experiment=dskype_subscriptions", *base,
                                                        "workload.queries=20000"])
        k50 = compose(config_name="config", overrides=["experiment=dskype_k", *base, "workload.k_max=50"])
    spec = RunSpec("dskype_hash", "dskype_hash", {})
    cfgs = [run_config(c, spec) for c in (k, subs, k50)]
    assert measurement_key(cfgs[0]) == measurement_key(cfgs[1]) != measurement_key(cfgs[2])
    assert config_key(cfgs[0]) != config_key(cfgs[1])


def test_resume_reruns_failed_runs_and_ignores_display_settings(tmp_path):
    from harness.run.config import RunSpec
    from harness.report.results import code_version
    from harness.run.record import config_key, run_config, unfinished

    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        cfg = compose(config_name="config", overrides=["strategy=grid", "resume=true"])
        shown = compose(config_name="config", overrides=["strategy=grid", "progress=false", "tag=x",
                                                         "mlflow.enabled=false", "resume=false"])
        other = compose(config_name="config", overrides=["strategy=grid", "workers=3"])
    spec = RunSpec("grid", "grid", {})
    key = config_key(run_config(cfg, spec))
    assert key == config_key(run_config(shown, spec)) != config_key(run_config(other, spec))
    version = code_version()

    def table(status, at_version):
        row = {"run_id": "a", "status": status, "config_key": key, "code_version": at_version}
        pd.DataFrame([row]).to_parquet(tmp_path / "runs.parquet")

    table("error", version)
    assert unfinished(cfg, [spec], tmp_path) == [spec]  # failed: run again
    table("ok", "older-code")
    assert unfinished(cfg, [spec], tmp_path) == [spec]  # made by other code: no claim reads it
    table("ok", version)
    assert unfinished(cfg, [spec], tmp_path) == []
    cfg.resume = False
    assert unfinished(cfg, [spec], tmp_path) == [spec]


@pytest.mark.parametrize("name", PRESETS)
def test_a_runs_config_yaml_is_omegaconfs_text_and_loads_back(name):
    from harness.run.record import config_yaml, run_config

    point = sweep_points(composed(f"experiment={name}"))[0]
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        cfg = compose(config_name="config", overrides=[f"experiment={name}", *point])  # as a run sees it
    for spec in validate(cfg):
        run_cfg = run_config(cfg, spec)
        text = config_yaml(run_cfg)
        assert text == OmegaConf.to_yaml(OmegaConf.create(run_cfg))
        assert yaml.safe_load(text) == run_cfg
