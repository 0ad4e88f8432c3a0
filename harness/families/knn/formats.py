"""The kNN family's formats: its event-file query types (CKQ, SKQ) and its results in plain form
(pairs, exported as ckq / skq)."""

from __future__ import annotations

import numpy as np

from datasets.workloads.file_types import RECTANGLE, QueryType, TypeRows, has_keywords, left_empty, positive_k
from harness.core.events import INSERT, SNAPSHOT
from harness.families.result_rows import pair_results

_NO_WINDOW = left_empty("win", "step", why=" (only a CTQ insert has one)")


def covers_the_objects(t: TypeRows) -> None:
    """An SKQ's rectangle, when it has one, covers every object of the file (SSTD's SKQ has no
    region: a generated one gets the space)."""
    ev = t.events
    if not t.is_obj.any():
        return
    rect = np.isfinite(ev.xmin) & np.isfinite(ev.ymin) & np.isfinite(ev.xmax) & np.isfinite(ev.ymax)
    x0, y0 = float(ev.x[t.is_obj].min()), float(ev.y[t.is_obj].min())
    x1, y1 = float(ev.x[t.is_obj].max()), float(ev.y[t.is_obj].max())
    i = t.first(t.mine & rect & ((ev.xmin > x0) | (ev.ymin > y0) | (ev.xmax < x1) | (ev.ymax < y1)))
    if i is not None:
        t.fail("xmin/ymin/xmax/ymax", tuple(float(ev.cols[c][i]) for c in RECTANGLE), i,
               f"a rectangle covering every object of the file {(x0, y0, x1, y1)}, or none (the space, as the "
               "generator gives an SKQ)")


FILE_TYPES = {
    # a CKQ routes by the space until its ball is known (an unbounded region); a tau is its lifetime
    INSERT: QueryType("kNN insert (CKQ)", needs=("x", "y"), checks=(positive_k, has_keywords, _NO_WINDOW),
                      space="always", lifetime=True),
    SNAPSHOT: QueryType("kNN snapshot (SKQ)", needs=("x", "y", "tau"),
                        checks=(positive_k, _NO_WINDOW, covers_the_objects),
                        space="missing", hints={"tau": " (seconds: the snapshot's look-back)"}),
}

RESULTS = pair_results("ckq", "skq")
