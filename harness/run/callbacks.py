"""Hydra callback: a multirun (sweep) is one MLflow parent run with one child per job; its runs
share a sweep id; when it ends, a preset measures its first job again (its A/A pair:
harness/run/aa_pair.py), then its plots are drawn, and an experiment preset's own figures and
report (harness/report/experiments.py)."""

from __future__ import annotations

import os
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from harness.report import results
from harness.run import processes, progress


class SweepCallback(Callback):
    first_job: list[str] | None = None  # the overrides of the sweep's first job (its A/A pair's repeat)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.first_job = None
        root = results.results_root(config.get("results_dir"))
        root.mkdir(parents=True, exist_ok=True)
        os.environ[results.SWEEP_ID_ENV] = results.new_sweep_id()
        logger = results.MlflowLogger(root, config.mlflow.experiment, config.mlflow.enabled)
        overrides = " ".join(config.hydra.overrides.task)
        name = config.experiment.name or "sweep"
        parent = logger.start_parent(f"{name} {overrides}"[:250], {"overrides": overrides,
                                                                   "sweep_id": results.current_sweep_id()})
        if parent:
            os.environ[results.SWEEP_PARENT_ENV] = parent
        jobs = progress.count_jobs(list(config.hydra.overrides.task), config.hydra.sweeper.get("params"))
        progress.SWEEP = progress.SweepState(jobs=jobs)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        from harness.run.runner import LAST_RUNS

        if self.first_job is None:
            self.first_job = list(getattr(job_return, "overrides", None) or [])
        progress.SWEEP.jobs_done += 1
        progress.SWEEP.runs_done += LAST_RUNS["runs"]
        LAST_RUNS["runs"] = 0

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from harness.run.record import RESUME_SKIPPED

        if progress.SWEEP.jobs:
            print(progress.SWEEP.summary())
            progress.SWEEP = progress.SweepState()
        if RESUME_SKIPPED["runs"]:
            print(f"resume: the sweep skipped {RESUME_SKIPPED['runs']} runs already in the runs table")
            RESUME_SKIPPED["runs"] = 0
        if config.experiment.name and config.get("aa_pair") and self.first_job and config.get("aa_role") is None:
            from harness.run import aa_pair

            aa_pair.run_repeat(self.first_job, results.PROJECT_ROOT)  # a failure is in its rows
        sweep_id = results.current_sweep_id()
        os.environ.pop(results.SWEEP_PARENT_ENV, None)
        os.environ.pop(results.SWEEP_ID_ENV, None)
        from harness.report import experiments
        from harness.report import plots

        root = results.results_root(config.get("results_dir"))
        # the sweep's own plots in a process the fits started, while the experiment's are drawn here
        pool = processes.started()
        drawing = pool.submit(plots.summary_plots, root) if pool is not None else None
        paths = experiments.finish(config, root, sweep_id) if config.experiment.name else []
        try:
            summary = drawing.result() if drawing is not None else plots.summary_plots(root)
        except Exception:  # noqa: BLE001 - a process that died: drawn here (an error of its own is raised here)
            summary = plots.summary_plots(root)
        paths = summary + paths
        for path in paths:
            print(f"wrote: {path}")
