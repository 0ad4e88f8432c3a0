"""Injected faults for the cluster tests: an executor JVM killed in the middle of a stage.

The tests set `spark.executorEnv.STPS_FAULT=<stage>:<marker file>` on a standalone cluster; the
first task of that stage to reach `maybe_kill_executor` creates the marker (so exactly one kill per
run, even across retries) and SIGKILLs the JVM it runs under (its ancestor running
CoarseGrainedExecutorBackend, found through /proc: Linux only). Spark then loses the executor,
the standalone worker starts a new one, and the failed tasks run again. Outside a standalone
executor (local[*], where the ancestor JVM is the driver) nothing is killed.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

ENV = "STPS_FAULT"
EXECUTOR_MAIN = b"CoarseGrainedExecutorBackend"


def _executor_jvm() -> int | None:
    pid = os.getppid()
    for _ in range(6):  # python worker -> pyspark daemon -> executor JVM (a level or two either way)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if EXECUTOR_MAIN in cmdline:
                return pid
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None
        if pid <= 1:
            return None
    return None


def maybe_kill_executor(stage: str) -> None:
    """Kill this task's executor JVM once, if STPS_FAULT names `stage`."""
    spec = os.environ.get(ENV)
    if not spec or ":" not in spec:
        return
    want, marker = spec.split(":", 1)
    if want != stage:
        return
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # the first task only, once per run
    except FileExistsError:
        return
    os.close(fd)
    jvm = _executor_jvm()
    if jvm is not None:
        os.kill(jvm, signal.SIGKILL)
