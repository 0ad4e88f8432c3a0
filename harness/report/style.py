"""One colour and marker per strategy, the same in every plot of the project, and a legend that
sits outside the axes (grand_range draws 17+ strategies: a ten-colour cycle repeats and an inner
legend covers the data).

A registered strategy's style follows its place in the registry's (alphabetical) list: 20 colours
and 7 markers give distinct pairs up to 140 names. A label that is not a strategy's name (a variant,
"kdt + gr") gets the style of a stable hash of the label, placed after the registry's, so it too
keeps its style from plot to plot.
"""

from __future__ import annotations

import zlib
from functools import lru_cache

from matplotlib import colormaps

MARKERS = ("o", "s", "^", "D", "v", "P", "X")


@lru_cache(maxsize=None)
def _registered() -> tuple[str, ...]:
    from strategies import registry  # the report layer sits above strategies/

    return tuple(registry.names())


def style(label: str) -> dict:
    """matplotlib keywords (color, marker) of a strategy or variant label."""
    names = _registered()
    i = names.index(label) if label in names else len(names) + zlib.crc32(label.encode()) % 997
    return {"color": colormaps["tab20"].colors[i % 20], "marker": MARKERS[i % len(MARKERS)]}


def legend_outside(fig, axes) -> None:
    """One legend for the figure, right of the axes, from every panel's labelled lines (once each)."""
    seen: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=7,
                   frameon=False)
