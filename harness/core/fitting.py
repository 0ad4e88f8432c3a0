"""Non-negative least squares on relative errors: the cost models of the projected and calibrated
bases (harness/report/projection.py, harness/report/calibration/fit.py) both fit non-negative
per-operation constants to targets that span orders of magnitude, where an absolute fit would see
only the largest target."""

from __future__ import annotations

import numpy as np
from scipy.optimize import nnls


def nnls_relative(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative c minimising sum ((a c - y) / y)^2 over the rows (every y > 0): the columns are
    scaled to unit norm for the solver's conditioning, and an all-zero column's constant is 0."""
    w = 1.0 / np.asarray(y, np.float64)
    aw = np.asarray(a, np.float64) * w[:, None]
    norms = np.linalg.norm(aw, axis=0)
    keep = norms > 0
    out = np.zeros(aw.shape[1])
    if keep.any():
        sol, _ = nnls(aw[:, keep] / norms[keep], np.ones(len(w)))
        out[keep] = sol / norms[keep]
    return out
