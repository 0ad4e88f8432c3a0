"""Top-k spatial-keyword subscriptions over a count-based sliding window (Skype / DSkype).

A subscription (location, keywords, k, alpha) holds the k best messages of the last |W| under
Score = alpha x SSim + (1 - alpha) x TSim (scoring.py), a message needing one common keyword. The
result is the stream of entries (query, message, trigger seq): a message enters on its arrival, at
the subscription's registration (initialised against the window) or as a refill when a member
expires. Workers keep their share of the window and each replica's local top-k (index.py); the
merger replays the replicas' lists into the global entries (merge.py).

Only strategies with a `route_topk` route it (the routing contract: a message sharing a keyword
with a subscription reaches a worker holding it): hash (and DSkype's mod hash), DSkype's location,
keyword and prefix methods, the term partitioners (a subscription on the workers of all its
keywords). The others refuse it with the list of those that can.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from datasets.workloads.topk import build_topk_workload, validate_topk_window, validate_topk_workload
from harness.core.events import TOPK, Events
from harness.families.base import Family, IndexContext, keyword_list_checks
from harness.families.topk import figures, formats
from harness.families.topk.arrival import METHODS
from harness.families.topk.index import TopkIndex
from harness.families.topk.merge import TopkMerger
from harness.families.topk.oracle import topk_oracle
from harness.families.topk.scoring import stream_weights
from harness.families.topk.skyband import PAIR_COST


class TopkFamily(Family):
    name = "topk"
    code = TOPK
    index = TopkIndex
    merger = TopkMerger
    migratable = False  # a replica's local top-k is over its worker's share of the window

    @dataclass
    class Params:
        # how a worker refills a subscription's top-k (Skype Sec. 6, harness/families/topk/skyband.py):
        # cskyband = the k-skyband buffer with the cost-based threshold (Eq. 9-13, Skype's choice);
        # skyband = the buffer with theta = skyband_ratio x kScore (Skype's Skyband baseline, 0.95);
        # recompute = the top-k alone, recomputed from the window whenever a member expires;
        # kmax = Yi et al.'s top-k' with k <= k' <= kmax, refilled to kmax below k (Skype's Kmax baseline)
        reevaluation: str = "cskyband"
        skyband_ratio: float = 0.95
        kmax: int = 60  # Skype's tuned default (Fig. 10: 20-120)
        # cskyband: Eq. 13's price of one scored pair in buffer operations (skyband.py; calibrated 150)
        pair_cost: float = PAIR_COST
        # how an arriving message finds the subscriptions it may enter (Skype Sec. 8.1.1, l.729-737):
        # igpt = Skype's individual and group pruning (Sec. 5, arrival.py); ipt = its individual pruning
        # only (l.761); ciq = Chen et al.'s CIQ, Skype's baseline (l.64, l.731; ciq.py)
        method: str = "igpt"

    @dataclass
    class WorkloadKnobs:
        """The top-k generator's own knobs (datasets/workloads/topk.py); it also reads queries,
        keywords_min/max and k_min/k_max. An event file's subscriptions read the window ones."""

        window: int = 20_000  # |W|: the count-based window, messages (Skype: 1M)
        window_by: str = "count"  # count: the last |W| messages; time: those of the last window_s seconds (Skype 6.3)
        window_s: float = 10.0  # window_by=time: T, seconds of the dataset's own event time
        measured_messages: int = 10_000  # objects after the window is full and the subscriptions registered
        alpha_low: float = 0.01  # alpha uniform in [alpha_low, alpha_high], inside (0, 1)
        alpha_high: float = 0.99

    # k_min and k_max its generator reads; the kNN generator's other knobs its workloads' cache key has
    # held since top-k came (the key kept every kNN knob for it then), and keeps, so that top-k
    # workloads cached before keep their key (ADR-0076)
    workload_fields = ("protocol", "k_min", "k_max", "op", "tau_hours", "hour_s", "init_objects", "timestamps",
                       "objects_per_ts", "inserts_per_ts", "deletes_per_ts")

    @classmethod
    def workload_key(cls, key: dict) -> dict:
        """A count window's key leaves out the time window's knobs (as workloads cached before time
        windows existed have it)."""
        if key.get("window_by", "count") == "count":
            return {k: v for k, v in key.items() if k not in ("window_by", "window_s")}
        return key

    @classmethod
    def oracle_checks(cls, stream: Events) -> float:
        """The brute force replays, per subscription, the messages of its keywords' lists
        (oracle.py: the candidates sharing a keyword), not every message."""
        return keyword_list_checks(stream)

    methods = tuple(METHODS)  # every `index.topk.method`; the oracle tests run each of them

    @classmethod
    def check_params(cls, params) -> None:
        if params.method not in METHODS:
            raise ValueError(f"index.topk.method={params.method!r} is invalid; allowed: {', '.join(METHODS)}")
        if params.reevaluation not in ("cskyband", "skyband", "recompute", "kmax"):
            raise ValueError(f"index.topk.reevaluation={params.reevaluation!r} is invalid; allowed: cskyband, "
                             "skyband, recompute, kmax")
        if not isinstance(params.kmax, int) or isinstance(params.kmax, bool) or params.kmax < 1:
            raise ValueError(f"index.topk.kmax={params.kmax!r} is invalid; allowed: an integer >= 1 (a subscription "
                             "keeps at least its k)")
        r = params.skyband_ratio
        if not isinstance(r, (int, float)) or isinstance(r, bool) or not 0.0 < float(r) <= 1.0:
            raise ValueError(f"index.topk.skyband_ratio={r!r} is invalid; allowed: a number in (0, 1]")
        c = params.pair_cost
        if not isinstance(c, (int, float)) or isinstance(c, bool) or not 0.0 < float(c) < float("inf"):
            raise ValueError(f"index.topk.pair_cost={c!r} is invalid; allowed: a finite number > 0 (buffer "
                             "operations one scored pair costs in cSkyband's Eq. 13)")

    oracle = staticmethod(topk_oracle)
    counters = figures.COUNTERS
    metrics = figures.METRICS
    summarise = staticmethod(figures.summarise)
    generator = staticmethod(build_topk_workload)
    check_generator = staticmethod(validate_topk_workload)
    check_file = staticmethod(validate_topk_window)  # an event file's subscriptions take the window from the config
    tiny_workload = dict(window=300, measured_messages=500)
    file_types = formats.FILE_TYPES
    finish_file = staticmethod(formats.finish)
    results = formats.RESULTS

    @classmethod
    def stream_context(cls, context: IndexContext, events: Events) -> IndexContext:
        idf, max_dist = stream_weights(events)
        return replace(context, term_weight=idf, max_dist=max_dist)
