"""Injected faults for the cluster tests: an executor JVM killed in the middle of a stage.

The tests start a standalone cluster whose workers' environment carries
`STPS_FAULT=<stage>:<marker file>[:host]`; the first task of that stage to reach
`maybe_kill_executor` creates the marker (so exactly one kill per run, even across retries) and
SIGKILLs the JVM it runs under (its ancestor running CoarseGrainedExecutorBackend, found through
/proc: Linux only). Spark then loses the executor, the standalone worker starts a new one, and the
failed tasks run again. With `:host` the standalone Worker daemon above that executor is killed
first: a worker that never comes back. Outside a standalone executor (local[*], where the ancestor
JVM is the driver) nothing is killed.
"""

from __future__ import annotations

import os
import signal

from harness.engine.memory import EXECUTOR_MAIN, ancestor_pid

ENV = "STPS_FAULT"
WORKER_MAIN = b"org.apache.spark.deploy.worker.Worker"


def maybe_kill_executor(stage: str) -> None:
    """Kill this task's executor JVM (and with :host its Worker daemon) once, if STPS_FAULT names `stage`."""
    spec = os.environ.get(ENV)
    if not spec or ":" not in spec:
        return
    want, marker = spec.split(":", 1)
    host = marker.endswith(":host")
    marker = marker[:-len(":host")] if host else marker
    if want != stage:
        return
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # the first task only, once per run
    except FileExistsError:
        return
    os.close(fd)
    jvm = ancestor_pid(EXECUTOR_MAIN)
    if jvm is None:
        return
    daemon = ancestor_pid(WORKER_MAIN, jvm) if host else None
    if daemon is not None:
        os.kill(daemon, signal.SIGKILL)
    os.kill(jvm, signal.SIGKILL)
