"""The sizes the count mode reached, read off committed count tables (issue 51 part 1)."""

import json

import numpy as np
import pandas as pd
import pytest

from harness.report import count_sizes
from harness.report.results import PROJECT_ROOT

SCALE = PROJECT_ROOT / "docs" / "reproduction" / "2026-11-29" / "scale"


def test_every_committed_count_run_is_a_row_with_its_own_meta():
    frame = count_sizes.reached(SCALE)
    metas = sorted(SCALE.rglob("meta.json"))
    assert len(frame) == len(metas) >= 3
    for meta_file in metas:
        meta = json.loads(meta_file.read_text())
        row = frame.set_index("run").loc[str(meta_file.parent.relative_to(SCALE))]
        assert row["peak_gib"] == pytest.approx(meta["peak_rss_bytes"] / 2 ** 30)
        assert row["events_full"] == meta["events_full"] and row["object_sample"] == meta["object_sample"]
        assert row["queries"] == meta["workload"]["queries"]


def test_a_sampled_run_states_the_relative_error_of_its_measured_totals():
    frame = count_sizes.reached(SCALE).set_index("run")
    sampled = frame[frame["object_sample"] < 1]
    assert len(sampled)
    run = sampled.index[0]
    workers = pd.read_parquet(SCALE / run / "counts_workers.parquet")
    measured = workers[workers["epoch"] > 0]
    expected = np.sqrt((measured["results_se"] ** 2).sum()) / measured["results"].sum()
    assert sampled.loc[run, "results_rel_se"] == pytest.approx(expected) and 0 < expected < 0.1
    assert (frame.loc[frame["object_sample"] >= 1, "results_rel_se"] == 0).all()


def test_the_page_names_each_run_s_command_and_no_machine_path():
    lines = count_sizes.markdown(count_sizes.reached(SCALE))
    assert sum(line.startswith("- ") and "`python -m harness.counts" in line for line in lines) >= 3
    assert not any("/work/" in line or "/tmp/" in line for line in lines)
    assert count_sizes.markdown(pd.DataFrame()) == ["No count run (no meta.json) under the folder."]
