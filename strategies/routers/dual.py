"""The dual router of PS2Stream's global adjustment (Chen et al., Section V-B).

While a re-fitted partitioning takes over, the subscriptions alive at the switch stay where the
old router put them and later ones follow the new router; objects go to both. It wraps any two
routers with units, so it is a router shape of its own rather than part of one adjuster.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.core.events import OBJECT, Events
from strategies.base import Pairs, Router


class DualRouter(Router):
    """Two partitionings at once: subscriptions alive at the switch (`old_qids`, sorted) are routed,
    inserted and deleted by `old`, every later one by `new`; objects go to both (deduplicated).
    Units: the new router's, then the old router's shifted by the new router's unit count, so local
    adjustment keeps working during the transition."""

    def __init__(self, old: Router, new: Router, old_qids: np.ndarray, n_old: int | None = None):
        super().__init__(new.n_workers)
        self.old = old
        self.new = new
        self.old_qids = np.unique(np.asarray(old_qids, np.int64))
        self.n_old = len(self.old_qids) if n_old is None else int(n_old)  # old subscriptions at the switch

    @property
    def families(self) -> frozenset[str]:
        return frozenset(self.old.families) & frozenset(self.new.families)

    def _is_old(self, ev: Events, rows: np.ndarray) -> np.ndarray:
        ids = ev.id[rows]
        pos = np.minimum(np.searchsorted(self.old_qids, ids), max(len(self.old_qids) - 1, 0))
        return (self.old_qids[pos] == ids) if len(self.old_qids) else np.zeros(len(rows), bool)

    def observe_inserts(self, ev: Events, rows: np.ndarray) -> None:
        rows = np.asarray(rows, np.int64)
        self.new.observe_inserts(ev, rows[~self._is_old(ev, rows)])

    def route_objects(self, ev: Events, rows: np.ndarray) -> Pairs:
        r0, w0 = self.old.route_objects(ev, rows)
        r1, w1 = self.new.route_objects(ev, rows)
        key = np.unique(np.concatenate([r0, r1]) * self.n_workers + np.concatenate([w0, w1]))
        return key // self.n_workers, key % self.n_workers

    def route_queries(self, ev: Events, rows: np.ndarray) -> Pairs:
        rows = np.asarray(rows, np.int64)
        old = self._is_old(ev, rows)
        r0, w0 = self.old.route_queries(ev, rows[old])
        r1, w1 = self.new.route_queries(ev, rows[~old])
        return np.concatenate([r0, r1]), np.concatenate([w0, w1])

    def units(self, ev: Events, rows: np.ndarray) -> Pairs:
        rows = np.asarray(rows, np.int64)
        shift = len(self.new.unit_owner())
        is_obj = ev.kind[rows] == OBJECT
        old = self._is_old(ev, rows) & ~is_obj
        r0, u0 = self.old.units(ev, rows[old | is_obj])
        r1, u1 = self.new.units(ev, rows[~old])
        return np.concatenate([r0, r1]), np.concatenate([u0 + shift, u1])

    def unit_owner(self) -> np.ndarray:
        return np.concatenate([self.new.unit_owner(), self.old.unit_owner()])

    def with_unit_owner(self, owner: np.ndarray) -> DualRouter:
        k = len(self.new.unit_owner())
        return DualRouter(self.old.with_unit_owner(owner[k:]), self.new.with_unit_owner(owner[:k]), self.old_qids,
                          self.n_old)

    def size_bytes(self) -> int:
        return self.old.size_bytes() + self.new.size_bytes() + self.old_qids.nbytes

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "old": self.old.describe(), "new": self.new.describe(),
                "old_subscriptions": self.n_old}
