"""SSTD's "Quadtree" baseline (Section 7.1): the QT-tree built with spatial splits only.

Same statistics J, cost model (Eq. 1-2), heap order, theta and Karmarkar-Karp allocation as
`qttree`; only the choice of split is fixed, so the comparison isolates the textual splits.
"""

from __future__ import annotations

from strategies.sstd.qttree.strategy import QTTreeStrategy


class QuadtreeStrategy(QTTreeStrategy):
    name = "quadtree"
    split_kinds = ("spatial",)
