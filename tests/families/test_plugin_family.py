"""The family plugin path is real, not range-shaped: a toy family (examples/families/first_k.py,
copied to a temporary module outside the project) registers itself by being imported, and runs
through the real Spark pipeline with two strategies (and in process with every one), exact against
its own oracle, with merger state across epochs, the epoch's query events at the merge and
feedback to the router; no engine file names it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from harness.families import registry as families
from harness.report.results import PROJECT_ROOT
from harness.run.config import ConfigError, register_configs, validate
from strategies import registry

register_configs()
SOURCE = PROJECT_ROOT / "examples" / "families" / "first_k.py"


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plugin")
    shutil.copy(SOURCE, folder / "toy_first_k.py")
    sys.path.insert(0, str(folder))
    yield "toy_first_k"
    sys.path.remove(str(folder))


def config(results_dir, *overrides):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        return compose(config_name="config", overrides=[
            "workload=tiny", "dataset.size=4000", "progress=false", "seed=5", "mlflow.enabled=false",
            f"results_dir={results_dir}", *overrides])


def test_an_unloaded_family_is_an_error_naming_the_known_ones(tmp_path):
    with pytest.raises(ConfigError, match="workload.family='first_k'.*range"):
        validate(config(tmp_path, "workload.family=first_k"))


def test_the_plugin_registers_and_routes_like_range(plugin, tmp_path):
    cfg = config(tmp_path, f"families=[{plugin}]", "workload.family=first_k", "strategy=all")
    runs = validate(cfg)
    assert "first_k" in families.names()
    assert [r.name for r in runs] == registry.supporting("range") == registry.supporting("first_k")


def test_every_strategy_in_process(plugin):
    from harness.engine.simulate import simulate
    from tests.streams import random_stream

    families.load_plugins([plugin])
    fam = families.get("first_k")
    ev = random_stream(seed=3, n_objects=900, n_queries=60)
    q = ev.family >= 0
    ev.cols["family"][q] = fam.code
    ev.cols["k"][q] = 1 + ev.id[q] % 3
    expected = None
    for name in registry.supporting("first_k"):
        res = simulate(ev, 200, name, 4, epoch_events=250)
        assert res.exact, name
        expected = expected or res.digest
        assert res.digest == expected
        assert res.feedback_rows > 0  # some subscriptions filled up, and the router heard it
    # repeated: the plugin's own result type (an Arrow table) is compared between repetitions
    assert simulate(ev, 200, name, 4, epoch_events=250, repeat=2).digest == expected
    capped = int(np.unique(fam.oracle(ev) >> 32, return_counts=True)[1].max())
    assert capped <= 3  # k is at most 3: the cap is real, the results are not range's


@pytest.mark.spark
@pytest.mark.slow  # CI time: make test-cluster runs it
def test_two_strategies_on_spark_match_the_oracle_across_epochs(spark, plugin, tmp_path):
    from harness.run.runner import run_experiment

    rows = run_experiment(config(tmp_path, f"families=[{plugin}]", "workload.family=first_k", "strategy=all",
                                 "strategy.include=[grid,kdtree]", "workers=3", "epochs.size=400"))
    assert [r["strategy"] for r in rows] == ["grid", "kdtree"]
    for r in rows:
        assert r["status"] == "ok", r.get("traceback")
        assert r["family"] == "first_k"
        assert r["epochs"] > 1  # merger state had to carry over
        assert r["oracle_ok"] is True, r["result_digest"]
        assert r["result_count"] > 0
        assert r["feedback_rows"] > 0
    assert rows[0]["result_digest"] == rows[1]["result_digest"]


# -- its own formats: an event file of its rows, its results exported (issue 49) -------------------


def _first_k_file(path: Path, **bad) -> Path:
    """30 objects on the diagonal (x = y = id, terms 1 2), subscription 1 (the square [0, 20]^2,
    keyword 1, k = 4) after object 2, subscription 2 ([10, 40]^2, keyword 2, k = 30) after object
    6; each named by the plugin's own family name. `bad`: columns of subscription 1 replaced."""
    import pandas as pd

    rows = [dict(ts=float(i), kind="object", id=i, x=float(i), y=float(i), terms="1 2") for i in range(30)]
    rows.insert(3, {**dict(ts=2.5, kind="insert", family="first_k", id=1, xmin=0.0, ymin=0.0, xmax=20.0, ymax=20.0,
                           terms="1", k=4), **bad})
    rows.insert(8, dict(ts=6.5, kind="insert", family="first_k", id=2, xmin=10.0, ymin=10.0, xmax=40.0, ymax=40.0,
                        terms="2", k=30))
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _file_cfg(path: Path):
    from harness.families.workload import WorkloadConfig

    return WorkloadConfig(family="first_k", source="file", path=str(path), warmup_events=2)


def test_the_plugin_reads_its_own_event_file_with_no_shared_module_naming_it(plugin, tmp_path):
    """Its `file_types` are all the shared reader needs: the rows name it, its rules refuse a bad
    one naming the row and the field, and the stream runs exact; no shared module names it."""
    from harness.engine.simulate import simulate

    families.load_plugins([plugin])
    fam = families.get("first_k")
    cfg = _file_cfg(_first_k_file(tmp_path / "first_k.csv"))
    fam.validate_workload(cfg)
    wl = fam.build_workload(None, np.ones(4), (0.0, 0.0, 30.0, 30.0), cfg, 0)
    q = wl.events.family >= 0
    assert set(wl.events.family[q].tolist()) == {fam.code} and sorted(wl.events.k[q].tolist()) == [4, 30]
    keys = fam.oracle(wl.events)
    assert ((keys[(keys >> 32) == 1]) & 0xFFFFFFFF).tolist() == [3, 4, 5, 6]  # the first 4 after it, not 18
    assert ((keys[(keys >> 32) == 2]) & 0xFFFFFFFF).tolist() == list(range(10, 30))
    res = simulate(wl.events, wl.warmup, "grid", 3, epoch_events=10)
    assert res.exact and res.digest.startswith("24:")
    with pytest.raises(ValueError, match=r"column 'k' has 0, row 4; allowed: an integer >= 1 for every first_k insert"):
        fam.validate_workload(_file_cfg(_first_k_file(tmp_path / "k0.csv", k=0)))
    with pytest.raises(ValueError, match=r"column 'kind' has 'snapshot', row 4; allowed: insert or delete \(a first_k "
                                         r"query has no snapshot form\)"):
        fam.validate_workload(_file_cfg(_first_k_file(tmp_path / "snap.csv", kind="snapshot", tau=3.0)))
    shared = [p for top in ("harness", "datasets", "strategies") for p in (PROJECT_ROOT / top).rglob("*.py")
              if "first_k" in p.read_text()]
    assert not shared  # nothing outside examples/ knows it


@pytest.mark.spark
def test_the_plugins_event_file_round_trips_through_spark_and_exports(spark, plugin, tmp_path):
    """The plugin's own event file through the real pipeline (two workers, three epochs), equal to
    its oracle, its results exported by `python -m harness.export` through its ResultFormat (the
    default: (query, object) pairs), re-digested to the run's digest; the row names the file."""
    import pandas as pd

    from harness.export import export
    from harness.run.runner import run_experiment

    path = _first_k_file(tmp_path / "first_k.csv")
    rows = run_experiment(config(tmp_path, f"families=[{plugin}]", "workload.family=first_k", "workload.source=file",
                                 f"workload.path={path}", "workload.warmup_events=2", "strategy=grid", "workers=2",
                                 "epochs.size=10", "keep_pairs=true"))
    (r,) = rows
    assert r["status"] == "ok", r.get("traceback")
    assert r["oracle_ok"] is True and r["result_count"] == 24 and r["epochs"] > 1
    assert r["dataset"] == "events:first_k.csv"  # not the configured data set it never read
    res = export(r["run_dir"])
    assert res["written"] == {"first_k": 24} and res["digest"] == r["result_digest"]
    out = pd.read_csv(Path(res["out"]) / "first_k.csv")
    assert sorted(out[out.qid == 1].object.tolist()) == [3, 4, 5, 6]
    assert set(out.type) == {"continuous"} and (out.object_id == out.object).all()
    assert (out.ts >= 3.0).all()  # each entered at its object's arrival, after the subscription
