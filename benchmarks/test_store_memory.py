"""SSTD's 5M-object store over 8 workers (the issue: "a preloaded store of 5M objects over 8 workers
fits in memory on this machine, with its bytes reported"), full scale only: 5,000,000 synthetic
objects (bench_data's clustered, Zipf-termed objects, as the SRQ workload generator preloads them)
split among 8 workers by a kd split of their locations (median cuts, the wider side first, as a
spatial partitioner would), each worker's ObjectStore filled and its SRQ indexes built. Reported:
each store's bytes (ObjectStore.stored_bytes), their total, the time to preload, and the process's
peak RSS, in the figures table and in pytest-benchmark's extra_info. Asserted: the stores' total
takes at most STORE_SHARE of this machine's memory and the peak RSS at most RSS_SHARE (a fit, not a
timing). Timed: a batch of SRQs (0.01% of the space, one keyword) answered by the stores it reaches,
against a numpy scan of every object in the same run (no index; the scan shares no code with the
store).
"""

from __future__ import annotations

import math
import os
import resource
import time

import numpy as np
import pytest

from bench_data import synthetic_objects
from conftest import cpu_timer
from datasets.workloads.snapshot import build_snapshot_workload
from harness.core.events import AND, OBJECT, SNAPSHOT
from harness.families.object_store import ObjectStore
from harness.families.range.snapshot import answer_range
from harness.families.workload import WorkloadConfig

N_OBJECTS = 5_000_000
N_WORKERS = 8
N_Q = 200
N_SCAN = 10  # queries the scan baseline answers (about a second each over 5M objects)
OBJECT_COLUMNS = ("seq", "ts", "kind", "family", "id", "x", "y")  # what an object's event uses
CELLS = 64  # index.range.cells_per_side's default
STORE_SHARE = 0.25  # the stores may take at most this share of the machine's memory
RSS_SHARE = 0.5  # the whole process (data generation included) at most this share


def kd_split(x: np.ndarray, y: np.ndarray, parts: int, box) -> tuple[np.ndarray, list]:
    """Each point's part and the parts' boxes: median cuts of the wider side, `parts` a power of 2."""
    part = np.zeros(len(x), np.int64)
    boxes = [tuple(box)]
    members = [np.arange(len(x))]
    while len(boxes) < parts:
        next_boxes, next_members = [], []
        for (x0, y0, x1, y1), rows in zip(boxes, members):
            on_x = x1 - x0 >= y1 - y0
            v = x[rows] if on_x else y[rows]
            cut = float(np.median(v))
            low = v <= cut
            next_members += [rows[low], rows[~low]]
            next_boxes += [(x0, y0, cut, y1), (cut, y0, x1, y1)] if on_x else [(x0, y0, x1, cut), (x0, cut, x1, y1)]
        boxes, members = next_boxes, next_members
    for p, rows in enumerate(members):
        part[rows] = p
    return part, boxes


def rss_bytes() -> int:
    """This process's resident set now (Linux /proc)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux


def scan_range(o, ev, rows) -> int:
    """Answers of SRQs by numpy over every object: inside, before and within the look-back, keywords."""
    owner = np.repeat(np.arange(len(o)), np.diff(o.offsets))
    n = 0
    for q in rows:
        inside = (o.x >= ev.xmin[q]) & (o.x <= ev.xmax[q]) & (o.y >= ev.ymin[q]) & (o.y <= ev.ymax[q])
        visible = (o.seq < ev.seq[q]) & (o.ts > ev.ts[q] - ev.tau[q])
        need = ev.values[ev.offsets[q]:ev.offsets[q + 1]]
        hits = np.bincount(owner[np.isin(o.values, need)], minlength=len(o))
        has = hits == len(need) if ev.op[q] == AND else hits > 0
        n += int((inside & visible & has).sum())
    return n


def test_a_5m_object_store_over_8_workers(benchmark, scale, record):
    if scale["name"] != "full":
        pytest.skip("the 5M-object store is the full scale's figure (--bench-scale full)")
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    t0 = time.perf_counter()
    table, df, extent = synthetic_objects(N_OBJECTS + 5_000, seed=12)
    cfg = WorkloadConfig(name="srq", family="range", protocol="srq", op="and", preload_objects=N_OBJECTS,
                         sample_queries=0, queries=N_Q, batch=N_Q, batch_every_s=1.0, objects_per_s=1e3,
                         tau_hours=1e9, hour_s=1.0, keywords_max=1, area_fraction=1e-4)
    ev = build_snapshot_workload(table, df, extent, cfg, 3).events
    del table
    objects = ev.take(np.flatnonzero(ev.kind == OBJECT)[:N_OBJECTS])  # the preload, before every query
    ev = ev.take(np.flatnonzero(ev.kind == SNAPSHOT))
    q_rows = np.arange(len(ev))
    data_s = time.perf_counter() - t0
    rss_data = rss_bytes()

    # the preload: each worker's objects (a kd split of their locations) into its store, indexes built
    t0 = time.perf_counter()
    part, boxes = kd_split(objects.x, objects.y, N_WORKERS, extent)
    stores = []
    for w in range(N_WORKERS):
        store = ObjectStore(tuple(extent), CELLS, math.inf, len(df))
        store.add(objects.take(np.flatnonzero(part == w)))
        store.index()
        stores.append(store)
    preload_s = time.perf_counter() - t0
    per_worker = [s.stored_bytes() for s in stores]
    held = [len(s.objects) for s in stores]
    total = sum(per_worker)
    rss_after = rss_bytes()
    # where the bytes go: the objects' columns (those only queries use, blank for objects, apart),
    # their terms, and the cells and postings built from them
    cols = sum(a.nbytes for s in stores for a in s.objects.cols.values())
    blank = sum(a.nbytes for s in stores for c, a in s.objects.cols.items() if c not in OBJECT_COLUMNS)
    terms = sum(s.objects.offsets.nbytes + s.objects.values.nbytes for s in stores)

    # SRQs, each answered by the workers whose box its rectangle overlaps
    reach = [q_rows[(ev.xmin[q_rows] <= b[2]) & (ev.xmax[q_rows] >= b[0]) & (ev.ymin[q_rows] <= b[3])
                    & (ev.ymax[q_rows] >= b[1])] for b in boxes]
    answered = []

    def srq():
        answered[:] = [len(answer_range(s, ev, rows)[0]) for s, rows in zip(stores, reach)]

    srq_s, _ = cpu_timer(srq, rounds=3)
    benchmark.pedantic(srq, rounds=3, iterations=1)
    scan_s, _ = cpu_timer(lambda: scan_range(objects, ev, q_rows[:N_SCAN]), rounds=1)
    peak = peak_rss_bytes()

    gib = 2 ** 30
    per_object = total / N_OBJECTS
    benchmark.extra_info.update({
        "objects": N_OBJECTS, "workers": N_WORKERS, "objects_per_worker": held, "stored_bytes_per_worker": per_worker,
        "stored_bytes_total": total, "stored_bytes_per_object": per_object, "column_bytes": cols,
        "query_only_column_bytes": blank, "term_bytes": terms, "index_bytes": total - cols - terms,
        "preload_s": preload_s,
        "data_s": data_s, "rss_after_data_bytes": rss_data, "rss_after_preload_bytes": rss_after,
        "peak_rss_bytes": peak, "machine_memory_bytes": memory, "srq_queries": len(q_rows),
        "srq_workers_mean": sum(len(r) for r in reach) / len(q_rows), "srq_results": sum(answered),
        "srq_cpu_s": srq_s, "scan_queries_per_s": N_SCAN / scan_s,
    })
    print(f"\n5M-object store over {N_WORKERS} workers (kd split): objects {held}")
    print("stored bytes per worker (MiB): " + ", ".join(f"{b / 2**20:.0f}" for b in per_worker))
    print(f"total {total / gib:.2f} GiB ({per_object:.0f} B/object); preload (fill + index) {preload_s:.1f} s; "
          f"data generation {data_s:.1f} s; RSS after data {rss_data / gib:.2f} GiB, after preload "
          f"{rss_after / gib:.2f} GiB, peak {peak / gib:.2f} GiB of {memory / gib:.1f} GiB")
    print(f"per object: columns {cols / N_OBJECTS:.0f} B ({blank / N_OBJECTS:.0f} B of them query-only, blank), "
          f"terms {terms / N_OBJECTS:.0f} B, cells and postings {(total - cols - terms) / N_OBJECTS:.0f} B")
    print(f"{len(q_rows)} SRQs: {srq_s:.3f} s CPU over the stores, {len(q_rows) / srq_s:.0f} queries/s/core; "
          f"scan {N_SCAN / scan_s:.2f} queries/s/core")

    record("store@5M/bytes_8_workers", total / gib, "GiB", target_max=STORE_SHARE * memory / gib,
           note=f"max worker {max(per_worker) / 2**20:.0f} MiB, {per_object:.0f} B/object: objects' columns and "
                "terms, cells, the cell and (cell, term) postings (ObjectStore.stored_bytes)")
    record("store@5M/preload_s", preload_s, "s", note=f"{N_WORKERS} stores filled and indexed, one core")
    record("store@5M/peak_rss", peak / gib, "GiB", target_max=RSS_SHARE * memory / gib,
           note="the process's peak, generating the 5M objects included")
    record("srq@5M/scan", N_SCAN / scan_s, "queries/s/core", note=f"numpy over all 5M objects, {N_SCAN} queries")
    record("srq@5M/store", len(q_rows) / srq_s, "queries/s/core", baseline="srq@5M/scan",
           note=f"{len(q_rows)} SRQs at 0.01% of the space, one keyword, each on the workers it overlaps")
    assert total <= STORE_SHARE * memory, f"the stores take {total / gib:.2f} GiB of {memory / gib:.1f} GiB"
    assert peak <= RSS_SHARE * memory, f"peak RSS {peak / gib:.2f} GiB of {memory / gib:.1f} GiB"
    assert sum(held) == N_OBJECTS and sum(answered) > 0
