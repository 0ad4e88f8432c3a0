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
