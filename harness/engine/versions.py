"""SSTD's versioned routing (Sec. 5.2-5.3): after a migration, stored objects stay where they were
kept, and a snapshot query also goes where the routers of its look-back kept objects.

A load adjuster replaces the router between epochs; the subscriptions move (harness/engine/
migration.py) but the objects a worker keeps for snapshot queries do not, as in SSTD, whose old
mapping tables and QT-tree versions carry validation times. `Versions` keeps each replaced router
with the seqs and times of the objects it placed, while some snapshot query may still look back to
them, and routes as the current router does except in two places:
- an object routes by the router of its own time (`storing_copies`: where it was kept, which the
  terms family's counting reads);
- a snapshot query goes, besides where the current router sends it, wherever each router whose
  objects its look-back (ts > t_q - tau) reaches would have sent it, so it reaches every worker
  keeping an object it may see (each router's own contract), whatever moved since.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core.events import OBJECT, SNAPSHOT, Events


@dataclass
class Version:
    router: object
    seq_end: int  # it placed the objects with seq < seq_end (and >= the previous version's end)
    ts_end: float  # the last of those objects' time


class Versions:
    """The current router, and the earlier ones whose objects a snapshot query may still see."""

    def __init__(self, current, older: list[Version]):
        self.current, self.older = current, list(older)

    def __getattr__(self, name):  # everything else is the current router's (none while unpickling)
        current = self.__dict__.get("current")
        if current is None:
            raise AttributeError(name)
        return getattr(current, name)

    def storing_copies(self, ev: Events):
        """Objects by the router of their own seq; queries by the current router, and snapshot
        queries also by every earlier router whose objects their look-back reaches."""
        is_obj = ev.kind == OBJECT
        objs, qs = np.flatnonzero(is_obj), np.flatnonzero(~is_obj)
        version = np.searchsorted([v.seq_end for v in self.older], ev.seq[objs], side="right")
        parts = [self.current.route_queries(ev, qs)]
        for i, router in enumerate([v.router for v in self.older] + [self.current]):
            mine = objs[version == i]
            if len(mine):
                r, w = router.storing_copies(ev.take(mine))
                parts.append((mine[r], w))
        snap = qs[ev.kind[qs] == SNAPSHOT]
        for v in self.older:  # its objects are no newer than ts_end: visible when ts_end > t_q - tau
            reach = snap[ev.ts[snap] - ev.tau[snap] < v.ts_end]
            if len(reach):
                parts.append(v.router.route_queries(ev, reach))
        rows = np.concatenate([p[0] for p in parts])
        workers = np.concatenate([p[1] for p in parts])
        key = np.unique(rows * self.current.n_workers + workers)
        return key // self.current.n_workers, key % self.current.n_workers


def versioned(router, older: list[Version]):
    """The router to dispatch with: itself while nothing was replaced, else with its predecessors."""
    return Versions(router, older) if older else router


def keep_versions(older: list[Version], ts_now: float, look_back: float) -> list[Version]:
    """The versions some snapshot query from `ts_now` on may still look back to (every object of
    the others is older than any look-back)."""
    return [v for v in older if v.ts_end > ts_now - look_back]
