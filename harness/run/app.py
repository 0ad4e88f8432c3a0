"""The Hydra application: compose the config, reject bad values before Spark, run, report."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from harness.run.config import ConfigError, check_overrides, register_configs, validate
from harness.report.results import PROJECT_ROOT, current_sweep_id

register_configs()


@hydra.main(version_base="1.3", config_path=str(PROJECT_ROOT / "conf"), config_name="config")
def _hydra_main(cfg: DictConfig) -> None:
    from harness.report.table import print_comparison
    from harness.run.runner import DataPreparationError, run_experiment

    try:
        validate(cfg)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    try:
        rows = run_experiment(cfg)
    except DataPreparationError as exc:  # the user's input: one line (error rows are recorded)
        print("dataset error: " + " ".join(str(exc).splitlines()), file=sys.stderr)
        if current_sweep_id():
            return
        raise SystemExit(2) from None
    if rows:  # none when resume=true found every run done
        print_comparison(rows, list(cfg.table.columns))
    if current_sweep_id():  # in a sweep, one failing job must not stop the others; the table says it
        return
    if any(r.get("status") != "ok" for r in rows):
        raise SystemExit(1)
    if any(r.get("oracle_ok") is False for r in rows):
        print("error: a strategy's results differ from the oracle's", file=sys.stderr)
        raise SystemExit(1)


def main() -> int:
    try:
        check_overrides(sys.argv[1:])
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    _hydra_main()
    return 0
