"""A kNN subscription's routing rectangle narrowed to its ball: shared by the fit view, the
worker's replica narrowing and the DkM-SKS cost models, so all three agree on the shape."""

from __future__ import annotations

import numpy as np

from harness.core.events import Events

RECT = ("xmin", "ymin", "xmax", "ymax")


def ball_boxes(ev: Events, rows: np.ndarray, r: np.ndarray) -> dict[str, np.ndarray]:
    """Per row, its rectangle intersected with the square of half-side r around its point."""
    return {"xmin": np.maximum(ev.xmin[rows], ev.x[rows] - r), "ymin": np.maximum(ev.ymin[rows], ev.y[rows] - r),
            "xmax": np.minimum(ev.xmax[rows], ev.x[rows] + r), "ymax": np.minimum(ev.ymax[rows], ev.y[rows] + r)}


def narrowed_to_balls(ev: Events, rows: np.ndarray, r: np.ndarray) -> Events:
    """`ev` with the rectangles of `rows` narrowed to their balls of radius r (other rows untouched)."""
    box = ball_boxes(ev, rows, r)
    cols = dict(ev.cols)
    for c in RECT:
        cols[c] = cols[c].copy()
        cols[c][rows] = box[c]
    return Events(cols, ev.offsets, ev.values)
