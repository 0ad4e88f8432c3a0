"""The migration bars of a preset that sweeps two workloads (SSTD's object and query hot spots,
sstd_balancing): one bar group per workload, drawn from every adjuster's run, where the plot once
failed on the duplicate adjuster labels and the sweep's figures were lost."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from harness.report.experiments import PLOT_METRICS, _migration_bars  # noqa: E402


def test_two_workloads_give_one_bar_group_each():
    variants = ["qttree", "qttree + fg", "qttree + pm"]
    rows = []
    for w, scale in (("hotspot_objects", 1.0), ("hotspot_queries", 3.0)):
        for i, v in enumerate(variants):
            rows.append({"variant": v, "workload": w, "x": np.nan, "adjustments": 0 if v == "qttree" else 2,
                         **{c: scale * (i + 1) for c in PLOT_METRICS["migration_bars"]}})
    fig = _migration_bars(pd.DataFrame(rows), "t", None)
    ax = fig.axes[PLOT_METRICS["migration_bars"].index("migrated_queries")]
    heights = [p.get_height() for p in ax.patches]
    assert len(heights) == 2 * len(variants)  # a group per workload, a bar per adjuster
    # per adjustment: no adjustment reads as no bar (NaN), the others their value / 2 adjustments
    assert np.isnan(heights[0]) and heights[1:3] == [1.0, 1.5] and heights[4:6] == [3.0, 4.5]
    assert sorted(t.get_text() for t in fig.axes[0].get_legend().get_texts()) == [
        "workload=hotspot_objects", "workload=hotspot_queries"]
