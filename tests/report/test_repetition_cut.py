"""The repetition cut reads a run as if it had counted fewer repetitions (issue 50 part 4)."""

import json

import pandas as pd
import pytest

from harness.report import repetition_cut
from harness.report.results import PROJECT_ROOT

RECORD = PROJECT_ROOT / "docs" / "reproduction" / "2026-11-29" / "tables" / "runs.parquet"


def _runs(reps: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"throughput_eps": [999.0], "throughput_eps_ci_lo": [0.0], "throughput_eps_ci_hi": [1e9],
                         "reps_throughput_eps": [json.dumps(reps)], "repetitions": [float(len(reps))],
                         "ci_coverage": [0.97], "experiment": ["p"]})


def test_a_run_cut_to_its_first_three_repetitions_reads_their_median_and_full_range():
    cut = repetition_cut.truncate(_runs([5.0, 1.0, 4.0, 2.0, 6.0, 3.0]), 3)
    row = cut.iloc[0]
    # first three: 5, 1, 4 -> median 4; under six values the interval is their range, coverage 1 - 2/8
    assert (row["throughput_eps"], row["throughput_eps_ci_lo"], row["throughput_eps_ci_hi"]) == (4.0, 1.0, 5.0)
    assert row["ci_coverage"] == pytest.approx(0.75)
    assert json.loads(row["reps_throughput_eps"]) == [5.0, 1.0, 4.0]
    assert row["repetitions"] == 3.0


def test_a_run_with_no_more_repetitions_than_the_cut_keeps_its_figures():
    runs = _runs([5.0, 1.0])
    assert repetition_cut.truncate(runs, 3).equals(runs)


def test_a_cut_to_no_repetition_is_refused():
    with pytest.raises(ValueError, match="counted=0"):
        repetition_cut.truncate(_runs([1.0, 2.0]), 0)


def test_the_record_read_at_its_own_repetitions_moves_no_verdict():
    table = pd.read_parquet(RECORD)
    counted = int(table.loc[table["experiment"] == "tornado_scalability", "repetitions"].max())
    frame = repetition_cut.compare(table, counted, ["tornado_scalability"])
    assert len(frame) and not frame["moved"].any()
    assert set(frame["before"]) == set(frame["after"])


def test_the_work_at_fewer_repetitions_scales_with_them():
    runs = pd.DataFrame({"experiment": ["a", "a", "b"], "work_s": [70.0, 140.0, 60.0],
                         "repetitions": [6.0, 6.0, 2.0], "repetitions_discarded": [1.0, 1.0, 1.0]})
    work = repetition_cut.work_saved(runs, 5).set_index("preset")
    assert work.loc["a", "work_min"] == pytest.approx(210 / 60)
    assert work.loc["a", "cut_min"] == pytest.approx(150 / 60)  # 5 of the 7 repetitions
    assert work.loc["b", "cut_min"] == pytest.approx(1.0)  # ran 3: a cut to 5 adds none
