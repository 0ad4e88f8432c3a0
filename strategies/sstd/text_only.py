"""SSTD's "Text" baseline (Section 7.1): the QT-tree built with textual splits only.

Every node keeps the whole space as its MBR and the root is split by text repeatedly (heaviest
node first, by the cost model); everything else is `qttree`'s: an object goes to one leaf, the one
of least Eq. 2 increment, and a query to every leaf, since routers do not check query keywords
(sstd.txt l.225; ADR-0096).
"""

from __future__ import annotations

from strategies.sstd.qttree.strategy import QTTreeStrategy


class TextOnlyStrategy(QTTreeStrategy):
    name = "text_only"
    split_kinds = ("text",)
