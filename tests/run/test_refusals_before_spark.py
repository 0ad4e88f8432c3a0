"""Issue 42: refusals before Spark, one line each (run/config.validate starts no Spark session):
an event file's row rules through the whole config validation, and `strategy=all` running what
it can and saying what it skipped and why."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.csv as pcsv
import pytest

from harness.report.results import PROJECT_ROOT
from harness.run import config as run_config
from harness.run.config import ConfigError, validate
from tests.run.test_config import composed

EXAMPLE = PROJECT_ROOT / "examples" / "events" / "all_types.csv"


def _with_row(tmp_path, **changes):
    """The all-types example with the SKQ (id 11) changed."""
    t = pcsv.read_csv(EXAMPLE, convert_options=pcsv.ConvertOptions(column_types={"terms": pa.string()})).to_pylist()
    at = next(i for i, r in enumerate(t) if r["id"] == 11 and r["kind"] == "snapshot")
    t[at].update(changes)
    path = tmp_path / "e.csv"
    pcsv.write_csv(pa.Table.from_pylist(t), path)
    return path, at + 1


def test_an_skq_with_a_small_rectangle_is_refused_in_validation(tmp_path):
    path, row = _with_row(tmp_path, xmin=0.0, ymin=0.0, xmax=10.0, ymax=10.0)
    with pytest.raises(ConfigError) as err:
        validate(composed("workload=sstd_mix", "workload.source=file", f"workload.path={path}", "strategy=hash"))
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"events file {path}: column 'xmin/ymin/xmax/ymax' has (0.0, 0.0, 10.0, 10.0), row {row}; "
                          "allowed: a rectangle covering every object of the file")


def test_the_all_types_file_passes_validation_under_sstd_mix():
    """A kNN insert with a point, k and a keyword suffices (README), under a range-family workload."""
    validate(composed("workload=sstd_mix", "workload.source=file", f"workload.path={EXAMPLE}", "strategy=hash"))


def test_strategy_all_runs_what_it_can_and_lists_what_it_skipped(capsys):
    runs = validate(composed("workload=topk_q", "strategy=all", "workload.window=2000", "epochs.size=2000"))
    labels = [r.label for r in runs]
    assert "hash" in labels and "dskype_prefix" not in labels and "dskype_spatial_first" not in labels
    skipped = {line.split(":")[0] for line in run_config.SKIPPED}
    assert {"dskype_prefix", "dskype_spatial_first"} <= skipped and not skipped & set(labels)
    err = capsys.readouterr().err
    assert ("skipped dskype_prefix: epochs.size=2000: an epoch of the top-k window (workload.window=2000 messages) or "
            "more, and it routes by thresholds that hold for a whole epoch; allowed: epochs.size below 2000") in err
    # a named one is still refused
    with pytest.raises(ConfigError, match=r"epochs.size=2000 is invalid"):
        validate(composed("workload=topk_q", "strategy=dskype_prefix", "workload.window=2000", "epochs.size=2000"))
    # nothing skipped when every run can go
    validate(composed("workload=topk_q", "strategy=all", "workload.window=2000", "epochs.size=500"))
    assert run_config.SKIPPED == []


def test_a_topk_file_with_one_epoch_as_long_as_its_window_skips_threshold_routing(capsys):
    """An event file's measured part is its events after the warm-up (here 88 - 12 = 76), not the
    generator's measured_messages."""
    base = ("workload=topk_q", "workload.source=file", f"workload.path={EXAMPLE}", "workload.warmup_events=12")
    runs = validate(composed(*base, "strategy=all", "workload.window=76"))
    assert "dskype_prefix" not in [r.label for r in runs]
    assert "skipped dskype_prefix: epochs.size=0: an epoch of the top-k window (workload.window=76" in \
        capsys.readouterr().err
    runs = validate(composed(*base, "strategy=all", "workload.window=77"))
    assert "dskype_prefix" in [r.label for r in runs] and run_config.SKIPPED == []
