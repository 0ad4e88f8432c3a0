"""`make reproduce`'s choice of presets and papers (running them is what the command does; the
presets themselves are tested where they are defined)."""

from __future__ import annotations

import pytest

from harness.run import reproduce


def test_a_paper_runs_its_own_presets_and_those_its_claims_read():
    claims = [{"id": "a", "paper": "sstd", "preset": "grand_range"},
              {"id": "b", "paper": "dskype", "preset": "network_sensitivity"}]
    tornado = reproduce.presets_of(["tornado"], claims)
    assert tornado == ["tornado_adaptivity", "tornado_keywords", "tornado_routing", "tornado_scalability"]
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


def test_the_time_budget_splits_each_preset_into_its_costs():
    """Two invocations of one preset (a Spark start, data and oracle each, shared by their runs) and
    a run of another preset: every invocation cost is counted once, the rest is what the process
    took beyond its runs."""
    import pandas as pd

    from harness.report import time_budget

    def run(preset, start, data, oracle, n_runs, fit, work, wall):
        share = (start + data + oracle) / n_runs
        return {"experiment": preset, "code_version": "v", "time_spark_start_s": start, "time_data_s": data,
                "time_oracle_s": oracle, "time_invocation_share_s": share, "build_s": fit, "work_s": work,
                "wall_s": wall, "logging_s": 0.5}

    rows = [run("a", 4.0, 2.0, 10.0, 2, 1.0, 3.0, 6.0), run("a", 4.0, 2.0, 10.0, 2, 1.0, 3.0, 6.0),
            run("a", 6.0, 0.0, 0.0, 1, 2.0, 5.0, 9.0), run("b", 1.0, 1.0, 1.0, 1, 0.0, 1.0, 2.0)]
    table = pd.DataFrame(rows)
    budget = time_budget.preset_budget(table[table["experiment"] == "a"], preset_s=60.0)
    assert budget["spark start"] == pytest.approx(10.0) and budget["data"] == pytest.approx(2.0)
    assert budget["oracle"] == pytest.approx(10.0)
    assert budget["fit"] == pytest.approx(4.0) and budget["measured work"] == pytest.approx(11.0)
    assert budget["per-run overhead"] == pytest.approx(21.0 + 1.5 - 4.0 - 11.0)
    assert sum(budget.values()) == pytest.approx(60.0)  # the process's time, every second placed once
    lines = time_budget.budget_table(table, [("a", 60.0), ("b", 5.0)], version="v")
    assert lines[2].startswith("| a | 3 | 10 | 2 | 10 | 4 | 11 |") and lines[3].startswith("| b | 1 |")
    assert "**all** (share)" in lines[-1]
    assert time_budget.budget_table(table, [("a", 60.0)], version="other")[2].startswith("| a | 0 | 0 |")


def test_each_preset_s_time_counts_for_one_paper_in_the_per_paper_table():
    claims = [{"id": "a", "paper": "sstd", "preset": "grand_range"},
              {"id": "b", "paper": "dkmsks", "preset": "grand_range"}]
    paper_of = reproduce.paper_of_presets(["sstd", "dkmsks"], claims)
    assert paper_of["grand_range"] == "sstd" and paper_of["dkmsks_kmax"] == "dkmsks"
    done = [("sstd_srq", 0, 60.0, 5), ("grand_range", 0, 120.0, 10), ("dkmsks_kmax", 3, 30.0, 0)]
    lines = reproduce.paper_times(done, paper_of)
    assert lines[2] == "| sstd | 2 | 15 | 0:03:00 | - |"
    assert lines[3] == "| dkmsks | 1 | 0 | 0:00:30 | dkmsks_kmax |"
    assert lines[4] == "| **all** | 3 | 15 | **0:03:30** | |"
