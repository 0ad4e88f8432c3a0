"""Top-k's own figures (harness/families/topk/figures.py), which the report asks the family for:
AMP, EMP, the expiry share and the buffers' mean size from the workers' counters and statistics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.families import registry as families
from harness.families.topk.figures import amp_emp, buffer_size_mean


def test_amp_and_emp_divide_the_phase_clocks_by_the_copies():
    """AMP: arrival time over the message copies the workers got; EMP: expiry time over the copies
    that expired; the expiry share: expiry time over the index's wall time (the phase clocks' own
    clock, not the CPU busy time); NaN for runs without top-k work (no
    phase time, no expiries)."""
    w = pd.DataFrame({"objects": [300.0, 100.0], "arrival_s": [0.003, 0.001], "expiries": [50.0, 150.0],
                      "expiry_s": [0.002, 0.0], "index_wall_s": [0.006, 0.002], "busy_s": [0.001, 0.001]})
    got = amp_emp(w)
    assert got["amp_us"] == pytest.approx(10.0) and got["emp_us"] == pytest.approx(10.0)
    assert got["expiry_share"] == pytest.approx(0.25)  # 2 ms of expiries in 8 ms of the index's time
    none = amp_emp(pd.DataFrame({"objects": [5.0], "arrival_s": [0.0], "expiries": [0.0], "expiry_s": [0.0],
                                  "index_wall_s": [0.001], "busy_s": [0.001]}))
    assert np.isnan(none["amp_us"]) and np.isnan(none["emp_us"]) and np.isnan(none["expiry_share"])


def test_the_buffer_size_is_the_mean_over_the_replicas_kept():
    assert buffer_size_mean([{"buffered": 30, "kept": 3}, {"buffered": 10, "kept": 2}]) == 8.0
    assert np.isnan(buffer_size_mean([{"kept": 3}])) and np.isnan(buffer_size_mean([]))  # no buffers: another family


def test_the_family_declares_every_figure_it_returns():
    fam = families.get("topk")
    workers = pd.DataFrame({c: [0.0] for c in ("objects", "busy_s", *fam.counters)})
    assert set(fam.summarise(workers, [])) == {m.name for m in fam.metrics}
