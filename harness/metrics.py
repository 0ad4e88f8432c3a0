"""Run metrics from the per-epoch pipeline results (definitions: README, DESIGN.md).

Throughput = input events / bottleneck time, the bottleneck being the larger of the busiest
worker's CPU time and the dispatchers' routing time (split evenly over `dispatchers`).
Load L_i follows PS2Stream's Definition 1 with c1..c4 = 1 and |Q_i| read as the subscriptions
the worker holds on average over the epoch (restored plus half the net insertions), since the
paper's cell load (Definition 3) uses stored queries: L_i = |O_i| * q_i + |O_i| + ins_i + del_i.
"""

from __future__ import annotations

import pandas as pd

COUNTERS = ("events", "objects", "inserts", "deletes", "candidates", "results", "busy_s", "restore_s",
            "index_bytes", "restored", "pause_s")


def worker_table(epoch_stats: list[dict[int, dict]], n_workers: int) -> pd.DataFrame:
    """Per worker totals over the given (measured) epochs' worker statistics; workers that got
    nothing show zeros. `pause_s` is the time a migration stalled the worker before the epoch."""
    rows = []
    for w in range(n_workers):
        row = {"worker": w}
        for c in COUNTERS:
            row[c] = 0.0
        load = 0.0
        for stats in epoch_stats:
            st = stats.get(w, {})
            for c in COUNTERS:
                if c == "index_bytes":
                    row[c] = max(row[c], st.get(c, 0))
                else:
                    row[c] += st.get(c, 0)
            held = st.get("restored", 0) + (st.get("inserts", 0) - st.get("deletes", 0)) / 2.0
            o = st.get("objects", 0)
            load += o * max(held, 0.0) + o + st.get("inserts", 0) + st.get("deletes", 0)
        row["load"] = load
        rows.append(row)
    return pd.DataFrame(rows)


def run_metrics(epochs, workers: pd.DataFrame, n_dispatchers: int, n_input_objects: int,
                n_input_queries: int) -> dict[str, float]:
    n_events = sum(e.n_events for e in epochs)
    route_s = sum(e.route_ns for e in epochs) / 1e9
    dispatcher_s = route_s / n_dispatchers
    worker_s = float((workers["busy_s"] + workers["pause_s"]).max()) if len(workers) else 0.0
    bottleneck = max(dispatcher_s, worker_s, 1e-12)
    loads = workers["load"].to_numpy()
    wall = sum(e.timings.get("job_s", 0) for e in epochs)
    routed_obj = sum(e.routed_objects for e in epochs)
    routed_q = sum(e.routed_queries for e in epochs)
    return {
        "events": float(n_events),
        "throughput_eps": n_events / bottleneck,
        "throughput_wall_eps": n_events / wall if wall > 0 else float("nan"),
        "bottleneck_s": bottleneck,
        "dispatcher_s": dispatcher_s,
        "worker_busy_max_s": worker_s,
        "worker_busy_sum_s": float(workers["busy_s"].sum()),
        "load_sum": float(loads.sum()),
        "load_max_min": float(loads.max() / loads.min()) if loads.min() > 0 else float("inf"),
        "load_max_mean": float(loads.max() / loads.mean()) if loads.mean() > 0 else float("nan"),
        "obj_replication": routed_obj / n_input_objects if n_input_objects else float("nan"),
        "query_replication": routed_q / n_input_queries if n_input_queries else float("nan"),
        "messages_routed": float(routed_obj + routed_q),
        "candidates_sum": float(workers["candidates"].sum()),
        "results_raw": float(workers["results"].sum()),
        "worker_index_bytes_max": float(workers["index_bytes"].max()),
        "partitions_actual": float((workers["events"] > 0).sum()),
    }
