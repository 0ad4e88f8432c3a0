"""Contract between conf/claims.yaml and conf/experiment/: every claim reads cells its preset
really produces.

For each preset a claim names, the preset is composed with Hydra (the real config tree, every
point of its `hydra.sweeper.params`) and the cells its runs would carry are collected: (dataset,
workload, workers, x, facet), with the variants it runs (labels, and "<strategy> + <adjuster>" for
an adjusted run, as harness/report/results.labelled names them). A claim then has to:

- name an existing preset, a registered metric, a unique id and a scope in (paper, extension);
- list in `check.where` only values its preset produces, and every combination the engine will
  expect (its listed values crossed with the preset's values for the keys it leaves out, as
  harness/report/claims._expected_cells builds them) must be a produced cell;
- compare variants the preset runs (or, with check.across, datasets or x values it runs);
- for linear, gap_grows and check.across: x, read a preset that sets experiment.x with enough x
  values; for scales, two worker counts or more.

The last test feeds deliberately broken claims and asserts that each is caught, so the contract
can fail."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import lru_cache

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from harness.report import claims, metrics
from harness.report.results import PROJECT_ROOT, RUNS_TABLE_COLUMNS
from harness.run.config import register_configs, validate

register_configs()
PRESET_DIR = PROJECT_ROOT / "conf" / "experiment"
KEYS = ("dataset", "workload", "workers", "x", "facet")


def _composed(*overrides):
    with initialize_config_dir(version_base="1.3", config_dir=str(PROJECT_ROOT / "conf")):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=True)


def _norm(v):
    """A cell value as the engine compares it: numbers as floats, the rest as strings."""
    if v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return str(v)


def _label(v) -> str:
    """An x value as check.across: x names it (harness/report/claims/checks.num)."""
    return f"{v:g}" if isinstance(v, float) else str(v)


@dataclass
class Produced:
    name: str
    x: str | None
    cells: set[tuple] = field(default_factory=set)  # normalised (dataset, workload, workers, x, facet)
    variants: set[str] = field(default_factory=set)
    runs: set[tuple] = field(default_factory=set)  # (variant, *cell)


@lru_cache(maxsize=None)
def produced(name: str) -> Produced:
    base = _composed(f"experiment={name}")
    params = base.hydra.sweeper.params or {}
    axes = [[f"{k}={v.strip()}" for v in str(vals).split(",")] for k, vals in params.items()]
    out = Produced(name, base.experiment.x)
    for point in itertools.product(*axes) if axes else [()]:
        cfg = _composed(f"experiment={name}", *point)
        x = OmegaConf.select(cfg, cfg.experiment.x) if cfg.experiment.x else None
        facet = OmegaConf.select(cfg, cfg.experiment.facet) if cfg.experiment.get("facet") else None
        cell = tuple(_norm(v) for v in (cfg.dataset.name, cfg.workload.name, int(cfg.workers), x, facet))
        out.cells.add(cell)
        adjust = cfg.adjust.name if cfg.get("adjust") is not None else "none"
        for run in validate(cfg):
            variant = run.label if adjust in (None, "none") else f"{run.label} + {adjust}"
            out.variants.add(variant)
            out.runs.add((variant, *cell))
    return out


def _listed(v) -> list:
    return [] if v is None else list(v) if isinstance(v, (list, tuple)) else [v]


def problems(claim: dict, preset_of=produced) -> list[str]:
    """What is wrong with one claim against the cells its preset produces ([] if nothing)."""
    cid, chk = claim.get("id"), claim.get("check") or {}
    out: list[str] = []
    if claim.get("scope", "paper") not in claims.SCOPES:
        out.append(f"{cid}: scope {claim.get('scope')!r} not in {claims.SCOPES}")
    if "experiment" in chk:
        out.append(f"{cid}: check.experiment is not read any more; use preset")
    if not metrics.known(str(chk.get("metric"))):
        out.append(f"{cid}: metric {chk.get('metric')!r} is not registered")
    elif chk.get("metric") not in RUNS_TABLE_COLUMNS:
        out.append(f"{cid}: metric {chk.get('metric')!r} is registered but no runs-table column")
    name = claim.get("preset")
    if not isinstance(name, str) or not (PRESET_DIR / f"{name}.yaml").exists():
        return out + [f"{cid}: preset {name!r} is not a file of conf/experiment/"]
    p = preset_of(name)
    where = chk.get("where") or {}
    across, kind = chk.get("across", "variant"), chk.get("kind")
    for key, values in where.items():
        if key not in KEYS:
            out.append(f"{cid}: where key {key!r} is not a cell key {KEYS}")
            continue
        i = KEYS.index(key)
        have = {c[i] for c in p.cells}
        for v in _listed(values):
            if _norm(v) not in have:
                out.append(f"{cid}: where {key}={v!r} is not produced by {name} (it produces {sorted(map(str, have))})")
    if out:
        return out
    # the cells the claim reads: the listed values, the preset's others for the keys left out
    listed = {k: {_norm(v) for v in _listed(where[k])} for k in KEYS if k in where}
    if across == "x":
        listed.pop("x", None)
    cells = {c for c in p.cells if all(c[KEYS.index(k)] in vals for k, vals in listed.items())}
    if not cells:
        return out + [f"{cid}: no cell of {name} matches where={where}"]
    subjects = [str(s) for s in claims._subjects(chk)] if across == "x" else claims._subjects(chk)
    others = [str(o) for o in _listed(chk.get("others"))] if across == "x" else _listed(chk.get("others"))
    if across == "variant":
        for v in [*subjects, *others]:
            if v not in p.variants:
                out.append(f"{cid}: variant {v!r} is not run by {name} (it runs {sorted(p.variants)})")
    elif across == "dataset":
        have = {c[0] for c in cells}
        out += [f"{cid}: dataset {d!r} is not in {name}'s cells" for d in [*subjects, *others] if _norm(d) not in have]
        if chk.get("variant") not in p.variants:
            out.append(f"{cid}: check.variant {chk.get('variant')!r} is not run by {name}")
    elif across == "x":
        if not p.x:
            out.append(f"{cid}: check.across: x needs a preset with experiment.x; {name} sets none")
        have = {_label(c[3]) for c in cells if c[3] is not None}
        out += [f"{cid}: x value {s!r} is not swept by {name} ({sorted(have)})" for s in [*subjects, *others]
                if s not in have]
        if chk.get("variant") not in p.variants:
            out.append(f"{cid}: check.variant {chk.get('variant')!r} is not run by {name}")
    if kind in ("linear", "gap_grows"):
        xs = {c[3] for c in cells if c[3] is not None}
        need = 3 if kind == "linear" else 2
        if not p.x or len(xs) < need:
            out.append(f"{cid}: {kind} needs experiment.x with >= {need} values in its cells; {name} has x="
                       f"{p.x!r} with {len(xs)}")
    if kind == "scales" and len({c[2] for c in cells}) < 2:
        out.append(f"{cid}: scales needs two worker counts or more in its cells")
    if kind in ("better", "ratio_at_least", "bound", "between") and across == "variant":
        # the engine expects every listed combination crossed with the preset's values for the rest
        axes = []
        for i, k in enumerate(KEYS):
            axes.append(sorted(listed[k], key=str) if k in listed else sorted({c[i] for c in cells}, key=str))
        for cell in itertools.product(*axes):
            if cell not in p.cells:
                out.append(f"{cid}: the engine will expect cell {cell} which {name} does not produce")
                break
        for v in [*subjects, *others]:  # every compared variant runs in every cell it reads
            missing = [c for c in cells if (v, *c) not in p.runs]
            if missing:
                out.append(f"{cid}: {v!r} has no run in {len(missing)} of the cells read, e.g. {missing[0]}")
    return out


ALL = claims.load_claims()


def test_ids_are_unique_and_the_file_loads():
    ids = [c["id"] for c in ALL]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    assert len(ALL) >= 150


def test_scopes_and_papers():
    assert {c.get("scope", "paper") for c in ALL} <= set(claims.SCOPES)
    assert {c["paper"] for c in ALL} == {"ps2stream", "sstd", "tornado", "dkmsks", "dskype"}
    for c in ALL:
        assert c.get("setting"), c["id"]  # the paper's setting in words


@pytest.mark.parametrize("preset", sorted({c["preset"] for c in ALL}))
def test_every_claim_reads_cells_its_preset_produces(preset):
    bad = [m for c in ALL if c["preset"] == preset for m in problems(c)]
    assert not bad, "\n".join(bad)


def test_swept_kinds_read_presets_with_an_x():
    for c in ALL:
        chk = c["check"]
        if chk["kind"] in ("linear", "gap_grows") or chk.get("across") == "x":
            assert produced(c["preset"]).x, c["id"]


def test_the_contract_catches_broken_claims():
    good = {"id": "ok", "paper": "ps2stream", "preset": "ps2stream_baselines", "setting": "s",
            "check": {"kind": "better", "metric": "throughput_eps", "subject": "grid", "others": ["text_metric"],
                      "where": {"workload": ["sts_q1"], "workers": [8], "dataset": ["synthetic"]}}}
    assert problems(good) == []

    def broken(**change):
        c = {**good, "check": {**good["check"]}}
        for k, v in change.items():
            if k.startswith("check_"):
                c["check"][k[6:]] = v
            else:
                c[k] = v
        return problems(c)

    assert any("not a file" in m for m in broken(preset="no_such_preset"))
    assert any("workers=7" in m for m in broken(check_where={"workers": [7]}))
    assert any("sts_q3" in m for m in broken(check_where={"workload": ["sts_q3"]}))
    assert any("'kdt' is not run" in m for m in broken(check_subject="kdt"))
    assert any("not registered" in m for m in broken(check_metric="thruput"))
    assert any("no runs-table column" in m for m in broken(check_metric="dispatcher_s"))
    assert any("scope" in m for m in broken(scope="ours"))
    assert any("check.experiment" in m for m in broken(check_experiment="ps2stream_hybrid"))
    # a swept kind on a preset without x, and an x value the preset does not sweep
    assert any("experiment.x" in m for m in broken(check_kind="linear", check_value=0.9))
    gap = {"id": "g", "paper": "sstd", "preset": "sstd_srq", "setting": "s",
           "check": {"kind": "better", "across": "x", "variant": "qttree", "metric": "snapshot_latency_mean_ms",
                     "subject": "0.5", "others": ["1e-06"], "where": {"workers": [8]}}}
    assert any("'0.5' is not swept" in m for m in problems(gap))
    # a combination the engine would expect but the preset never runs (geonames runs only STS-Q1)
    grand = {"id": "gr", "paper": "tornado", "preset": "grand_range", "setting": "s",
             "check": {"kind": "better", "metric": "throughput_eps", "subject": "agrid", "others": ["hash"],
                       "where": {"workload": ["sts_q1", "sts_q2"], "workers": [16]}}}
    assert any("does not produce" in m for m in problems(grand))


PROFILE_OF = {"ps2stream_": "ps2stream", "sstd_": "sstd", "tornado_": "tornado", "dskype_": "dskype",
              "skype_": "dskype", "dkmsks_": "dkmsks"}


@pytest.mark.parametrize("preset", sorted(p.stem for p in PRESET_DIR.glob("*.yaml")))
def test_each_papers_presets_use_its_network_profile(preset):
    """A paper's presets charge its own cluster (conf/network/<paper>.yaml); the harness's own
    presets (grand_range, network_sensitivity, scale_*) keep the generic lan; a paper's size sweep
    (size_<paper>) is its paper's."""
    from harness.run.config import network_profile

    profile = network_profile(_composed(f"experiment={preset}"))
    profile.check()
    paper_preset = preset.removeprefix("size_") + "_"  # a size sweep charges its paper's cluster too
    want = next((v for k, v in PROFILE_OF.items() if paper_preset.startswith(k)), "lan")
    assert profile.name == want and profile.headline == "network", (preset, profile.name)
    assert profile.bandwidth_bps > 0 and profile.result_bytes in (16, 24)
    if want == "ps2stream":  # no bandwidth stated: a sweep around the headline
        assert len(profile.sweep_bandwidths_bps) >= 4
