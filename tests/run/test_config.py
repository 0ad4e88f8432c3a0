"""Config composition and rejection of bad config before Spark starts (real Hydra compose)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from hydra import compose, initialize_config_dir

from harness.run.config import ConfigError, check_overrides, register_configs, validate
from harness.report.results import PROJECT_ROOT
from strategies import registry

register_configs()


def composed(*overrides):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        return compose(config_name="config", overrides=list(overrides))


def test_defaults_compose_to_the_baselines_and_all_to_every_range_strategy():
    cfg = composed()
    assert cfg.workers == 8 and cfg.dataset.name == "synthetic" and cfg.workload.name == "sts_q1"
    assert [r.label for r in validate(cfg)] == [n for n in registry.supporting("range")
                                                if n in ("grid", "kdtree", "text_frequency", "hash")]
    assert [r.label for r in validate(composed("strategy=all"))] == registry.supporting("range")
    grand = composed("experiment=grand_range")
    assert [r.name for r in validate(grand)][:len(registry.supporting("range"))] == registry.supporting("range")


def test_any_value_is_overridable():
    cfg = composed("strategy=kdtree", "workers=16", "workload=sts_q2", "dataset=geonames", "seed=3")
    assert (cfg.strategy.name, cfg.workers, cfg.workload.profile, cfg.dataset.name, cfg.seed) == (
        "kdtree", 16, "q2", "geonames", 3)
    assert [(r.label, r.name) for r in validate(cfg)] == [("kdtree", "kdtree")]


@pytest.mark.parametrize("name", registry.names())
def test_every_registered_strategy_has_a_config_file(name):
    cfg = composed(f"strategy={name}")
    assert cfg.strategy.name == name
    assert "families" not in cfg.strategy  # declared once, on the strategy
    registry.get(name).make_params(dict(cfg.strategy.params))


@pytest.mark.parametrize("workers", [0, -3])
def test_bad_worker_count_is_rejected(workers):
    with pytest.raises(ConfigError, match="workers"):
        validate(composed(f"workers={workers}"))


@pytest.mark.parametrize("value", [-1, -4])
def test_bad_fit_processes_are_rejected(value):
    with pytest.raises(ConfigError, match=r"fit_processes=.* is invalid; allowed: null \(one per driver core\)"):
        validate(composed(f"fit_processes={value}"))


def test_unknown_strategy_lists_valid_ones():
    cfg = composed("strategy=grid")
    cfg.strategy.name = "gird"
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    assert "grid" in str(err.value) and "kdtree" in str(err.value)


def test_unknown_family_lists_the_registered_ones():
    cfg = composed("strategy=grid")
    cfg.workload.family = "nearest"
    with pytest.raises(ConfigError, match="workload.family='nearest'.*range"):
        validate(cfg)


def test_index_settings_are_checked_per_family():
    with pytest.raises(ConfigError, match="index.gi2_cells_per_side.*a block of settings per query family: .*range"):
        validate(composed("+index.gi2_cells_per_side=8"))
    with pytest.raises(ConfigError, match="index.range.*unknown parameter.*cellz.*cells_per_side"):
        validate(composed("+index.range.cellz=8"))
    with pytest.raises(ConfigError, match="index.range.cells_per_side=0"):
        validate(composed("index.range.cells_per_side=0"))
    assert composed("index.range.cells_per_side=32").index.range.cells_per_side == 32


def test_state_uri_and_the_lost_executor_timeout_are_checked_before_spark(tmp_path):
    with pytest.raises(ConfigError, match=r"state_uri='ftp://host/state' has scheme 'ftp'; allowed: file"):
        validate(composed("state_uri=ftp://host/state"))
    (tmp_path / "f").write_text("a file, not a folder")
    with pytest.raises(ConfigError, match="is not writable"):
        validate(composed(f"state_uri=file://{tmp_path}/f/state"))
    validate(composed(f"state_uri=file://{tmp_path}/ok"))
    assert (tmp_path / "ok").is_dir()
    with pytest.raises(ConfigError, match=r"cluster.lost_executors_timeout_s=-1.*seconds >= 0"):
        validate(composed("cluster.lost_executors_timeout_s=-1"))


@pytest.mark.parametrize("arg,hint", [("wrkers=3", "workers"), ("workload.querys=5", "queries"),
                                      ("dataset.on_bad_row=error", "on_bad_rows")])
def test_misspelled_key_names_the_valid_keys(arg, hint):
    with pytest.raises(ConfigError) as err:
        check_overrides([arg])
    assert hint in str(err.value) and "valid keys" in str(err.value)


def test_free_form_maps_are_not_second_guessed():
    check_overrides(["strategy.params.cells_per_side=32", "cluster.conf.spark.executor.memory=1g"])


@pytest.mark.parametrize("args,needle", [
    (["wrkers=3"], "valid keys"),
    (["workers=-1"], "workers"),
    (["strategy=nope"], "grid"),
    (["strategy=grid", "strategy.params.cellz=3"], "valid parameters"),
    (["dataset.on_bad_rows=maybe"], "on_bad_rows"),
])
def test_cli_rejects_bad_config_before_spark(args, needle):
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          cwd=PROJECT_ROOT, timeout=120)
    assert proc.returncode != 0
    assert needle in proc.stderr + proc.stdout
    assert time.perf_counter() - t0 < 60


def test_cfg_job_shows_the_composed_config():
    proc = subprocess.run([sys.executable, "-m", "harness", "--cfg", "job", "workers=4"], capture_output=True,
                          text=True, cwd=PROJECT_ROOT, timeout=120)
    assert proc.returncode == 0
    assert "workers: 4" in proc.stdout and "strategy:" in proc.stdout


def test_the_default_run_charges_the_lan_and_repeats_and_none_is_compute_only(monkeypatch):
    from harness.run.config import network_profile

    cfg = composed()
    lan = network_profile(cfg)
    assert (lan.name, lan.headline, lan.bandwidth_bps, lan.merge_tasks) == ("lan", "network", 1e9, cfg.workers)
    assert lan.send_s_per_byte > 0 and lan.recv_s_per_block > 0 and lan.block_bytes > 0  # the calibration's
    assert network_profile(composed("network=none")).free
    assert cfg.measure.repeat == 1  # the tests' own (tests/conftest.py) ...
    monkeypatch.delenv("STPS_REPEAT")
    assert composed().measure.repeat == 7  # ... and the default run's


@pytest.mark.parametrize("override, field", [
    ("network.bandwidth_bps=-1", "network.bandwidth_bps=-1.0"), ("network.block_events=0", "network.block_events=0"),
    ("network.headline=fastest", "network.headline='fastest'"), ("measure.repeat=0", "measure.repeat=0"),
    ("measure.min_bottleneck_s=-1", "measure.min_bottleneck_s=-1.0"),
    ("network.sweep_bandwidths_bps=[1e9,-5]", "network.sweep_bandwidths_bps")])
def test_bad_network_and_measure_values_name_the_field(override, field):
    with pytest.raises(ConfigError) as err:
        validate(composed(override))
    assert field in str(err.value) and "allowed" in str(err.value)


def test_validate_asks_the_families_strategies_and_adjuster_of_the_job_for_their_own_rules(monkeypatch, capsys):
    """`check_run` hooks (Family, Strategy, Adjuster): a refusal names the field, the value and what
    is allowed; under strategy=all a refused strategy is skipped with one line and the others run."""
    from harness.core.params import RunRefused
    from harness.families import registry as families
    from harness.run import config as run_config
    from strategies.adjust_base import get_adjuster

    def refuse(message, skip=None):
        def check_run(cls, cfg, job):
            raise RunRefused(message, skip)
        return classmethod(check_run)

    with monkeypatch.context() as m:
        m.setattr(families.get("range"), "check_run", refuse("workload.queries=1 is invalid; allowed: more"))
        with pytest.raises(ConfigError, match=r"workload.queries=1 is invalid; allowed: more"):
            validate(composed("strategy=grid"))
    with monkeypatch.context() as m:
        m.setattr(registry.get("kdtree"), "check_run", refuse("workers=8 is invalid; allowed: 4", "workers=8: too many"))
        with pytest.raises(ConfigError, match=r"workers=8 is invalid; allowed: 4"):
            validate(composed("strategy=kdtree"))
        labels = [r.label for r in validate(composed("strategy=all"))]
        assert "kdtree" not in labels and "grid" in labels
        assert run_config.SKIPPED == ["kdtree: workers=8: too many"]
        assert "skipped kdtree: workers=8: too many" in capsys.readouterr().err
    with monkeypatch.context() as m:
        m.setattr(get_adjuster("gr"), "check_run", refuse("adjust.params.tau=2 is invalid; allowed: < 1"))
        with pytest.raises(ConfigError, match=r"adjust.params.tau=2 is invalid; allowed: < 1"):
            validate(composed("strategy=grid", "adjust=gr", "epochs.size=100"))
    validate(composed("strategy=grid", "adjust=gr", "epochs.size=100"))  # the hooks' defaults refuse nothing


def test_the_former_name_of_the_frequent_terms_family_is_refused_with_its_new_name(tmp_path):
    """`terms` was the frequent_terms family's name and is the keyword column's: a config or an event
    file that still uses it is told the name to use."""
    from datasets.workloads.events_file import validate_file_workload
    from harness.core.events import TERMS
    from harness.families import registry as families

    with pytest.raises(ConfigError, match=r"workload.family='terms' is invalid; allowed: frequent_terms \(the 'terms'"):
        validate(composed("workload=stq_q", "workload.family=terms"))
    with pytest.raises(ConfigError, match=r"index.terms=.* is invalid; allowed: frequent_terms \(the 'terms'"):
        validate(composed("+index.terms.cells_per_side=8"))
    with pytest.raises(ValueError, match=r"unknown query family 'terms' \('terms' was renamed 'frequent_terms'\)"):
        families.get("terms")
    path = tmp_path / "e.csv"
    path.write_text('ts,kind,family,id,x,y,xmin,ymin,xmax,ymax,terms,k,tau\n0,object,,0,1,1,,,,,1 2,,\n'
                    '1,snapshot,terms,5,,,0,0,10,10,,2,5\n')
    cfg = composed("workload=stq_q", "workload.source=file", f"workload.path={path}").workload
    with pytest.raises(ValueError, match=r"column 'family' has 'terms', row 2; allowed: frequent_terms \(the 'terms'"):
        validate_file_workload(cfg, TERMS)


def test_a_job_is_resolved_once_and_its_skipped_lines_print_once(monkeypatch, capsys, tmp_path):
    """Issue 49 part 4: `python -m harness`'s entry (run_experiment) resolves the job once: the
    workload's families are computed once, every check_run hook receives that one Job, and with
    strategy=all each run it leaves out is said once."""
    from harness.families import registry as families
    from harness.run import config as run_config
    from harness.run import record, runner

    calls = {"families": 0, "resolve": 0}
    seen_jobs = []
    configured, resolve = run_config.configured_families, run_config.resolve_job

    def counted_families(cfg):
        calls["families"] += 1
        return configured(cfg)

    def counted_resolve(cfg):
        calls["resolve"] += 1
        return resolve(cfg)

    def remember(cls, cfg, job):
        seen_jobs.append(job)

    monkeypatch.setattr(run_config, "configured_families", counted_families)
    monkeypatch.setattr(runner, "resolve_job", counted_resolve)
    monkeypatch.setattr(families.get("range"), "check_run", classmethod(remember))
    monkeypatch.setattr(registry.get("grid"), "check_run", classmethod(remember))
    monkeypatch.setattr(record, "unfinished", lambda cfg, runs, root: [])  # stop before Spark starts
    cfg = composed("strategy=all", "adjust=gr", "epochs.size=100", "workload=tiny", f"results_dir={tmp_path}",
                   "mlflow.enabled=false", "progress=false")
    assert runner.run_experiment(cfg) == []
    assert calls == {"families": 1, "resolve": 1}
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("skipped ")]
    assert lines and len(lines) == len(set(lines))  # adjust=gr leaves some out, each said once
    assert len(set(map(id, seen_jobs))) == 1 and len(seen_jobs) == 2  # the family's and grid's hooks, one Job
    job = seen_jobs[0]
    assert job.families == ("range",) and job.source == "generator" and not job.snapshots
    full = resolve(cfg)
    assert [s[len("skipped "):] for s in lines] == list(full.skipped) == run_config.SKIPPED
    assert full.adjuster is not None and full.adjuster.name == "gr" and "grid" in [r.name for r in full.runs]
