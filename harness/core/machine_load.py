"""How loaded the machine was while a run measured (issue 48, part 3): a run measured on a busy
machine is flagged and left out of the verdicts with the reason, instead of reversing a comparison.

Two presets measured the same DSkype configuration at 193k and 95.6k events/s: the timings of a
run taken while other processes held the cores are not the strategy's. What is recorded, per run:

- `load1_start`, `load1_end`: the 1-minute load average (os.getloadavg) when the run started and
  ended, and `load_per_core_max`, the larger over the machine's cores. The load average lags by
  about a minute and counts the run's own tasks too (at most one per core in local mode plus the
  driver), which is why its threshold is above 1 per core.
- `cpu_busy_frac`, `steal_frac`: from /proc/stat over the run, the share of all cores' time that
  was not idle (everyone's, the run's included) and the share a hypervisor stole (NaN where
  /proc/stat is missing).
- `cpu_wall_ratio`: over the counted repetitions of the measured epochs, the workers' thread CPU
  time over their wall time (harness/engine/worker_epoch.py `rep_cpu_s`, `rep_wall_s`). The timed
  section is single-threaded: a ratio far below 1 means the worker waited for a core.
- `others_busy_frac`: the share of all cores' time over the run spent by processes that are not
  the run's own (the machine's busy ticks in /proc/stat minus the CPU ticks of the run's process
  tree: the driver, the Spark JVM it started and that JVM's Python workers, exited children
  included). This is the load the run did not cause itself.

On a 2-core machine running Spark locally the run loads the machine itself: in the idle re-run of
2026-11-29 (nothing else running) the load average reached 1.1-1.7 per core and the CPU/wall of
millisecond-long timed sections 0.45-0.98, so those two figures cannot tell another process from
the run's own driver and JVM. The verdicts therefore leave a run out when others used more than
`machine.max_others_busy` (15%) of the machine, or more than `max_steal` was stolen; the load
average and CPU/wall flag a run only past gross limits (3 per core, 0.3). `loaded_reason` says which
threshold, with the figures. The claims (harness/report/claims/__init__.py) leave loaded runs out
as they leave out runs too short to measure, naming the reason.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

COLUMNS = ("load1_start", "load1_end", "load_per_core_max", "cpu_busy_frac", "steal_frac", "cpu_wall_ratio",
           "others_busy_frac", "loaded", "loaded_reason")
PROC_STAT = "/proc/stat"


def cpu_ticks(path: str = PROC_STAT) -> tuple[float, float, float] | None:
    """(all, idle incl. iowait, steal) clock ticks of every core since boot, from the `cpu` line of
    /proc/stat (user nice system idle iowait irq softirq steal ...); None where it cannot be read."""
    try:
        with open(path) as f:
            first = f.readline().split()
    except OSError:
        return None
    if not first or first[0] != "cpu":
        return None
    vals = [float(v) for v in first[1:9]] + [0.0] * max(0, 8 - len(first[1:9]))
    return sum(vals), vals[3] + vals[4], vals[7]


def _proc_stat_fields(pid: str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()  # the fields after the command name, from `state` on


def tree_ticks(root: int | None = None) -> float | None:
    """CPU clock ticks (user + system, and those of exited children it waited for) of process `root`
    (default: this one) and every descendant, from /proc; None where /proc cannot be read."""
    root = os.getpid() if root is None else root
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    parent, ticks = {}, {}
    for pid in pids:
        fields = _proc_stat_fields(pid)
        if fields is None or len(fields) < 15:
            continue
        parent[int(pid)] = int(fields[1])
        ticks[int(pid)] = sum(float(v) for v in fields[11:15])  # utime stime cutime cstime
    if root not in ticks:
        return None
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0.0)
        todo.extend(children.get(pid, ()))
    return total


def load1() -> float:
    try:
        return float(os.getloadavg()[0])
    except (OSError, AttributeError):
        return float("nan")


@dataclass
class Thresholds:
    """When a run counts as measured on a loaded machine (measure.max_load_per_core, ...)."""

    max_load_per_core: float = 3.0
    min_cpu_wall: float = 0.3
    max_steal: float = 0.05
    max_others_busy: float = 0.15

    @classmethod
    def of(cls, measure) -> "Thresholds":
        """From a config's `machine` node (or a dict), the defaults where it says nothing."""
        get = measure.get if hasattr(measure, "get") else lambda k, d=None: getattr(measure, k, d)
        d = cls()
        return cls(float(get("max_load_per_core", d.max_load_per_core)), float(get("min_cpu_wall", d.min_cpu_wall)),
                   float(get("max_steal", d.max_steal)), float(get("max_others_busy", d.max_others_busy)))


@dataclass
class LoadProbe:
    """The machine's state at a run's start; `finish` compares it with the state at its end."""

    load1: float
    ticks: tuple[float, float, float] | None
    t0: float
    cores: int
    own: float | None = None  # the run's process tree's CPU ticks at the start

    @classmethod
    def start(cls) -> "LoadProbe":
        return cls(load1(), cpu_ticks(), time.time(), os.cpu_count() or 1, tree_ticks())

    def finish(self, cpu_wall_ratio: float | None, limits: Thresholds) -> dict:
        """The run's load columns (COLUMNS), `loaded` judged by `limits`."""
        end, own = cpu_ticks(), tree_ticks()
        busy = steal = others = float("nan")
        if self.ticks is not None and end is not None:
            total = end[0] - self.ticks[0]
            if total > 0:
                busy = 1.0 - (end[1] - self.ticks[1]) / total
                steal = (end[2] - self.ticks[2]) / total
                if self.own is not None and own is not None:
                    # /proc/stat sums every core; a process's ticks are per core too (USER_HZ both)
                    others = max(0.0, (busy * total - (own - self.own)) / total)
        return judge({"load1_start": self.load1, "load1_end": load1(), "cpu_busy_frac": busy, "steal_frac": steal,
                      "cpu_wall_ratio": float("nan") if cpu_wall_ratio is None else float(cpu_wall_ratio),
                      "others_busy_frac": others}, self.cores, limits)


def reasons(figures: dict, limits: Thresholds) -> list[str]:
    """The thresholds of `limits` that a run's stored figures (load_per_core_max, cpu_wall_ratio,
    steal_frac, others_busy_frac; NaN or missing where unknown) pass, each with its figure. The
    claims judge a runs table's rows with it, so a changed threshold re-judges old runs."""
    def get(k):
        try:
            v = float(figures.get(k, float("nan")))
        except (TypeError, ValueError):
            return float("nan")
        return v

    out = []
    load, ratio, steal, others = (get("load_per_core_max"), get("cpu_wall_ratio"), get("steal_frac"),
                                  get("others_busy_frac"))
    if math.isfinite(load) and load > limits.max_load_per_core:
        out.append(f"load average {load:.2f} per core > {limits.max_load_per_core:g}")
    if math.isfinite(ratio) and ratio < limits.min_cpu_wall:
        out.append(f"CPU/wall {ratio:.2f} of the timed work < {limits.min_cpu_wall:g}")
    if math.isfinite(steal) and steal > limits.max_steal:
        out.append(f"steal {steal:.1%} > {limits.max_steal:.0%}")
    if math.isfinite(others) and others > limits.max_others_busy:
        out.append(f"other processes used {others:.0%} of the machine > {limits.max_others_busy:.0%}")
    return out


def judge(sample: dict, cores: int, limits: Thresholds) -> dict:
    """`sample` (load1_start, load1_end, cpu_busy_frac, steal_frac, cpu_wall_ratio, others_busy_frac;
    NaN where unknown) with load_per_core_max, loaded (1.0 or 0.0) and loaded_reason ("" when not
    loaded)."""
    out = {k: float(sample.get(k, float("nan"))) for k in COLUMNS[:-2] if k != "load_per_core_max"}
    loads = [v for v in (out["load1_start"], out["load1_end"]) if math.isfinite(v)]
    out["load_per_core_max"] = max(loads) / max(int(cores), 1) if loads else float("nan")
    why = reasons(out, limits)
    out["loaded"] = 1.0 if why else 0.0
    out["loaded_reason"] = "; ".join(why)
    return out


def cpu_wall_ratio(repetitions: list[list], discard: int) -> float | None:
    """The workers' CPU time over their wall time in the counted repetitions of the measured
    epochs (`repetitions`: per epoch, one result per repetition, each with per-worker statistics
    carrying rep_cpu_s and rep_wall_s); None when none were timed."""
    cpu = wall = 0.0
    for reps in repetitions:
        first = discard if len(reps) > discard else 0
        for res in reps[first:]:
            for st in (getattr(res, "worker_stats", None) or {}).values():
                cpu += float(st.get("rep_cpu_s", 0.0))
                wall += float(st.get("rep_wall_s", 0.0))
    return cpu / wall if wall > 0 else None
