"""One SparkSession per process, local by default, a standalone cluster by config.

The environment variables must be set before the JVM starts: the machine has a second address
(SPARK_LOCAL_IP) and executors must run this interpreter (PYSPARK_PYTHON), not the system one.
"""

from __future__ import annotations

import logging
import os
import sys
import time

_SESSION = None
_START_S = 0.0


def configure_environment() -> None:
    # py4j logs every connection a thread closes at INFO (runs in lockstep each have a thread)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")


def get_session(master: str = "local[*]", app_name: str = "stps-harness", conf: dict | None = None):
    """Return the process-wide session, creating it on first use (about 5 s on this machine)."""
    global _SESSION, _START_S
    if _SESSION is not None:
        _START_S = 0.0  # this invocation (a later job of a sweep) found it running
        return _SESSION
    configure_environment()
    from pyspark.sql import SparkSession

    t0 = time.perf_counter()
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "65536")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.python.worker.reuse", "true")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
        .config("spark.driver.host", os.environ["SPARK_LOCAL_IP"])
        .config("spark.driver.bindAddress", os.environ["SPARK_LOCAL_IP"])
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, str(value))
    _SESSION = builder.getOrCreate()
    _SESSION.sparkContext.setLogLevel("ERROR")
    _START_S = time.perf_counter() - t0
    return _SESSION


def session_start_seconds() -> float:
    """How long the session took to start (0 when it was already running)."""
    return _START_S


def stop_session() -> None:
    global _SESSION
    if _SESSION is not None:
        _SESSION.stop()
        _SESSION = None
