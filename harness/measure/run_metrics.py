"""A run's metrics from its per-epoch pipeline results (definitions: docs/metrics.md, DESIGN.md; the
registry that names them: harness/report/metrics.py).

Throughput = input events / bottleneck time, the bottleneck being the larger of the busiest
worker's CPU time and the dispatchers' routing time (split evenly over `dispatchers`).
Load L_i follows PS2Stream's Definition 1 with c1..c4 = 1 and |Q_i| read as the subscriptions
the worker holds on average over the epoch (restored plus half the net insertions), since the
paper's cell load (Definition 3) uses stored queries: L_i = |O_i| * q_i + |O_i| + ins_i + del_i.
"""

from __future__ import annotations

import pandas as pd


def run_metrics(epochs, workers: pd.DataFrame, n_dispatchers: int, n_input_objects: int,
                n_input_queries: int) -> dict[str, float]:
    n_events = sum(e.n_events for e in epochs)
    route_s = sum(e.route_ns for e in epochs) / 1e9
    observe_s = sum(e.observe_s for e in epochs)
    # a dispatcher routes its share of the events and keeps its whole copy of the routing state current
    dispatcher_s = route_s / n_dispatchers + observe_s
    worker_s = float((workers["busy_s"] + workers["pause_s"]).max()) if len(workers) else 0.0
    bottleneck = max(dispatcher_s, worker_s, 1e-12)
    loads = workers["load"].to_numpy()
    # a job shared by several runs (harness/engine/lockstep.py) is apportioned by task time
    wall = sum(e.timings.get("job_s", 0) * e.timings.get("job_share", 1.0) for e in epochs)
    routed_obj = sum(e.routed_objects for e in epochs)
    routed_q = sum(e.routed_queries for e in epochs)
    return {
        "events": float(n_events),
        "throughput_eps": n_events / bottleneck,
        "throughput_wall_eps": n_events / wall if wall > 0 else float("nan"),
        "bottleneck_s": bottleneck,
        "dispatcher_s": dispatcher_s,
        # the routing alone (route calls timed around them), a dispatcher's share: Tornado Fig. 9's
        # "spatial routing time" (tornado.txt l.370), without upkeep (observe_s) or sending
        "route_s": route_s / n_dispatchers,
        "observe_s": observe_s,
        "merge_s": sum(e.merge_busy_s for e in epochs),
        "feedback_rows": float(sum(t.num_rows for e in epochs for t in e.feedback.values())),
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
        "worker_index_bytes_mean": float(workers["index_bytes"].mean()),
        "partitions_actual": float((workers["events"] > 0).sum()),
        "replicas_dropped": float(workers["replicas_dropped"].sum()) if "replicas_dropped" in workers else 0.0,
        "resent": float(workers["resent"].sum()) if "resent" in workers else 0.0,
    }
