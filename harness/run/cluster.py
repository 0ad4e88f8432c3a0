"""A Spark standalone cluster on loopback, started from this project's venv (no system Spark):
`python -m harness.run.cluster up|status|down` (`make cluster-up WORKERS=n`, `make cluster-status`,
`make cluster-down`).

`up` starts a master and n workers with pyspark's own `spark-class`, waits until the master reports
every worker ALIVE, records the pids and the master URL in `<dir>/cluster.json` and prints the URL;
`down` stops only the processes that file names (SIGTERM, then SIGKILL after a grace period), so
a cluster somebody else started is never touched. Executors run this interpreter
(PYSPARK_PYTHON) and bind to SPARK_LOCAL_IP (127.0.0.1 unless set). The harness reads the URL from
the file when `cluster=standalone` is given without `cluster.master` (harness/run/config.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.report.results import PROJECT_ROOT

DEFAULT_DIR = Path(os.environ.get("STPS_CLUSTER_DIR", PROJECT_ROOT / ".cluster"))  # where cluster.json lives
STATE_FILE = "cluster.json"


class ClusterError(RuntimeError):
    pass


@dataclass
class ClusterState:
    master_url: str
    webui_url: str
    pids: dict[str, int] = field(default_factory=dict)  # role -> pid: master, worker-0, worker-1, ...
    logs: dict[str, str] = field(default_factory=dict)


def spark_class() -> Path:
    """pyspark's launcher inside the venv (pyspark ships Spark's jars and bin/)."""
    import pyspark

    path = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not path.exists():
        raise ClusterError(f"no spark-class at {path}: is pyspark installed in this interpreter ({sys.executable})?")
    return path


def _env(work_dir: Path) -> dict[str, str]:
    host = os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")
    return {**os.environ, "SPARK_LOCAL_IP": host, "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_WORKER_DIR": str(work_dir),
            "SPARK_NO_DAEMONIZE": "1"}


def _start(role: str, args: list[str], directory: Path, env: dict) -> tuple[int, str]:
    log = directory / f"{role}.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([str(spark_class()), *args], stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # its own group: stopping it stops its JVM children
    return proc.pid, str(log)


def master_status(webui_url: str, timeout: float = 2.0) -> dict:
    """The master's /json: status, aliveworkers, cores, workers."""
    with urllib.request.urlopen(f"{webui_url}/json/", timeout=timeout) as resp:
        return json.loads(resp.read())


def _alive(pid: int) -> bool:
    """Running, not a zombie: a process that exited but was not yet reaped (our own child, when
    up() and down() run in one process) is gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def load_state(directory: Path = DEFAULT_DIR) -> ClusterState | None:
    path = Path(directory) / STATE_FILE
    if not path.exists():
        return None
    return ClusterState(**json.loads(path.read_text()))


def up(workers: int = 2, cores: int = 1, memory: str = "2g", port: int = 7077, webui_port: int = 8080,
       directory: Path = DEFAULT_DIR, timeout: float = 60.0, log=print) -> ClusterState:
    """Start a master and `workers` workers on loopback and wait until all are registered."""
    if workers < 1:
        raise ClusterError(f"workers={workers} is invalid; allowed: an integer >= 1")
    directory = Path(directory)
    existing = load_state(directory)
    if existing is not None and any(_alive(p) for p in existing.pids.values()):
        raise ClusterError(f"a cluster started from {directory} is still running ({existing.master_url}); "
                           "stop it first: make cluster-down")
    directory.mkdir(parents=True, exist_ok=True)
    env = _env(directory / "work")
    host = env["SPARK_LOCAL_IP"]
    state = ClusterState(master_url=f"spark://{host}:{port}", webui_url=f"http://{host}:{webui_port}")
    pid, state.logs["master"] = _start("master", ["org.apache.spark.deploy.master.Master", "--host", host,
                                                  "--port", str(port), "--webui-port", str(webui_port)],
                                       directory, env)
    state.pids["master"] = pid
    _save(state, directory)  # recorded at once, so down() stops it even if the wait below fails
    try:
        _wait(lambda: master_status(state.webui_url).get("status") == "ALIVE", timeout, "the master", state)
        for i in range(workers):
            pid, state.logs[f"worker-{i}"] = _start(
                f"worker-{i}", ["org.apache.spark.deploy.worker.Worker", state.master_url, "--host", host,
                                "--cores", str(cores), "--memory", memory, "--webui-port", "0"], directory, env)
            state.pids[f"worker-{i}"] = pid
            _save(state, directory)
        _wait(lambda: master_status(state.webui_url).get("aliveworkers", 0) >= workers, timeout,
              f"{workers} workers to register", state)
    except ClusterError:
        down(directory, log=lambda *_: None)
        raise
    log(f"standalone cluster up: {state.master_url} ({workers} workers x {cores} cores, {memory}); "
        f"web UI {state.webui_url}; logs in {directory}")
    return state


def _wait(ready, timeout: float, what: str, state: ClusterState) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dead = [r for r, p in state.pids.items() if not _alive(p)]
        if dead:
            raise ClusterError(f"{', '.join(dead)} exited while waiting for {what}; see {state.logs[dead[0]]}")
        try:
            if ready():
                return
        except OSError:
            pass  # the web UI is not listening yet
        time.sleep(0.5)
    raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}; see the logs: "
                       + ", ".join(state.logs.values()))


def status(directory: Path = DEFAULT_DIR) -> dict:
    """What the state file says and what is alive: pids, the master's view of its workers."""
    state = load_state(directory)
    if state is None:
        return {"running": False, "message": f"no cluster started from {directory}"}
    procs = {role: _alive(pid) for role, pid in state.pids.items()}
    out = {"running": any(procs.values()), "master_url": state.master_url, "processes": procs}
    try:
        st = master_status(state.webui_url)
        out.update(master=st.get("status"), alive_workers=st.get("aliveworkers"), cores=st.get("cores"))
    except OSError as exc:
        out["master"] = f"unreachable ({exc})"
    return out


def down(directory: Path = DEFAULT_DIR, grace: float = 10.0, log=print) -> int:
    """Stop the processes `up` recorded (workers first), by pid; returns how many were running."""
    directory = Path(directory)
    state = load_state(directory)
    if state is None:
        log(f"no cluster started from {directory}")
        return 0
    roles = sorted(state.pids, key=lambda r: r == "master")  # the master last
    running = [r for r in roles if _alive(state.pids[r])]
    for r in running:
        try:
            os.killpg(state.pids[r], signal.SIGTERM)  # start_new_session: pid == its group id
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(state.pids[r]) for r in running):
        time.sleep(0.2)
    for r in running:
        if _alive(state.pids[r]):
            try:
                os.killpg(state.pids[r], signal.SIGKILL)
            except ProcessLookupError:
                pass
    for r in running:  # reap our own children (up() and down() in one process, as in tests)
        try:
            os.waitpid(state.pids[r], os.WNOHANG)
        except ChildProcessError:
            pass
    (directory / STATE_FILE).unlink(missing_ok=True)
    log(f"stopped {len(running)} process(es) of {state.master_url}")
    return len(running)


def _save(state: ClusterState, directory: Path) -> None:
    (Path(directory) / STATE_FILE).write_text(json.dumps(asdict(state), indent=2))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.run.cluster", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up", help="start a master and n workers on loopback, wait, print the master URL")
    u.add_argument("--workers", type=int, default=2)
    u.add_argument("--cores", type=int, default=1, help="cores per worker")
    u.add_argument("--memory", default="2g", help="memory per worker (Spark's syntax: 2g, 512m)")
    u.add_argument("--port", type=int, default=7077)
    u.add_argument("--webui-port", type=int, default=8080)
    u.add_argument("--timeout", type=float, default=60.0)
    for s in (u, sub.add_parser("status", help="the recorded processes and the master's view"),
              sub.add_parser("down", help="stop what `up` started, by its recorded pids")):
        s.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    a = p.parse_args(argv)
    try:
        if a.cmd == "up":
            state = up(a.workers, a.cores, a.memory, a.port, a.webui_port, a.dir, a.timeout)
            print(state.master_url)
        elif a.cmd == "status":
            print(json.dumps(status(a.dir), indent=2))
        else:
            down(a.dir)
    except ClusterError as exc:
        print(f"cluster {a.cmd}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
