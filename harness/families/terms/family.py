"""Top-k frequent terms (SSTD's STQ and CTQ): the k most frequent terms among the objects in a
region, once over the last tau (STQ, a snapshot query) or every delta over a window T while the
query lives (CTQ, a continuous one). No keywords: any router routes it by sending it to every
worker (`routes_everywhere`); space partitioners send it where its rectangle reaches."""

from __future__ import annotations

from dataclasses import dataclass

from datasets.workloads.events_file import RECTANGLE, build_file_workload, validate_file_workload
from datasets.workloads.snapshot import build_snapshot_workload, validate_snapshot_workload, with_ctq_reports
from harness.core.events import TERMS
from harness.families.base import Family
from harness.families.terms.index import TermsIndex
from harness.families.terms.merge import TermsMerger
from harness.families.terms.oracle import terms_oracle


class TermsFamily(Family):
    name = "terms"
    code = TERMS
    index = TermsIndex
    merger = TermsMerger
    routes_everywhere = True

    @dataclass
    class Params:
        cells_per_side: int = 64  # the stored objects' grid

    @classmethod
    def check_params(cls, params) -> None:
        if not isinstance(params.cells_per_side, int) or isinstance(params.cells_per_side, bool) \
                or params.cells_per_side < 1:
            raise ValueError(f"index.terms.cells_per_side={params.cells_per_side!r} is invalid; allowed: an integer "
                             ">= 1")

    oracle = staticmethod(terms_oracle)

    @staticmethod
    def build_workload(objects, term_df, extent, cfg, seed: int):
        """SSTD's STQ / CTQ generator (protocol stq / ctq), or a user's event file
        (`workload.source=file`), whose CTQs get their report events."""
        if getattr(cfg, "source", "generator") == "file":
            wl = build_file_workload(objects, term_df, cfg, TERMS, needs=RECTANGLE)
            wl.events = with_ctq_reports(wl.events)
            return wl
        return build_snapshot_workload(objects, term_df, extent, cfg, seed)

    @staticmethod
    def validate_workload(cfg) -> None:
        validate_file_workload(cfg)
        if getattr(cfg, "source", "generator") == "generator":
            validate_snapshot_workload(cfg, ("stq", "ctq"))
