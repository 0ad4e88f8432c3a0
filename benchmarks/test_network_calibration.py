"""The network model's calibration (harness/engine/calibrate.py) run as part of `make bench`: the
CPU costs of the pipeline's own encoding on this machine, printed beside the other figures, each
against the figure committed in conf/network/lan.yaml (a ratio far from 1 says: re-calibrate)."""

from __future__ import annotations

import yaml

from harness.engine.calibrate import fit, measure
from harness.report.results import PROJECT_ROOT

UNITS = {"s_per_message": ("ns", 1e9), "s_per_byte": ("ns", 1e9), "s_per_block": ("us", 1e6)}


def test_network_calibration(record):
    committed = yaml.safe_load((PROJECT_ROOT / "conf/network/lan.yaml").read_text())
    got = fit(measure(repeat=7))
    for key, value in got.items():
        unit, scale = next(((u, s) for suffix, (u, s) in UNITS.items() if key.endswith(suffix)), ("bytes", 1.0))
        record(f"lan.yaml {key} (committed)", float(committed[key]) * scale, unit)
        record(f"lan.yaml {key} (this run)", value * scale, unit, baseline=f"lan.yaml {key} (committed)")
    assert got["block_bytes"] > 0 and got["send_s_per_block"] + got["send_s_per_message"] > 0
