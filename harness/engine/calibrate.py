"""Calibration of the network model's CPU costs and framing (conf/network/lan.yaml) from the
pipeline's own encoding on this machine: `python -m harness.engine.calibrate` (and `make bench`).

A sender takes a dispatcher's events for one worker from its batch and writes them as an Arrow IPC
block (`to_ipc`); a receiver reads the block and turns it into `Events`, as the worker stage does.
Both are timed over blocks of 10 to 10,000 events of 1 to 32 terms each; a least-squares fit of
time = per block + per message x events + per byte x bytes gives the profile's costs (the median of
`repeat` timings per block shape, so a stray slow run does not move the fit), and the IPC size less
the events' row bytes gives the framing per block.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

from harness.core.events import Events, row_bytes
from harness.engine.blocks import from_ipc, to_ipc

BLOCK_EVENTS = (10, 100, 1_000, 10_000)
TERMS = (1, 8, 32)


def synthetic_events(n: int, terms: int, seed: int = 0) -> Events:
    rng = np.random.default_rng(seed)
    lengths = np.full(n, terms, np.int64)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = np.sort(rng.integers(0, 1 << 20, (n, terms)), axis=1).astype(np.int32).ravel()
    cols = {"seq": np.arange(n, dtype=np.int64), "ts": rng.random(n), "kind": np.zeros(n, np.int8),
            "id": np.arange(n, dtype=np.int64), "x": rng.random(n) * 1e3, "y": rng.random(n) * 1e3}
    return Events(cols, offsets, values)


def _median_s(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def measure(repeat: int = 7) -> list[dict]:
    """One row per block shape: events, bytes, IPC size, send and receive seconds."""
    rows = []
    for terms in TERMS:
        batch_ev = synthetic_events(2 * max(BLOCK_EVENTS), terms)
        batch = batch_ev.to_arrow()
        for n in BLOCK_EVENTS:
            pick = np.arange(0, 2 * n, 2)  # every other event: a dispatcher's copies for one worker
            idx = pa.array(pick)
            blob = to_ipc(batch.take(idx))
            send = _median_s(lambda: to_ipc(batch.take(idx)), repeat)
            recv = _median_s(lambda: Events.from_arrow(from_ipc(blob)), repeat)
            rows.append({"events": n, "terms": terms, "bytes": int(row_bytes(batch_ev.take(pick)).sum()),
                         "ipc_bytes": len(blob),
                         "send_s": send, "recv_s": recv})
    return rows


def fit(rows: list[dict]) -> dict[str, float]:
    """The profile's cost keys from the measured rows (negative fitted terms clipped to zero)."""
    a = np.array([[1.0, r["events"], r["bytes"]] for r in rows])
    out = {}
    for side in ("send", "recv"):
        y = np.array([r[f"{side}_s"] for r in rows])
        coef, *_ = np.linalg.lstsq(a, y, rcond=None)
        coef = np.maximum(coef, 0.0)
        out.update({f"{side}_s_per_block": float(coef[0]), f"{side}_s_per_message": float(coef[1]),
                    f"{side}_s_per_byte": float(coef[2])})
    out["block_bytes"] = int(np.median([r["ipc_bytes"] - r["bytes"] for r in rows]))
    return out


def profile_yaml(costs: dict[str, float]) -> str:
    return "\n".join(f"{k}: {v:.4g}" if isinstance(v, float) else f"{k}: {v}" for k, v in costs.items())


def main(argv=None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="timings per block shape (median taken)")
    args = parser.parse_args(argv)
    rows = measure(args.repeat)
    print(f"{'events':>7} {'terms':>5} {'row bytes':>10} {'IPC bytes':>10} {'send us':>9} {'recv us':>9}")
    for r in rows:
        print(f"{r['events']:>7,} {r['terms']:>5} {r['bytes']:>10,} {r['ipc_bytes']:>10,} "
              f"{r['send_s'] * 1e6:>9.1f} {r['recv_s'] * 1e6:>9.1f}")
    costs = fit(rows)
    print("\nfitted costs (conf/network/lan.yaml keys):")
    print(profile_yaml(costs))
    return costs


if __name__ == "__main__":
    main()
