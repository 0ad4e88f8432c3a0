"""A preset's A/A pair (issue 48, part 3): its first job measured twice, apart.

A preset is a Hydra sweep of jobs (cells), each an invocation whose runs share their epoch jobs.
Its first job's runs are marked `aa_role = "a1"`; when the sweep ends (harness/run/callbacks.py),
the same job runs again in a process of its own with `aa_role=a2`, its runs marked "a2", in the
same sweep. Between the two lies the whole preset: their difference is what the machine did to
one configuration over the time the preset's comparisons were measured, which the repetition
intervals (taken within one run, seconds apart) do not see. The claims widen their intervals by
it (harness/report/claims/aa_pairs.py).

`aa_role` is in the a2 run's configuration (so its `config_key` differs and resume=true keeps
both), and in no other run's (their keys are unchanged). `aa_pair=false` turns the repeat off
(the tests do: tests/conftest.py).
"""

from __future__ import annotations

import os
import subprocess
import sys

A1, A2 = "a1", "a2"


def role(cfg) -> str | None:
    """The invocation's part in its preset's A/A pair: a2 (the repeat), a1 (a preset sweep's first
    job, when the pair is on), else None."""
    if cfg.get("aa_role") == A2:
        return A2
    if not cfg.get("aa_pair") or not cfg.experiment.name:
        return None
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hc = HydraConfig.get()
        return A1 if hc.mode == RunMode.MULTIRUN and int(hc.job.num) == 0 else None
    except Exception:  # noqa: BLE001 - outside a Hydra job (a test composing a config): no pair
        return None


def repeat_command(overrides: list[str]) -> list[str]:
    """The command that measures the first job again: its overrides (the preset's own and the
    sweep's values for that job), aa_role=a2, one job (a preset's file sets hydra.mode=MULTIRUN:
    as a sweep of its own it would start another sweep id and another repeat), no progress bars."""
    kept = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") not in ("aa_role", "progress", "hydra.mode")]
    return [sys.executable, "-m", "harness", *kept, f"aa_role={A2}", "progress=false", "hydra.mode=RUN"]


def run_repeat(overrides: list[str], cwd) -> int:
    """Run the A/A repeat (its output to this process's), in the sweep's environment (its sweep id
    and MLflow parent are in os.environ while the sweep lasts); its exit code."""
    cmd = repeat_command(overrides)
    print("A/A pair: measuring the first job again: " + " ".join(cmd[3:]), flush=True)
    return subprocess.run(cmd, cwd=cwd, env=dict(os.environ)).returncode
