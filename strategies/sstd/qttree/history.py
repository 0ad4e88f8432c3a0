"""The historical queries SSTD builds its query distribution statistics J from (Sec. 4.1.2, l.180:
"Taking a set of historical queries Q and objects O as input"): all six types, generated from the
tweets the way the paper generates its queries (Sec. 7.1, l.320: "we sample a small set of tweets
and for each tweet, we utilize its textual content and geo-location to generate one query in SRQ,
SKQ, STQ, CRQ, CKQ and CTQ"), so Eq. 2 weighs every type, whatever one type a preset streams.

- The tweets: `n` of the fitting sample's objects with keywords, drawn without replacement with the
  run's seed, n = max(the sample's queries, MIN_QUERIES), at most the objects there are.
- Per tweet one query of each type, with the sample's own query parameters where it has queries
  that carry them (a keyword count and operator drawn from its keyword queries, its regions' median
  area, its kNN queries' median k), else the paper's defaults (l.320: 1 keyword, 0.01% of the
  space, k = 10), AND (the paper's Eq. 1).
- Regions (SRQ, STQ, CRQ, CTQ): the square of that area around the tweet. kNN types (SKQ, CKQ): the
  square around the ball to the k-th nearest sample object holding the keywords (SSTD's
  "d(q, P) < d(q, q.R_k)", as stats.QueryStats narrows SKQs); fewer than k: the whole extent.
- Every query comes after every object (the store it sees is the whole sample) and has no deletion.
Pr(type) is then 1/6 each, the paper's mix (400k queries of each type, l.320).
"""

from __future__ import annotations

import numpy as np

from harness.core.events import AND, INSERT, KNN, OBJECT, RANGE, SNAPSHOT, TERMS, Events
from strategies.sstd.qttree.stats import TYPES

MIN_QUERIES = 200  # historical queries per type at least (SSTD's sample sizes, conf/workload/*_q.yaml)
DEFAULT_AREA = 1e-4  # l.320 (ii): 0.01% of the space
DEFAULT_K = 10  # l.320 (iii)


def _sample_queries(sample: Events) -> np.ndarray:
    kind, fam = sample.kind, sample.family
    report = (fam == TERMS) & np.isfinite(sample.step) & (kind == SNAPSHOT)
    return np.flatnonzero(((kind == INSERT) | (kind == SNAPSHOT)) & np.isin(fam, (RANGE, KNN, TERMS)) & ~report)


def _ball_rects(px, py, kw_off, kw_val, ops, ks, ox, oy, o_off, o_val, extent) -> np.ndarray:
    """Per query the square around its ball to the k-th nearest object holding its keywords (all
    for AND, one for OR); the extent when fewer than k objects do."""
    owner = np.repeat(np.arange(len(ox)), np.diff(o_off))
    order = np.argsort(o_val, kind="stable")
    p_terms, p_objs = o_val[order], owner[order]
    out = np.tile(np.asarray(extent, np.float64), (len(px), 1))
    for i in range(len(px)):
        terms = kw_val[kw_off[i]:kw_off[i + 1]]
        lists = [p_objs[np.searchsorted(p_terms, t):np.searchsorted(p_terms, t, side="right")] for t in terms]
        if not lists:
            continue
        cand = lists[0]
        for other in lists[1:]:
            cand = np.intersect1d(cand, other) if ops[i] == AND else np.union1d(cand, other)
        k = max(int(ks[i]), 1)
        if len(cand) < k:
            continue
        r = float(np.sqrt(np.partition((ox[cand] - px[i]) ** 2 + (oy[cand] - py[i]) ** 2, k - 1)[k - 1]))
        out[i] = (px[i] - r, py[i] - r, px[i] + r, py[i] + r)
    return out


def historical_sample(sample: Events, extent, seed: int) -> Events:
    """The fitting sample's objects followed by n historical queries of each of SSTD's six types."""
    objs = np.flatnonzero(sample.kind == OBJECT)
    o_len = sample.offsets[objs + 1] - sample.offsets[objs]
    tweets = objs[o_len > 0]
    qs = _sample_queries(sample)
    n = min(max(len(qs), MIN_QUERIES), len(tweets))
    rng = np.random.default_rng([int(seed), 47])
    pick = np.sort(rng.choice(tweets, n, replace=False)) if n else np.zeros(0, np.int64)
    q_len = sample.offsets[qs + 1] - sample.offsets[qs]
    keyworded = qs[(q_len > 0) & (sample.family[qs] != TERMS)]
    if len(keyworded):
        j = rng.choice(keyworded, n)
        n_kw = (sample.offsets[j + 1] - sample.offsets[j]).astype(np.int64)
        ops = sample.op[j].astype(np.int8)
    else:
        n_kw, ops = np.ones(n, np.int64), np.full(n, AND, np.int8)
    x0, y0, x1, y1 = (float(v) for v in extent)
    regions = qs[(sample.family[qs] != KNN) & np.isfinite(sample.xmin[qs]) & np.isfinite(sample.xmax[qs])]
    if len(regions):
        area = float(np.median((sample.xmax[regions] - sample.xmin[regions]) * (sample.ymax[regions] - sample.ymin[regions])))
    else:
        area = DEFAULT_AREA * (x1 - x0) * (y1 - y0)
    knn = qs[sample.family[qs] == KNN]
    k = int(np.median(sample.k[knn])) if len(knn) else DEFAULT_K
    # keywords: min(l, |terms|) of the tweet's terms, uniformly
    kw = []
    for i, r in enumerate(pick.tolist()):
        terms = sample.values[sample.offsets[r]:sample.offsets[r + 1]]
        kw.append(np.sort(rng.choice(terms, min(int(n_kw[i]), len(terms)), replace=False)))
    kw_len = np.array([len(t) for t in kw], np.int64)
    kw_off = np.concatenate([[0], np.cumsum(kw_len)]).astype(np.int64)
    kw_val = np.concatenate(kw).astype(np.int32) if kw else np.zeros(0, np.int32)
    px, py = sample.x[pick].astype(np.float64), sample.y[pick].astype(np.float64)
    half = np.sqrt(max(area, 0.0)) / 2
    square = np.stack([px - half, py - half, px + half, py + half], 1)
    o_off = np.concatenate([[0], np.cumsum(o_len)]).astype(np.int64)
    o_val = np.concatenate([sample.values[sample.offsets[r]:sample.offsets[r + 1]] for r in objs]).astype(np.int64) \
        if len(objs) else np.zeros(0, np.int64)
    ball = _ball_rects(px, py, kw_off, kw_val, ops, np.full(n, k), sample.x[objs], sample.y[objs], o_off, o_val,
                       extent)
    # the events: the sample's objects, then per type its n queries
    t_end = float(sample.ts[objs].max()) if len(objs) else 0.0
    parts_cols, parts_len = [], []
    obj_cols = {c: sample.cols[c][objs] for c in sample.cols}
    parts_cols.append(obj_cols)
    parts_len.append(o_len.astype(np.int64))
    vals = [np.concatenate([sample.values[sample.offsets[r]:sample.offsets[r + 1]] for r in objs]).astype(np.int32)
            if len(objs) else np.zeros(0, np.int32)]
    for code, ((fam, kind), _name) in enumerate(TYPES.items()):
        rect = ball if fam == KNN else square
        keywords = fam != TERMS  # a top-k-terms query has no keywords
        cols = {
            "ts": np.full(n, t_end), "kind": np.full(n, kind, np.int8), "family": np.full(n, fam, np.int8),
            "id": np.arange(n, dtype=np.int64) + code * n, "x": px, "y": py,
            "xmin": rect[:, 0], "ymin": rect[:, 1], "xmax": rect[:, 2], "ymax": rect[:, 3],
            "op": ops if keywords else np.full(n, AND, np.int8), "k": np.full(n, k, np.int32),
            "alpha": np.zeros(n, np.float32), "tau": np.full(n, np.inf if kind == SNAPSHOT else np.nan),
            "win": np.full(n, np.nan), "step": np.full(n, np.nan),
        }
        parts_cols.append(cols)
        parts_len.append(kw_len if keywords else np.zeros(n, np.int64))
        vals.append(kw_val if keywords else np.zeros(0, np.int32))
    lengths = np.concatenate(parts_len)
    total = len(lengths)
    cols = {c: np.concatenate([p[c] for p in parts_cols]).astype(sample.cols[c].dtype) for c in parts_cols[1]}
    cols["seq"] = np.arange(total, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return Events(cols, offsets, np.concatenate(vals).astype(np.int32))

