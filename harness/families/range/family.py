"""Range subscriptions (PS2Stream, Tornado, SSTD's CRQ): a point in the rectangle and the keywords
satisfied (AND: all, OR: any), over the objects that arrive while the subscription is live."""

from __future__ import annotations

from dataclasses import dataclass

from datasets.workloads.range import build_workload, plan_workload, validate_range_workload
from harness.core.events import RANGE
from harness.families.base import Family
from harness.families.range import formats
from harness.families.range.gi2 import GI2Index
from harness.families.range.merge import RangeMerger
from harness.families.range.oracle import oracle_keys
from harness.families.range.tiled_oracle import tiled_oracle_digest


class RangeFamily(Family):
    name = "range"
    code = RANGE
    index = GI2Index
    merger = RangeMerger
    object_sampling = True  # an object's matches are the subscriptions whose box and terms it meets

    @dataclass
    class Params:
        cells_per_side: int = 64  # GI2 granularity, 2^6 as in PS2Stream's experiments

    @classmethod
    def check_params(cls, params) -> None:
        if not isinstance(params.cells_per_side, int) or params.cells_per_side < 1:
            raise ValueError(f"index.range.cells_per_side={params.cells_per_side!r} is invalid; allowed: an integer >= 1")

    oracle = staticmethod(oracle_keys)
    scale_oracle = staticmethod(tiled_oracle_digest)
    # the STS generator; SSTD's snapshot range queries (SRQ) with protocol srq or mix
    generator = staticmethod(build_workload)
    planner = staticmethod(plan_workload)  # the same stream, written a chunk at a time
    check_generator = staticmethod(validate_range_workload)
    snapshot_protocols = ("srq", "mix")
    snapshot_type = "srq"
    file_types = formats.FILE_TYPES
    results = formats.RESULTS
