"""Top-k's own figures of a run (Skype Sec. 8.1, Table 4): the re-evaluations, AMP and EMP from the
index's phase clocks, the expiry phase's share of the busy time, and the buffers' mean size. The
report asks the family for them (`Family.summarise`); their registry entries are `METRICS`."""

from __future__ import annotations

import pandas as pd

from harness.core.metric import Metric

# the per-worker counters TopkIndex reports that the worker table sums over the measured epochs
# (`index_wall_s`: the index's wall time, the same clock as the phase clocks, around them)
COUNTERS = ("reevaluations", "expiries", "arrival_s", "expiry_s", "index_wall_s")

METRICS = (
    Metric("buffer_size_mean", "buffer size", "messages", "messages a top-k subscription's buffer holds, mean over "
           "the subscription replicas at the end of the run (Skype Table 4)", None, "{:,.1f}"),
    Metric("reevaluations", "re-evaluations", "re-evaluations", "top-k lists recomputed against a worker's window "
           "because a member expired (Skype Sec. 6)", "lower", "{:,.0f}"),
    Metric("amp_us", "AMP", "us", "top-k: worker time per arriving message copy (Skype's AMP): finding the "
           "subscriptions it may enter and entering their buffers; the index's phase clock, summed over workers "
           "and divided by the copies", "lower", "{:,.1f}"),
    Metric("emp_us", "EMP", "us", "top-k: worker time per expiring message copy (Skype's EMP): leaving the "
           "buffers whose oldest member it is and re-evaluating those left with fewer than k", "lower", "{:,.1f}"),
    Metric("expiry_share", "expiry share", "share", "top-k: the workers' time on expiries and the re-evaluations "
           "they cause (EMP's phase: buffer upkeep as members leave, refills from the window), over the index's "
           "time, both on the wall clock (issue 14's budget: at most 20% of the busy time)", "lower", "{:.1%}"),
)


def summarise(workers: pd.DataFrame, final_stats: list[dict]) -> dict[str, float]:
    """The figures of `METRICS` (0 re-evaluations and NaN otherwise for a run without top-k work)."""
    return {"reevaluations": float(workers["reevaluations"].sum()) if "reevaluations" in workers else 0.0,
            **amp_emp(workers), "buffer_size_mean": buffer_size_mean(final_stats)}


def amp_emp(workers: pd.DataFrame) -> dict[str, float]:
    """Skype's AMP and EMP (Sec. 8.1): worker time per arriving and per expiring message copy, in
    microseconds, from the top-k index's phase clocks summed over workers; and the expiry phase's
    share of the index's time (issue 14's re-evaluation budget). The phase clocks are wall clocks
    (a CPU clock costs a system call, 0.5 us, twice per message), so the share divides by the index's
    wall time around them: over the CPU busy time it exceeded 1 on a loaded machine. NaN without
    top-k work."""
    out = {"amp_us": float("nan"), "emp_us": float("nan"), "expiry_share": float("nan")}
    if "index_wall_s" in workers and workers["arrival_s"].sum() + workers["expiry_s"].sum() > 0 \
            and workers["index_wall_s"].sum() > 0:
        out["expiry_share"] = float(workers["expiry_s"].sum() / workers["index_wall_s"].sum())
    if "arrival_s" in workers and workers["arrival_s"].sum() > 0 and workers["objects"].sum() > 0:
        out["amp_us"] = float(workers["arrival_s"].sum() / workers["objects"].sum() * 1e6)
    if "expiries" in workers and workers["expiries"].sum() > 0:
        out["emp_us"] = float(workers["expiry_s"].sum() / workers["expiries"].sum() * 1e6)
    return out


def buffer_size_mean(final_stats: list[dict]) -> float:
    """Messages a top-k subscription's buffer holds on average at the end of the run (Skype Table 4),
    from each worker's statistics at the last measured epoch's end; NaN for families without buffers."""
    if not any("buffered" in st for st in final_stats):
        return float("nan")
    held = sum(st.get("kept", 0) for st in final_stats)
    return sum(st.get("buffered", 0) for st in final_stats) / held if held else float("nan")
