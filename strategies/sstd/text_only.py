"""SSTD's "Text" baseline (Section 7.1): the QT-tree built with textual splits only.

Every node keeps the whole space as its MBR and the root is split by text repeatedly (heaviest
node first, by the cost model); everything else is `qttree`'s. With keyword routing an AND query
reaches one leaf, an object every leaf owning one of its terms (the paper's Text routes queries
to every leaf, since its routers never check keywords; see docs/decisions.md).
"""

from __future__ import annotations

from strategies.sstd.qttree.strategy import QTTreeStrategy


class TextOnlyStrategy(QTTreeStrategy):
    name = "text_only"
    split_kinds = ("text",)
