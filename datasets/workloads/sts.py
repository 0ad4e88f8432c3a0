"""PS2Stream's STS query payloads: a query centred on a random object, 1-3 keywords drawn from its
terms by frequency (Q2: at least one outside the top 1%), a square range of the profile's sides
(Q3: the profile of the query's region). Used by the range generator and its drifts."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from harness.core.events import AND, OR, csr_take, list_to_csr



def pick_keywords(rng, src_off, src_val, df, k, rare_needed, rare_cut):
    """k distinct terms per query from its source object's terms, frequency-weighted, via an
    exponential race (the k smallest Exp(1)/weight); a rare term is forced where required."""
    n = len(k)
    lengths = np.diff(src_off)
    owner = np.repeat(np.arange(n), lengths)
    weight = np.log1p(df[src_val].astype(np.float64)) + 1e-9
    race = rng.exponential(size=len(src_val)) / weight
    is_rare = src_val >= rare_cut
    # Q2: the first-finishing rare term of a query wins outright.
    race_rare = np.where(is_rare, race, np.inf)
    best_rare = np.full(n, np.inf)
    np.minimum.at(best_rare, owner, race_rare)
    force = rare_needed[owner] & is_rare & (race_rare == best_rare[owner])
    race = np.where(force, -1.0, race)
    order = np.lexsort((race, owner))
    rank = np.arange(len(order)) - np.repeat(src_off[:-1], lengths)
    chosen = order[rank < np.repeat(np.minimum(k, lengths), lengths)]
    q_of = owner[chosen]
    terms = src_val[chosen].astype(np.int64)
    # Q2 queries whose source object has no rare term get one rare term from the corpus.
    has_rare = np.zeros(n, bool)
    np.logical_or.at(has_rare, owner, is_rare)
    lacking = np.flatnonzero(rare_needed & ~has_rare)
    if len(lacking) and rare_cut < len(df):
        p = df[rare_cut:].astype(np.float64) + 1.0
        extra = rare_cut + rng.choice(len(p), size=len(lacking), p=p / p.sum())
        # replace the query's most frequent chosen term (or add when it has room)
        q_of = np.concatenate([q_of, lacking])
        terms = np.concatenate([terms, extra])
    # sort (query, term), drop duplicates, keep at most k (dropping the most frequent extras)
    order = np.lexsort((-terms, q_of))
    q_of, terms = q_of[order], terms[order]
    keep = np.ones(len(terms), bool)
    keep[1:] = (q_of[1:] != q_of[:-1]) | (terms[1:] != terms[:-1])
    q_of, terms = q_of[keep], terms[keep]
    first = np.searchsorted(q_of, np.arange(n))
    rank = np.arange(len(q_of)) - first[q_of]
    keep = rank < k[q_of]
    q_of, terms = q_of[keep], terms[keep]
    order = np.lexsort((terms, q_of))
    q_of, terms = q_of[order], terms[order]
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(q_of, minlength=n), out=offsets[1:])
    return offsets, terms.astype(np.int32)


def q3_region(cfg, extent, x, y):
    """The Q3 region (row-major index on the regions_per_side^2 grid) of each point."""
    side = cfg.regions_per_side
    xmin, ymin, xmax, ymax = extent
    rx = np.clip(((x - xmin) / max(xmax - xmin, 1e-9) * side).astype(np.int64), 0, side - 1)
    ry = np.clip(((y - ymin) / max(ymax - ymin, 1e-9) * side).astype(np.int64), 0, side - 1)
    return ry * side + rx


KEYWORD_BAND_FRACTION = 0.01  # the band's width, as a share of the vocabulary (at least 50 terms)


def band_keywords(cfg, df, counts, src):
    """Tornado Fig. 8(c)'s keywords (tornado.txt l.368: "we vary the frequency of query keywords
    from 0%, i.e., least frequent keywords that do not match the keywords of data objects, to
    100%, i.e., most frequent keywords"): each query keeps its keyword count but draws its terms,
    distinct and uniform, from a band of the vocabulary ranked by frequency (`df`, most frequent
    first; ties by term id), placed at `keyword_rarity` of the ranking (0: the top, 1: the tail).
    The band is 1% of the vocabulary (at least 50 terms, so that 3 distinct keywords exist). The
    draws use a generator of their own (seeded by the workload's seed offset and the query
    centres), so the rest of the workload is the same stream as without the knob."""
    n_terms = len(df)
    order = np.lexsort((np.arange(n_terms), -np.asarray(df, np.float64)))
    width = min(n_terms, max(50, int(np.ceil(KEYWORD_BAND_FRACTION * n_terms)), int(counts.max(initial=1))))
    start = int(round(float(cfg.keyword_rarity) * (n_terms - width)))
    band = order[start:start + width]
    rng = np.random.default_rng([int(cfg.seed_offset), 0xF18C, len(src), int(np.sum(src) % (1 << 62))])
    kmax = int(counts.max(initial=0))
    picks = rng.integers(0, width, size=(len(counts), kmax))
    live = np.arange(kmax)[None, :] < counts[:, None]
    while True:  # redraw a query's repeated picks until its picks are distinct (k << width: a few rounds)
        picks = np.where(live, picks, width)  # unused slots sort last
        picks.sort(axis=1)
        dup = np.zeros_like(live)
        dup[:, 1:] = (picks[:, 1:] == picks[:, :-1]) & live[:, 1:]
        if not dup.any():
            break
        picks[dup] = rng.integers(0, width, size=int(dup.sum()))
    # the live picks are each row's first `counts` slots (unused ones sorted last): their terms, sorted
    terms = np.where(live, band[np.minimum(picks, width - 1)], np.iinfo(np.int64).max)
    terms.sort(axis=1)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), terms[live].astype(np.int64)


def query_payload(cfg, rng, objects, df, src, is_q2, u, k, coin=None):
    """Payloads of queries centred on objects `src` given their draws (side uniform u, keyword count
    k, AND/OR coin); keywords are picked with `rng`, and the coin is drawn after them when None (the
    base workload's draw order, which must not change)."""
    ox = objects.column("x").to_numpy()
    oy = objects.column("y").to_numpy()
    o_off, o_val = list_to_csr(objects.column("terms"))
    cx, cy = ox[src], oy[src]
    lo = np.where(is_q2, cfg.q2_side_km_min, cfg.q1_side_km_min)
    hi = np.where(is_q2, cfg.q2_side_km_max, cfg.q1_side_km_max)
    half = (lo + u * (hi - lo)) / 2.0
    src_off, src_val = csr_take(o_off, o_val, src)
    rare_cut = max(1, int(np.ceil(cfg.rare_top_fraction * len(df))))
    t_off, t_val = pick_keywords(rng, src_off, src_val, df, k, is_q2, rare_cut)
    if getattr(cfg, "keyword_rarity", None) is not None:
        t_off, t_val = band_keywords(cfg, df, np.diff(t_off), src)
    if coin is None:
        coin = rng.random(len(src)) < cfg.or_fraction
    op = np.where(coin & (np.diff(t_off) > 1), OR, AND).astype(np.int8)
    payload = dict(x=cx, y=cy, xmin=cx - half, ymin=cy - half, xmax=cx + half, ymax=cy + half, op=op)
    return payload, t_off, t_val, coin


def sts_queries(cfg, rng, objects: pa.Table, df: np.ndarray, extent, n: int):
    """n query payloads: centre, square rectangle, keywords (CSR), operator; and the draws behind
    them (`info`), so that a drift can re-make a query with another type or centre."""
    src = rng.integers(0, objects.num_rows, size=n)
    region_q2 = None
    if cfg.profile == "q3":
        ox = objects.column("x").to_numpy()
        oy = objects.column("y").to_numpy()
        region = q3_region(cfg, extent, ox[src], oy[src])
        side = cfg.regions_per_side
        region_q2 = np.random.default_rng(rng.integers(1 << 62)).random(side * side) < cfg.q2_region_fraction
        is_q2 = region_q2[region]
    else:
        is_q2 = np.full(n, cfg.profile == "q2")
    u = rng.random(n)
    k = rng.integers(cfg.keywords_min, cfg.keywords_max + 1, size=n)
    payload, t_off, t_val, coin = query_payload(cfg, rng, objects, df, src, is_q2, u, k)
    info = dict(src=src, is_q2=is_q2, u=u, k=k, coin=coin, region_q2=region_q2)
    return payload, t_off, t_val, info


def csr_replace(offsets, values, rows, new_offsets, new_values):
    """The CSR array with `rows` replaced by the rows of (new_offsets, new_values)."""
    n = len(offsets) - 1
    both_off = np.concatenate([offsets, offsets[-1] + new_offsets[1:]])
    both_val = np.concatenate([values, new_values]).astype(values.dtype, copy=False)
    pick = np.arange(n, dtype=np.int64)
    pick[rows] = n + np.arange(len(rows))
    return csr_take(both_off, both_val, pick)
