"""How many window messages a top-k subscription can rank (those sharing at least one of its
keywords), per dataset: the ceiling of a buffer (Kmax's holds min(candidates, kmax); cSkyband's
and Skyband's hold at most the candidates). Skype's Table 4 buffer sizes assume a window rich
enough for a buffer to fill; this shows where it is not. Read from a preset's workload (the
window as the measured part starts, every subscription registered by then; a sample of
`--sample` subscriptions), no run needed.

    PYTHONPATH=. python benchmarks/topk_candidates.py --results <folder with the preset's cache> \
        [--preset skype_reevaluation --datasets synthetic,geonames,synthetic_long --kmax 60]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import sparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_strategies import compose, load_stream  # noqa: E402


def incidence(offsets: np.ndarray, values: np.ndarray, n_terms: int) -> sparse.csr_matrix:
    rows = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    return sparse.csr_matrix((np.ones(len(values), np.int8), (rows, values.astype(np.int64))),
                             shape=(len(offsets) - 1, n_terms))


def main() -> None:
    from harness.core.events import INSERT, OBJECT

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", required=True)
    ap.add_argument("--preset", default="skype_reevaluation")
    ap.add_argument("--datasets", default="synthetic,geonames,synthetic_long")
    ap.add_argument("--kmax", type=int, default=60)
    ap.add_argument("--sample", type=int, default=2000)
    args = ap.parse_args()
    print("| dataset | window | subscriptions | candidates: median | mean | share below kmax | "
          "mean min(candidates, kmax) | share below k |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.datasets.split(","):
        cfg = compose(args.preset, [f"dataset={name}", "workload=topk_q"], args.results)
        _, events, warmup = load_stream(cfg, Path(args.results))
        head = events.take(np.arange(warmup))
        msgs = head.take(np.flatnonzero(head.kind == OBJECT)[-int(cfg.workload.window):])
        subs = head.take(np.flatnonzero(head.kind == INSERT))
        rng = np.random.default_rng(0)
        subs = subs.take(np.sort(rng.choice(len(subs), min(args.sample, len(subs)), replace=False)))
        n_terms = int(max(msgs.values.max(initial=0), subs.values.max(initial=0))) + 1
        shared = incidence(subs.offsets, subs.values, n_terms) @ incidence(msgs.offsets, msgs.values, n_terms).T
        cand = shared.getnnz(axis=1)
        k = subs.k.astype(np.int64)
        print(f"| {name} | {len(msgs):,} | {len(subs):,} | {np.median(cand):,.0f} | {cand.mean():,.0f} | "
              f"{(cand < args.kmax).mean():.0%} | {np.minimum(cand, args.kmax).mean():.1f} | "
              f"{(cand < k).mean():.0%} |", flush=True)


if __name__ == "__main__":
    main()
