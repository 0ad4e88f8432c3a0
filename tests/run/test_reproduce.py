"""`make reproduce`'s choice of presets and papers (running them is what the command does; the
presets themselves are tested where they are defined)."""

from __future__ import annotations

import pytest

from harness.run import reproduce


def test_a_paper_runs_its_own_presets_and_those_its_claims_read():
    claims = [{"id": "a", "paper": "sstd", "preset": "grand_range"},
              {"id": "b", "paper": "dskype", "preset": "network_sensitivity"}]
    tornado = reproduce.presets_of(["tornado"], claims)
    assert tornado == ["tornado_adaptivity", "tornado_routing"]
    sstd = reproduce.presets_of(["sstd"], claims)
    assert sstd[-1] == "grand_range" and all(p.startswith("sstd_") for p in sstd[:-1])
    skype = reproduce.presets_of(["skype"], claims)  # Skype's and DSkype's presets, and its claims' ("dskype")
    assert {"skype_reevaluation", "dskype_k", "network_sensitivity"} <= set(skype)
    assert not [p for p in reproduce.presets_of(list(reproduce.DEFAULT), claims) if p.startswith("scale_")]
    assert set(reproduce.presets_of(["scale"], claims)) == {"scale_million", "scale_range"}


def test_papers_are_checked_before_anything_runs():
    assert reproduce.parse_papers("all") == list(reproduce.DEFAULT)
    assert reproduce.parse_papers("sstd, tornado") == ["sstd", "tornado"]
    with pytest.raises(SystemExit, match="PAPERS='sstdd' is invalid; allowed: all, or"):
        reproduce.parse_papers("sstdd")
