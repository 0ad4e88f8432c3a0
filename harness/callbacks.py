"""Hydra callback: a multirun (sweep) is one MLflow parent run with one child per job, and its
plots are drawn when the sweep ends."""

from __future__ import annotations

import os
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from harness import results


class SweepCallback(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        root = results.results_root(config.get("results_dir"))
        root.mkdir(parents=True, exist_ok=True)
        logger = results.MlflowLogger(root, config.mlflow.experiment, config.mlflow.enabled)
        overrides = " ".join(config.hydra.overrides.task)
        parent = logger.start_parent(f"sweep {overrides}"[:250], {"overrides": overrides})
        if parent:
            os.environ[results.SWEEP_PARENT_ENV] = parent

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        os.environ.pop(results.SWEEP_PARENT_ENV, None)
        from harness import plots

        root = results.results_root(config.get("results_dir"))
        for path in plots.summary_plots(root):
            print(f"plot: {path}")
