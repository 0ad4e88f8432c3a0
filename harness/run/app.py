"""The Hydra application: compose the config, reject bad values before Spark, run, report."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from harness.run.config import ConfigError, check_overrides, register_configs
from harness.report.results import PROJECT_ROOT, current_sweep_id

register_configs()


@hydra.main(version_base="1.3", config_path=str(PROJECT_ROOT / "conf"), config_name="config")
def _hydra_main(cfg: DictConfig) -> None:
    from harness.report.results import results_root
    from harness.report.table import where_lines
    from harness.run.runner import DataPreparationError, run_experiment

    try:
        rows = run_experiment(cfg)  # resolves and checks the job once, before Spark starts (harness.run.config.resolve_job)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except DataPreparationError as exc:  # the user's input: one line (error rows are recorded)
        print("dataset error: " + " ".join(str(exc).splitlines()), file=sys.stderr)
        for line in where_lines(exc.rows, results_root(cfg.results_dir) / "runs.parquet", False)[:1]:
            print(line, file=sys.stderr)
        if current_sweep_id():
            return
        raise SystemExit(2) from None
    if rows:  # none when resume=true found every run done
        report_end(rows, cfg)
    if current_sweep_id():  # in a sweep, one failing job must not stop the others; the table says it
        return
    if any(r.get("status") != "ok" for r in rows):
        raise SystemExit(1)
    if any(r.get("oracle_ok") is False for r in rows):
        print("error: a strategy's results differ from the oracle's", file=sys.stderr)
        raise SystemExit(1)


def report_end(rows: list[dict], cfg) -> None:
    """The end of an invocation: its comparison table, then where its results are (the runs
    table's rows, the run folders) and the one command that exports them as readable rows, once
    for the table (issue 52)."""
    from harness.report.results import results_root
    from harness.report.table import print_comparison, where_lines

    print_comparison(rows, list(cfg.table.columns))
    for line in where_lines(rows, results_root(cfg.results_dir) / "runs.parquet", bool(cfg.keep_pairs)):
        print(line)


def run_hydra(hydra_main) -> int:
    """A Hydra entry point of the harness (`python -m harness`, `python -m harness.counts`): the
    command line's overrides checked before Hydra composes anything (a bad one is one line, exit
    2), then the app."""
    try:
        check_overrides(sys.argv[1:])
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    hydra_main()
    return 0


def main() -> int:
    return run_hydra(_hydra_main)
