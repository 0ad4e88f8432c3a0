"""A tiny hand-built runs table and claims list for the results site's tests: five presets (cells,
a numeric x sweep, a worker sweep, a basis-free metric, 22 strategies in one cell), intervals on
the compute basis, a network model, a failed run and a run of an older code version left out, a
claim with a missing cell, a harness extension, and a flip between the bases."""

from __future__ import annotations

import pandas as pd

from harness.report import claims

VERSION = "v2"


def row(variant, eps, *, preset, workload="q1", workers=8, x=None, net=None, spread=0.05, started="2026-01-01T00:00",
        **extra):
    net = eps * 0.8 if net is None else net
    return {"run_id": f"{preset}-{variant}-{workload}-{workers}-{x}-{started}", "variant": variant,
            "strategy": variant.split(" + ")[0], "adjust": variant.split(" + ")[1] if " + " in variant else None,
            "status": "ok", "dataset": "synthetic", "workload": workload, "workers": workers, "experiment": preset,
            "x": x, "facet": None, "started_at": started, "code_version": VERSION, "config_key": f"k-{variant}-{x}",
            "repetitions": 3, "cluster": "local[2]", "throughput_eps": net, "throughput_compute_eps": eps,
            "throughput_compute_eps_ci_lo": eps * (1 - spread), "throughput_compute_eps_ci_hi": eps * (1 + spread),
            "throughput_network_eps": net, "throughput_network_eps_ci_lo": net, "throughput_network_eps_ci_hi": net,
            "bottleneck_resource": "worker_cpu" if eps < 150 else "dispatcher_cpu", "obj_replication": 1 + eps / 1000,
            "busy_max_min": 1 + 100 / eps, "latency_p50_ms": 1000 / eps, "oracle_ok": True, "too_short": 0.0, **extra}


def table() -> pd.DataFrame:
    rows = []
    for wl, scale in (("q1", 1.0), ("q2", 0.5)):  # grid beats text on compute; the network model flips q1
        rows += [row("grid", 200 * scale, preset="cells", workload=wl, net=90 * scale),
                 row("text_metric", 100 * scale, preset="cells", workload=wl, net=100 * scale),
                 row("kdtree", 150 * scale, preset="cells", workload=wl, net=120 * scale)]
    rows.append({**row("kdtree", 999, preset="cells", started="2026-02-01T00:00"), "status": "error"})  # left out
    rows.append(row("grid", 5, preset="cells", started="2025-12-01T00:00", code_version="v1"))  # older code
    for x in (1, 2, 4):
        rows += [row("kdt", 100 * x, preset="sweep", x=x), row("kdt + gr", 110 * x + 20 * x * x, preset="sweep", x=x)]
    for w in (2, 4, 8):
        rows += [row("rtree", 50 * w, preset="workers", workers=w), row("grid", 40 * w ** 0.5, preset="workers",
                                                                         workers=w)]
    rows += [row("agrid", 300, preset="latency"), row("grid", 200, preset="latency")]
    rows += [row(f"s{i:02d}", 100 + 10 * i, preset="many") for i in range(22)]
    return pd.DataFrame(rows)


def claim_list() -> list[dict]:
    def c(cid, paper, preset, kind, subject, others=(), metric="throughput_eps", **check):
        return {"id": cid, "paper": paper, "preset": preset, "claim": f"{subject} {kind} {', '.join(others)}",
                "source": "Fig. 1", "published": f"{subject}: 1,000 tuples/s", "setting": "8 workers, mu = 5M",
                "check": {"kind": kind, "metric": metric, "subject": subject, "others": list(others), **check}}

    return claims.load_claims_from([
        c("ps2-grid-beats-text", "ps2stream", "cells", "better", "grid", ["text_metric"]),  # flips on q1
        c("ps2-kdtree-beats-text", "ps2stream", "cells", "better", "kdtree", ["text_metric"]),
        c("ps2-kdtree-q3", "ps2stream", "cells", "better", "kdtree", ["text_metric"],
          where={"workload": ["q1", "q3"]}),  # q3 has no run: not measured
        c("ps2-gr-gap-grows", "ps2stream", "sweep", "gap_grows", "kdt + gr", ["kdt"]),
        c("tornado-rtree-scales", "tornado", "workers", "scales", "rtree", value=3.0),
        c("tornado-grid-scales", "tornado", "workers", "scales", "grid", value=3.0),
        c("sstd-agrid-latency", "sstd", "latency", "better", "agrid", ["grid"], metric="latency_p50_ms"),
        {**c("many-s21-best", "ps2stream", "many", "better", "s21", [f"s{i:02d}" for i in range(21)]),
         "scope": "extension"},
    ])
