"""Top-k frequent terms (SSTD's STQ and CTQ): the k most frequent terms among the objects in a
region, once over the last tau (STQ, a snapshot query) or every delta over a window T while the
query lives (CTQ, a continuous one). No keywords: any router routes it by sending it to every
worker (`routes_everywhere`); space partitioners send it where its rectangle reaches."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core.events import INSERT, TERMS, Events
from harness.families.base import Family, IndexContext
from harness.families.terms import formats
from harness.families.terms.index import TermsIndex
from harness.families.terms.merge import TermsMerger
from harness.families.terms.oracle import terms_oracle


class TermsFamily(Family):
    name = "frequent_terms"
    code = TERMS
    needs_k = True
    index = TermsIndex
    merger = TermsMerger
    routes_everywhere = True

    @dataclass
    class Params:
        cells_per_side: int = 64  # the stored objects' grid
        slice_size: int = 16384  # stored objects per count-table slice (0: no tables, every object scanned)

    @classmethod
    def check_params(cls, params) -> None:
        for name, low in (("cells_per_side", 1), ("slice_size", 0)):
            v = getattr(params, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise ValueError(f"index.frequent_terms.{name}={v!r} is invalid; allowed: an integer >= {low}")

    oracle = staticmethod(terms_oracle)
    # no generator of its own: SSTD's snapshot generator makes its STQs (protocol stq) and CTQs (ctq)
    snapshot_protocols = ("stq", "ctq", "mix")
    snapshot_type = "stq"  # a CTQ's reports count as STQs
    file_types = formats.FILE_TYPES
    derive_file = staticmethod(formats.with_reports)
    results = formats.RESULTS
    # SSTD's CTQ: registrations and their reports over a preloaded store
    tiny_workload = dict(protocol="ctq", queries=40, preload_objects=800, objects_per_s=100, ctq_span_s=6.0,
                         area_fraction=0.02, ctq_step_hours=40.0, ctq_window_hours=60.0, k_min=3, k_max=5)

    @classmethod
    def stream_context(cls, context: IndexContext, events: Events) -> IndexContext:
        """The store's look-back (the base class's), after checking each CTQ's registration: a
        window T, a step delta and a lifetime tau > 0, the step no longer than the window (a
        report would skip objects otherwise; SSTD gives neither), k >= 1, a region meeting the space."""
        regs = np.flatnonzero((events.kind == INSERT) & (events.family == TERMS))
        for name, allowed in (("win", "a window T in seconds > 0"), ("step", "a step delta in seconds > 0"),
                              ("tau", "a lifetime in seconds > 0")):
            bad = regs[~(events.cols[name][regs] > 0)]
            if len(bad):
                _refuse(events, bad[0], name, float(events.cols[name][bad[0]]), allowed)
        for i in regs[events.step[regs] > events.win[regs]]:
            _refuse(events, i, "step", float(events.step[i]), f"at most the window win={float(events.win[i])!r}")
        for i in regs[events.k[regs] < 1]:
            _refuse(events, i, "k", int(events.k[i]), "an integer >= 1")
        x0, y0, x1, y1 = (float(v) for v in context.extent)
        for i in regs[(events.xmax[regs] < x0) | (events.xmin[regs] > x1) | (events.ymax[regs] < y0)
                      | (events.ymin[regs] > y1)]:
            _refuse(events, i, "region", tuple(float(events.cols[c][i]) for c in ("xmin", "ymin", "xmax", "ymax")),
                    f"a rectangle meeting the space {(x0, y0, x1, y1)}")
        return super().stream_context(context, events)


def _refuse(events: Events, i: int, field: str, value, allowed: str):
    raise ValueError(f"workload ({TermsFamily.name}): CTQ {int(events.id[i])} (seq {int(events.seq[i])}) has "
                     f"{field}={value!r}; allowed: {allowed}")
