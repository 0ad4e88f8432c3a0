"""Drift of the measured part of a workload away from its warm-up (the module docstring of
datasets/workloads/range.py describes each kind). Drift draws use generators of their own, so the
base workload's draws never shift."""

from __future__ import annotations

import numpy as np

from datasets.workloads.config import HOTSPOT_SHAPES, invalid
from datasets.workloads.sts import csr_replace, q3_region, query_payload


def validate_hot_spot(cfg) -> None:
    """The fields every workload with a drift reads: when it starts and the hot square."""
    if not 0.0 <= cfg.drift_start < 1.0:
        invalid("drift_start", cfg.drift_start, "a number in [0, 1)")
    if not cfg.drift_start < cfg.drift_end <= 1.0:
        invalid("drift_end", cfg.drift_end, f"a number in (drift_start={cfg.drift_start}, 1]")
    if cfg.hotspot_shape not in HOTSPOT_SHAPES:
        invalid("hotspot_shape", cfg.hotspot_shape, " or ".join(HOTSPOT_SHAPES))
    if not 0.0 <= cfg.hotspot_fraction <= 1.0:
        invalid("hotspot_fraction", cfg.hotspot_fraction, "a number in [0, 1]")
    if not cfg.hotspot_region_km > 0:
        invalid("hotspot_region_km", cfg.hotspot_region_km, "a number > 0 (km)")



def hot_square(cfg, objects, extent, seed: int):
    """SSTD's random hot region: a square of side hotspot_region_km around a random object (so it
    is populated), shifted inside the extent; returns its bounds and the objects inside it."""
    rng = np.random.default_rng([int(cfg.hotspot_seed), 0x4075] if cfg.hotspot_seed is not None
                                else [int(seed), int(cfg.seed_offset), 0x4075])
    ox = objects.column("x").to_numpy()
    oy = objects.column("y").to_numpy()
    c = int(rng.integers(objects.num_rows))
    xmin, ymin, xmax, ymax = extent
    side = float(cfg.hotspot_region_km)
    x0 = min(max(ox[c] - side / 2, xmin), max(xmin, xmax - side))
    y0 = min(max(oy[c] - side / 2, ymin), max(ymin, ymax - side))
    rect = (float(x0), float(y0), float(x0 + side), float(y0 + side))
    inside = np.flatnonzero((ox >= rect[0]) & (ox <= rect[2]) & (oy >= rect[1]) & (oy <= rect[3]))
    return rect, inside


def ramp(cfg, t):
    """Hot share at measured-stream position t in [0, 1), by `hotspot_shape`:

    - ramp: 0 before drift_start, then linear up to hotspot_fraction at drift_end, held from there
      to the end (drift_end = 1: a ramp over the whole measured part);
    - burst: hotspot_fraction from drift_start to drift_end, 0 after.

    With drift_end < 1 the stream has SSTD's three phases (sstd.txt l.378-384): the load as
    preloaded, the imbalance injected into one region ("insert a significantly large number of
    objects into the region" / "register a significantly large number of continuous queries into
    the region"), and a stream after it in which the adjustment acts and the throughput and latency
    "after the adjustment" are measured. Objects ramp and hold: the hot region keeps receiving
    them, so the imbalance lasts. Queries come as a burst: the registered queries stay live (a query
    lives about `queries` later insertions, datasets/workloads/range.py) while new ones arrive as
    before, so the imbalance is steady after the burst."""
    s, e = cfg.drift_start, cfg.drift_end
    if cfg.hotspot_shape == "burst":
        return cfg.hotspot_fraction * ((t >= s) & (t < e))
    return cfg.hotspot_fraction * np.clip((t - s) / (e - s), 0.0, 1.0) * (t >= s)


def drift_rng(cfg, seed: int, tag: int):
    """A generator of its own per drift part, so the base workload's draws never shift."""
    return np.random.default_rng([int(seed), int(cfg.seed_offset), 0xD21F7, tag])


def drift_queries(cfg, seed, objects, df, extent, payload, q_off, q_val, qinfo, meas, pos, start_event, frac):
    """Apply the query side of the drift to the measured insertions `meas` (query ids, inserted at
    event positions `pos`, at measured-stream fraction `frac`). Payloads are per query, so a delete
    keeps its insert's payload. Returns the new keyword CSR and what was done."""
    info = {}
    after = pos >= start_event

    def remake(rows, src, is_q2, rng):
        nonlocal q_off, q_val
        new, t_off, t_val, _ = query_payload(cfg, rng, objects, df, src, is_q2, qinfo["u"][rows], qinfo["k"][rows],
                                              coin=qinfo["coin"][rows])
        for name, col in new.items():
            payload[name][rows] = col
        q_off, q_val = csr_replace(q_off, q_val, rows, t_off, t_val)

    if cfg.drift == "q3_switch":
        rng = drift_rng(cfg, seed, 1)
        n_reg = cfg.regions_per_side ** 2
        m = max(1, int(round(cfg.drift_fraction * n_reg)))
        # PS2Stream: "every interval of 10M queries" with mu = 10M (ps2stream.txt l.420): one live-set turnover
        every = int(cfg.drift_every) if cfg.drift_every is not None else max(1, int(cfg.queries))
        order = rng.permutation(n_reg)  # regions switch in this order, m at a time, wrapping round
        rank = np.empty(n_reg, np.int64)
        rank[order] = np.arange(n_reg)
        n_switches = np.where(after, 1 + (np.cumsum(after) - 1) // every, 0)
        # no switch starts at or after drift_end (default 1: the end of the stream), so the stream
        # can end on a stretch without drift, on which an adjustment's effect is read
        starts = np.flatnonzero(after)[::every]  # the insertion that opens each switch
        n_switches = np.minimum(n_switches, int((frac[starts] < cfg.drift_end).sum()))
        r = rank[q3_region(cfg, extent, payload["x"][meas], payload["y"][meas])]
        # switches so far cover rank positions 0 .. n_switches*m - 1 (mod n_reg): times r was hit
        hits = np.maximum(0, (n_switches * m - r + n_reg - 1) // n_reg)
        rows = meas[hits % 2 == 1]
        remake(rows, qinfo["src"][rows], ~qinfo["is_q2"][rows], rng)
        n_points = int(n_switches.max()) if len(n_switches) else 0
        first = np.flatnonzero(after)[np.arange(n_points) * every] if n_points else np.zeros(0, np.int64)
        info.update(every=every, points=pos[first].tolist(),
                    regions=[np.sort(order[(i * m + np.arange(m)) % n_reg]).tolist() for i in range(n_points)],
                    base_q2=np.flatnonzero(qinfo["region_q2"]).tolist(), switched_queries=int(len(rows)))
    elif cfg.drift == "hotspot_queries":
        rng = drift_rng(cfg, seed, 2)
        rect, inside = hot_square(cfg, objects, extent, seed)
        rows = meas[rng.random(len(meas)) < ramp(cfg, frac)]
        src = inside[rng.integers(len(inside), size=len(rows))]
        if cfg.profile == "q3":  # the new centre's region decides the type
            ox, oy = objects.column("x").to_numpy(), objects.column("y").to_numpy()
            is_q2 = qinfo["region_q2"][q3_region(cfg, extent, ox[src], oy[src])]
        else:
            is_q2 = qinfo["is_q2"][rows]
        remake(rows, src, is_q2, rng)
        info.update(rect=list(rect), hot_sources=int(len(inside)), moved_queries=int(len(rows)))
    elif cfg.drift == "scale":
        rng = drift_rng(cfg, seed, 3)
        rows = meas[after & (rng.random(len(meas)) < cfg.scale_fraction)]
        scale_coordinates(payload, rows, extent, cfg.scale_factor, ("x", "xmin", "xmax"), ("y", "ymin", "ymax"))
        info.update(moved_queries=int(len(rows)))
    return q_off, q_val, info


def drift_objects(cfg, seed, objects, extent, src_rows, obj_x, obj_y, meas, pos, start_event, frac):
    """Apply the object side of the drift to the measured objects `meas` (object indices, at event
    positions `pos`, measured-stream fraction `frac`): the rows they take location and terms from,
    their coordinates, and what was done."""
    info = {}
    if cfg.drift == "hotspot_objects":
        rect, inside = hot_square(cfg, objects, extent, seed)
        rng = drift_rng(cfg, seed, 4)
        hot = meas[rng.random(len(meas)) < ramp(cfg, frac)]
        src_rows = src_rows.copy()
        src_rows[hot] = inside[rng.integers(len(inside), size=len(hot))]
        obj_x = objects.column("x").to_numpy()[src_rows]
        obj_y = objects.column("y").to_numpy()[src_rows]
        info.update(rect=list(rect), hot_sources=int(len(inside)), moved_objects=int(len(hot)))
    elif cfg.drift == "scale":
        rng = drift_rng(cfg, seed, 5)
        moved = meas[(pos >= start_event) & (rng.random(len(meas)) < cfg.scale_fraction)]
        xy = {"x": obj_x, "y": obj_y}
        scale_coordinates(xy, moved, extent, cfg.scale_factor, ("x",), ("y",))
        xmin, ymin, xmax, ymax = extent
        sf = cfg.scale_factor
        info.update(moved_objects=int(len(moved)), factor=sf,
                    rect=[float(v) for v in (xmin, ymin, xmin + sf * (xmax - xmin), ymin + sf * (ymax - ymin))])
    return src_rows, obj_x, obj_y, info


def scale_coordinates(cols, rows, extent, sf, xs, ys):
    """Tornado's scale-factor drift: coordinates scaled by sf about the extent's min corner."""
    for names, lo in ((xs, extent[0]), (ys, extent[1])):
        for name in names:
            cols[name][rows] = lo + sf * (cols[name][rows] - lo)
