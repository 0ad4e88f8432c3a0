"""Repeated measurements of a run: each measured epoch timed `measure.repeat` times from the same
state, the first `measure.discard` dropped (numba compilation and first-touch effects), the rest
summarised by their median and a distribution-free interval for it.

The interval is the pair of order statistics (X_(j), X_(n+1-j)) with the largest j whose
coverage of the true median, 1 - 2 P(Binomial(n, 1/2) < j), is at least 95%; below six kept
repetitions no pair reaches 95% and the interval is the full range, its smaller coverage stated
(`ci_coverage`), since a bootstrap or a t-interval of four or five timings would claim more than it
knows.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import binom

LEVEL = 0.95


def median_interval(values) -> tuple[float, float, float, float]:
    """(median, lower, upper, coverage) of the values; NaNs when there are none."""
    x = np.sort(np.asarray(values, np.float64))
    n = len(x)
    if n == 0:
        return (float("nan"),) * 4
    j, coverage = 1, 1.0 - 2.0 * binom.cdf(0, n, 0.5)
    for cand in range(1, n // 2 + 1):
        cov = 1.0 - 2.0 * binom.cdf(cand - 1, n, 0.5)
        if cov >= LEVEL:
            j, coverage = cand, cov
    return float(np.median(x)), float(x[j - 1]), float(x[n - j]), float(coverage if n > 1 else 0.0)


def kept(n_reps: int, discard: int) -> range:
    """The repetitions that count: all but the first `discard`, unless that would leave none."""
    return range(discard if n_reps > discard else 0, n_reps)
