"""Peak memory of the processes a run uses, for the runs table (Linux /proc; 0 where unknown).

A process's peak resident set (VmHWM, or ru_maxrss for this process) is its high-water mark since it
started: Python workers are reused across a job's runs, so an executor's figure is the largest seen
by the run's tasks so far in the invocation, which for one run per invocation (a scale run) is that
run's own.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

EXECUTOR_MAIN = b"CoarseGrainedExecutorBackend"


def ancestor_pid(main: bytes, start: int | None = None) -> int | None:
    """The nearest ancestor process whose command line names `main` (None if there is none)."""
    pid = os.getppid() if start is None else start
    for _ in range(8):  # python worker -> pyspark daemon -> executor JVM -> Worker JVM
        try:
            if main in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None
        if pid <= 1:
            return None
    return None


def own_peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux


def peak_bytes(pid: int | None) -> int:
    """VmHWM of a process on this host, in bytes."""
    if pid is None:
        return 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def task_peak_bytes() -> dict[str, int]:
    """In a Spark task: this Python worker's peak and its executor JVM's (0 in local mode, where
    the JVM is the driver's and counted there)."""
    return {"rss_peak": own_peak_bytes(), "jvm_peak": peak_bytes(ancestor_pid(EXECUTOR_MAIN))}


def driver_peak_bytes(spark) -> int:
    """The driver's Python process and its JVM (a child process when PySpark launched it)."""
    proc = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)
    return own_peak_bytes() + peak_bytes(getattr(proc, "pid", None))
