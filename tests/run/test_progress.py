"""The sweep's progress line: how many jobs a multirun makes, and what the line says."""

from __future__ import annotations

from harness.run.progress import SweepState, count_jobs


def test_jobs_are_the_product_of_the_swept_values_from_the_command_line_and_the_preset():
    assert count_jobs(["workers=2,4", "strategy=all", "strategy.include=[a,b,c]"], None) == 2
    assert count_jobs(["workers=2,4", "seed=range(1,4)"], {"+scenario": "a,b,c", "tag": "x"}) == 18
    assert count_jobs(["workers=8"], {}) == 1
    # a key given on the command line replaces the preset's (Hydra's basic sweeper does)
    preset = {"+scenario": "a,b,c,d", "workers": "4,8,16,32"}
    assert count_jobs(["+scenario=a"], preset) == 4
    assert count_jobs(["+scenario=a", "workers=8"], preset) == 1
    assert count_jobs(["workers=2,4"], preset) == 8


def test_the_line_counts_jobs_and_runs_and_estimates_the_time_left():
    state = SweepState(jobs=4)
    assert state.line().startswith("sweep: job 1/4, 0 runs done") and "left" not in state.line()
    state.jobs_done, state.runs_done, state.started = 1, 17, state.started - 30.0
    line = state.line()
    assert "job 2/4, 17 runs done" in line and "about 1m3" in line  # 3 jobs left at about 30 s each
    state.jobs_done = 4
    assert state.summary().startswith("sweep: 4 of 4 jobs, 17 runs")
