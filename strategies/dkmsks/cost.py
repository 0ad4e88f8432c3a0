"""DkM-SKS's cost equations (Tsuruoka et al., arXiv 2101.12417): Eq. (1) keyword cost (KOP,
Sec. 3.1) and Eq. (4)-(6) space-keyword cost (Sec. 4.1). SOP's Eq. (2)-(3) is a plain P(R) count
(ObjectStats.rect_counts, used in sop.py).

Everything here works on *regions* (xmin, ymin, xmax, ymax arrays) plus keyword sets (CSR), not
on a query family: a range subscription's region is its rectangle, a kNN subscription's region is
the rectangle enclosing its ball B(s) (the k-th neighbour among O_init), and the formulas are the
same. Each returns the cost times |O_init|: an exact integer numerator (counts.py).
"""

from __future__ import annotations

import numpy as np

from strategies.dkmsks.counts import ObjectStats, term_counts


def eq1_numerators(term_count: np.ndarray, offsets: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Eq. (1) times |O_init|: sum over the subscription's keywords of |O_lambda| (KOP)."""
    lengths = np.diff(offsets)
    owner = np.repeat(np.arange(len(lengths)), lengths)
    return np.bincount(owner, weights=term_counts(term_count, values), minlength=len(lengths)).round().astype(np.int64)


def eq5_numerators(stats: ObjectStats, rects: np.ndarray, offsets: np.ndarray, values: np.ndarray,
                   group: np.ndarray | None = None) -> np.ndarray:
    """Eq. (5) times |O_init|: sum over s's keywords of |O_{R,lambda}|. R is given per subscription,
    or per group (`rects[group[s]]`), in which case each distinct (group, keyword) is counted once."""
    lengths = np.diff(offsets)
    owner = np.repeat(np.arange(len(lengths)), lengths)
    rects = np.asarray(rects, np.float64).reshape(-1, 4)
    if group is None or len(owner) == 0:
        cnt = stats.rect_counts(rects[owner], values)
    else:
        v = np.asarray(values, np.int64)
        width = int(v.max()) + 1
        keys, inv = np.unique(np.repeat(np.asarray(group, np.int64), lengths) * width + v, return_inverse=True)
        cnt = stats.rect_counts(rects[keys // width], keys % width)[inv]
    return np.bincount(owner, weights=cnt, minlength=len(lengths)).round().astype(np.int64)


def eq6_numerators(stats: ObjectStats, group: np.ndarray, group_rects: np.ndarray, offsets: np.ndarray,
                   values: np.ndarray) -> np.ndarray:
    """Eq. (6) times |O_init| per group: sum over members of Eq. (5) with the group's R. One count
    per distinct (group, keyword), weighted by how many members hold the keyword."""
    n_groups = len(group_rects)
    lengths = np.diff(offsets)
    g = np.repeat(np.asarray(group, np.int64), lengths)
    if len(g) == 0:
        return np.zeros(n_groups, np.int64)
    v = np.asarray(values, np.int64)
    width = int(v.max()) + 1
    keys, mult = np.unique(g * width + v, return_counts=True)
    ug, ut = keys // width, keys % width
    cnt = stats.rect_counts(np.asarray(group_rects)[ug], ut)
    return np.bincount(ug, weights=cnt * mult, minlength=n_groups).round().astype(np.int64)
