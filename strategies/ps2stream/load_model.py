"""Worker-load estimates behind PS2Stream's adjustment decisions (Chen et al., Section V).

The local adjustment needs the monitor's load of the worker pair and how a move of cell load
changes it (`PairModel`: tau and the no-overshoot test); the global adjustment needs the
Definition 1 loads a candidate partitioning would give (`estimated_loads`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core.events import INSERT, OBJECT, RANGE, Events
from strategies.adjust_base import EpochStats
from strategies.base import Router


@dataclass
class PairModel:
    """w_o and w_l under the monitor's measure, and how moving cell load from w_o to w_l changes
    them. Moving the share f of w_o's cell load u_o is taken to move the share f of its objects O,
    subscriptions Q and updates U. Under the Definition 1 load (O * Q + O + U, the monitor's):
    L_o(f) = L_o - f (2 - f) O_o Q_o - f (O_o + U_o) and L_l(f) = L_l + f (O_o Q_l + O_l Q_o) +
    f^2 O_o Q_o + f (O_o + U_o); under an additive measure (checks, busy time) L_o(f) = (1 - f) L_o
    and L_l(f) = L_l + f L_o. `f_o` / `f_l` are the shares already taken from w_o / given to w_l
    (they differ after a Phase I split, which lowers the total). tau = the cell load whose move
    equalises the pair: L_o - L_l is linear in the share moved (the f^2 terms cancel), so exact."""

    l_o: float
    l_l: float
    u_o: float
    oq: tuple[float, float, float, float, float] | None  # O_o, Q_o, O_l, Q_l, U_o (Definition 1)
    f_o: float = 0.0
    f_l: float = 0.0

    @classmethod
    def of(cls, stats: EpochStats, measure: str, loads: np.ndarray, w_o: int, w_l: int, u_o: float) -> PairModel:
        oq = None
        if measure == "load" and {"objects", "restored", "inserts", "deletes"} <= set(stats.workers.columns):
            w = stats.workers.set_index("worker").reindex(range(stats.n_workers), fill_value=0)
            o = w["objects"].to_numpy(np.float64)
            q = (w["restored"] + (w["inserts"] - w["deletes"]) / 2.0).clip(lower=0).to_numpy(np.float64)
            upd = (w["inserts"] + w["deletes"]).to_numpy(np.float64)
            oq = (o[w_o], q[w_o], o[w_l], q[w_l], upd[w_o])
        return cls(float(loads[w_o]), float(loads[w_l]), u_o, oq)

    def loads(self, f_o: float, f_l: float) -> tuple[float, float]:
        if self.oq is None:
            return (1 - f_o) * self.l_o, self.l_l + f_l * self.l_o
        o_o, q_o, o_l, q_l, u = self.oq
        return (self.l_o - f_o * (2 - f_o) * o_o * q_o - f_o * (o_o + u),
                self.l_l + f_l * (o_o * q_l + o_l * q_o) + f_l * f_l * o_o * q_o + f_l * (o_o + u))

    def current(self) -> tuple[float, float]:
        return self.loads(self.f_o, self.f_l)

    def after(self, drop_o: float, gain_l: float) -> tuple[float, float]:
        """The pair's loads once w_o loses `drop_o` more and w_l gains `gain_l` more cell load."""
        return self.loads(self.f_o + drop_o / self.u_o, self.f_l + gain_l / self.u_o)

    def overshoots(self, drop_o: float, gain_l: float) -> bool:
        """Whether w_l would end at or above the load w_o has now (the move only swaps the roles)."""
        return self.after(drop_o, gain_l)[1] >= self.current()[0]

    def apply(self, drop_o: float, gain_l: float) -> None:
        self.f_o += drop_o / self.u_o
        self.f_l += gain_l / self.u_o

    def ratio(self) -> float:
        lo, ll = self.current()
        return lo / ll if ll > 0 else float("inf")

    def tau(self) -> float:
        g0 = self.current()
        g1 = self.loads(self.f_o + 1, self.f_l + 1)
        gap0, slope = g0[0] - g0[1], (g0[0] - g0[1]) - (g1[0] - g1[1])
        return max(gap0, 0.0) / slope * self.u_o if slope > 0 else 0.0


def worker_measure(stats: EpochStats, measure: str) -> np.ndarray:
    """The monitor's per-worker value of `measure` (the workers table names checks "candidates")."""
    cols = stats.workers.columns
    return stats.worker_loads(measure if measure in cols or measure != "checks" else "candidates")


def estimated_loads(router: Router, objects: Events, subs: Events) -> np.ndarray:
    """Definition 1 per worker (c = 1): objects routed x subscriptions held + objects."""
    n = router.n_workers
    o = np.flatnonzero(objects.kind == OBJECT)
    _, wo = router.route_objects(objects, o)
    q = np.flatnonzero((subs.kind == INSERT) & (subs.family == RANGE))
    _, wq = router.route_queries(subs, q)
    n_o = np.bincount(wo, minlength=n)[:n].astype(np.float64)
    n_q = np.bincount(wq, minlength=n)[:n].astype(np.float64)
    return n_o * n_q + n_o
