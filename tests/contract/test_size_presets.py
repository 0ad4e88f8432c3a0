"""The size sweeps (conf/experiment/size_*.yaml): every point of each composes with Hydra and
validates; each sweeps its size knob (experiment.x) upward from a small step toward the paper's
size in conf/sizes.yaml; every claim naming a sweep (`sizes:`) compares variants the sweep runs, in
cells it produces once narrowed as harness/report/sizes.py narrows them; and only
`make reproduce PAPERS=sizes` runs the sweeps."""

from __future__ import annotations

import pytest

from harness.report import claims, sizes
from harness.run import reproduce
from tests.contract.test_claims_presets import KEYS, PRESET_DIR, _listed, _norm, produced

SWEEPS = sorted(p.stem for p in PRESET_DIR.glob("size_*.yaml"))
META = sizes.sweeps()
ALL = claims.load_claims()


def test_there_is_a_sweep_per_paper_and_each_is_described():
    assert {"size_ps2stream", "size_sstd", "size_dkmsks", "size_dskype", "size_tornado"} <= set(SWEEPS)
    assert set(META) == set(SWEEPS)
    assert {m["paper"] for m in META.values()} == {"ps2stream", "sstd", "dkmsks", "dskype", "tornado"}


@pytest.mark.parametrize("sweep", SWEEPS)
def test_every_step_composes_validates_and_walks_toward_the_papers_size(sweep):
    p = produced(sweep)  # composes every point of hydra.sweeper.params and validates its runs
    assert p.x, f"{sweep} sets no experiment.x (its size knob)"
    steps = sorted({c[3] for c in p.cells})
    assert len(steps) >= 3 and all(isinstance(s, float) and s > 0 for s in steps), steps
    assert max(steps) >= 1_000_000, "at least one step at a million subscriptions or stored objects"
    assert max(steps) < META[sweep]["paper_size"], "the sweep walks toward the paper's size, not past it"
    assert len(p.variants) >= 2
    # the step runner reads the same steps from the YAML
    knob, listed = reproduce_axis(sweep)
    assert knob == p.x and [float(s) for s in listed] == steps


def reproduce_axis(sweep):
    from harness.run.sizes import sweep_axis
    return sweep_axis(sweep)


@pytest.mark.parametrize("sweep", SWEEPS)
def test_the_claims_naming_a_sweep_can_be_read_at_its_steps(sweep):
    named = [c for c in ALL if c.get("sizes") == sweep]
    assert named, f"no claim names {sweep}"
    p = produced(sweep)
    bad = []
    for c in named:
        chk = c["check"]
        if chk.get("across"):
            bad.append(f"{c['id']}: check.across is not judged per step")
            continue
        for v in [*claims._subjects(chk), *_listed(chk.get("others"))]:
            if v not in p.variants:
                bad.append(f"{c['id']}: {v!r} is not run by {sweep}")
        for key in ("dataset", "workload", "workers"):
            if key in (chk.get("where") or {}):
                have = {cell[KEYS.index(key)] for cell in p.cells}
                if not {_norm(v) for v in _listed(chk["where"][key])} & have:
                    bad.append(f"{c['id']}: where {key}={chk['where'][key]} meets none of {sweep}'s {sorted(have)}")
    assert not bad, "\n".join(bad)


def test_only_papers_sizes_runs_the_sweeps():
    default = reproduce.presets_of(list(reproduce.DEFAULT))
    assert not [p for p in default if p.startswith("size_")]
    assert sorted(reproduce.presets_of(["sizes"])) == SWEEPS
    assert not [p for p in reproduce.presets_of(["scale"]) if p.startswith("size_")]
    assert reproduce.parse_papers("sizes") == ["sizes"]


def test_reproduce_runs_a_sweep_step_by_step(tmp_path, monkeypatch):
    seen = []

    class Done:
        returncode = 0

    monkeypatch.setattr(reproduce.subprocess, "run", lambda cmd, **kw: seen.append(cmd) or Done())
    reproduce.run_preset("size_tornado", tmp_path, ["mlflow.enabled=false"], tmp_path / "a.log")
    reproduce.run_preset("tornado_routing", tmp_path, [], tmp_path / "b.log")
    assert seen[0][1:5] == ["-m", "harness.run.sizes", "size_tornado", "--results"]
    assert seen[0][-1] == "mlflow.enabled=false"
    assert seen[1][1:4] == ["-m", "harness", "experiment=tornado_routing"]
