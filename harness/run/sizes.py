"""`python -m harness.run.sizes <size preset> [--steps a,b,c]`: a size sweep (conf/experiment/size_*.yaml)
run one step at a time, each step its own process (`python -m harness experiment=<preset>
<size knob>=<step> resume=true`), smallest first, with each step's outcome recorded whatever
happens: `<results>/sizes/<preset>/steps.jsonl`, one JSON line per attempt (the step, ok or failed
or skipped, the reason, its wall time, the peak resident memory of its process tree as the kernel
reports it for the waited-for processes, the exit code, the log, the code version).

A step that fails is recorded as failed with its reason (exit code; killed by a signal, SIGKILL
being what the out-of-memory killer sends; over `--timeout`), and the sweep stops there (a larger
step would fail too). Before a step starts, the wall times of the steps that succeeded are fitted
log-log (least squares) and extrapolated to it: when the extrapolation exceeds `--timeout` or what
is left of `--budget`, the step is recorded as skipped with the extrapolated time instead of being
started. The reports read the records (harness/report/sizes.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import yaml

from harness.report import results
from harness.report.sizes import read_steps, steps_file

PRESETS_DIR = results.PROJECT_ROOT / "conf" / "experiment"


def sweep_axis(preset: str) -> tuple[str, list[int]]:
    """The preset's size knob (experiment.x) and its swept steps (hydra.sweeper.params)."""
    conf = yaml.safe_load((PRESETS_DIR / f"{preset}.yaml").read_text()) or {}
    knob = (conf.get("experiment") or {}).get("x")
    params = ((conf.get("hydra") or {}).get("sweeper") or {}).get("params") or {}
    if not knob or knob not in params:
        raise SystemExit(f"{preset}: a size sweep needs experiment.x and hydra.sweeper.params[{knob!r}]")
    return knob, sorted(int(float(v)) for v in str(params[knob]).split(","))


def extrapolate_seconds(done: list[tuple[float, float]], size: float) -> float | None:
    """The wall time at `size` from a log-log least-squares line through (size, seconds) of the
    steps that succeeded (two steps or more; None otherwise)."""
    pts = [(s, t) for s, t in done if s > 0 and t > 0]
    if len({s for s, _ in pts}) < 2:
        return None
    x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    b, a = np.polyfit(x, y, 1)
    return float(math.exp(a + b * math.log(size)))


def _record(root: Path, preset: str, row: dict) -> None:
    path = steps_file(root, preset)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(row) + "\n")


def _reason(code: int | None, timed_out: bool, timeout: float) -> str:
    if timed_out:
        return f"over the step time limit ({timeout:.0f} s): stopped"
    if code is not None and code < 0:
        sig = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        return f"killed by {sig}" + (" (the out-of-memory killer's signal)" if -code == signal.SIGKILL else "")
    return f"exit code {code} (see the log)"


def run_step(preset: str, knob: str, step: int, root: Path, extra: list[str], timeout: float,
             log: Path) -> dict:
    """One step in its own process group: its outcome, wall time and peak memory."""
    env = {**os.environ, "STPS_RESULTS": str(root)}
    cmd = [sys.executable, "-m", "harness", f"experiment={preset}", f"{knob}={step}", "resume=true", "progress=false",
           f"results_dir={root}", *extra]
    log.parent.mkdir(parents=True, exist_ok=True)
    version = results.code_version()  # the code the step starts with (cached: a commit during the step does not change it)
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    with log.open("w") as out:
        out.write(" ".join(cmd) + "\n")
        out.flush()
        proc = subprocess.Popen(cmd, cwd=results.PROJECT_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        timed_out, status, usage = False, None, None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if timeout and time.perf_counter() - t0 > timeout and not timed_out:
                timed_out = True
                os.killpg(proc.pid, signal.SIGTERM)
                deadline = time.perf_counter() + 30
                while time.perf_counter() < deadline:
                    pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                    if pid:
                        break
                    time.sleep(0.5)
                if not pid:
                    os.killpg(proc.pid, signal.SIGKILL)
                    pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.5)
    try:  # what the step left behind (Spark's JVM is the step's child; nothing else may stay)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    code = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    ok = code == 0 and not timed_out
    return {"preset": preset, "knob": knob, "step": step, "status": "ok" if ok else "failed",
            "reason": "" if ok else _reason(code, timed_out, timeout), "wall_s": round(wall, 2),
            # ru_maxrss (KiB on Linux): the largest resident set of the step's process and the
            # children it waited for (Spark's JVM, the Python workers), not their sum
            "maxrss_bytes": int(usage.ru_maxrss) * 1024 if usage else None,
            "exit_code": code, "started_at": started.isoformat(timespec="seconds"),
            "code_version": version, "log": str(log)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.run.sizes", description=__doc__.split("\n\n")[0])
    parser.add_argument("preset", help="a size sweep, conf/experiment/size_*.yaml")
    parser.add_argument("--steps", default=None, help="comma-separated sizes (default: the preset's own)")
    parser.add_argument("--results", default=None, help="the results folder (default: results/ or $STPS_RESULTS)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="a step's time limit in seconds")
    parser.add_argument("--budget", type=float, default=0.0, help="seconds for the whole sweep (0: no limit)")
    parser.add_argument("--estimate", action="store_true",
                        help="start nothing: record each step as not run, with its wall time extrapolated from the "
                             "steps that ran (when two or more did)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides passed to every step")
    args, rest = parser.parse_known_args(argv)
    args.overrides = [*args.overrides, *rest]
    knob, steps = sweep_axis(args.preset)
    if args.steps:
        steps = sorted(int(float(s)) for s in args.steps.split(","))
    root = results.results_root(args.results)
    done = [(float(r["step"]), float(r["wall_s"])) for r in read_steps(root, args.preset)
            if r["status"] == "ok" and r.get("new_runs", 1)]
    t_start = time.perf_counter()
    for step in steps:
        left = args.budget - (time.perf_counter() - t_start) if args.budget else float("inf")
        guess = extrapolate_seconds(done, step)
        limit = min(args.timeout or float("inf"), left)
        if args.estimate:
            reason = (f"not started: extrapolated {guess:.0f} s from the smaller steps (log-log fit of their wall "
                      f"times)" if guess is not None else "not started: fewer than two steps ran, no estimate")
            _record(root, args.preset, {"preset": args.preset, "knob": knob, "step": step, "status": "skipped",
                                        "reason": reason, "extrapolated_s": None if guess is None else round(guess),
                                        "wall_s": None, "maxrss_bytes": None,
                                        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                        "code_version": results.code_version()})
            print(f"{args.preset} {knob}={step}: {reason}", flush=True)
            continue
        if guess is not None and guess > limit:
            row = {"preset": args.preset, "knob": knob, "step": step, "status": "skipped",
                   "reason": f"extrapolated {guess:.0f} s from the smaller steps (log-log fit of their wall "
                             f"times) > the {limit:.0f} s left", "extrapolated_s": round(guess),
                   "wall_s": None, "maxrss_bytes": None, "started_at": datetime.now(timezone.utc)
                   .isoformat(timespec="seconds"), "code_version": results.code_version()}
            _record(root, args.preset, row)
            print(f"{args.preset} {knob}={step}: skipped ({row['reason']})", flush=True)
            break
        log = attempt_log(root, args.preset, step)
        before = _runs_of(root, args.preset, step)
        row = run_step(args.preset, knob, step, root, args.overrides, min(args.timeout, left) if left != float("inf")
                       else args.timeout, log)
        row["new_runs"] = _runs_of(root, args.preset, step) - before
        if guess is not None:
            row["extrapolated_s"] = round(guess)
        _record(root, args.preset, row)
        print(f"{args.preset} {knob}={step}: {row['status']} in {row['wall_s']:.0f} s, peak "
              f"{(row['maxrss_bytes'] or 0) / 2**30:.1f} GiB, {row['new_runs']} new runs"
              + (f" ({row['reason']})" if row["reason"] else ""), flush=True)
        if row["status"] != "ok":
            return 1
        if row["new_runs"]:  # a resumed step's time says nothing about its cost
            done.append((float(step), row["wall_s"]))
    return 0


def attempt_log(root: Path, preset: str, step: int) -> Path:
    """A new log file for this attempt at `step` (<step>.log, then <step>.2.log, ...): a resumed or
    retried step keeps the logs of the attempts before it, which say why they stopped."""
    folder = root / "sizes" / preset / "logs"
    n = 1
    while (folder / (f"{step}.log" if n == 1 else f"{step}.{n}.log")).exists():
        n += 1
    return folder / (f"{step}.log" if n == 1 else f"{step}.{n}.log")


def _runs_of(root: Path, preset: str, step: int) -> int:
    if not (root / "runs.parquet").exists():
        return 0
    table = results.read_runs_table(root)
    if "experiment" not in table:
        return 0
    x = table["x"].astype(str).map(lambda v: _as_int(v))
    return int(((table["experiment"] == preset) & (x == step)).sum())


def _as_int(v: str):
    try:
        return int(float(v))
    except (TypeError, ValueError):
        return None


if __name__ == "__main__":
    sys.exit(main())
