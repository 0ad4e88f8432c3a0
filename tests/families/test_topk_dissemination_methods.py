"""Skype's dissemination baselines (`index.topk.method`, skype.txt l.729-737) on their own, against
plain scores: CIQ's covering cells tile the space, each subscription meets a message in exactly
one of them, with a spatial bound that holds for every point of it (l.64); CIQ's and IPT's arrival
passes find every subscription a message reaches; IPT (individual pruning only, l.761) skips no
block and reads more than IGPT, which finds the same reached subscriptions."""

from __future__ import annotations

import numpy as np
import pytest

from harness.families.base import NEVER
from harness.families.topk.arrival import arrival_candidates
from harness.families.topk.ciq import DEPTH, ciq_candidates, ciq_index, cover_cells, leaf_coords, node_id, node_reach
from tests.families.topk_streams import built_index, scored_stream

N_MSG, N_SUB, N_TERMS = 200, 500, 30


@pytest.fixture(scope="module")
def stream():
    return scored_stream(N_MSG, N_SUB, N_TERMS)


def ancestors(px, py, geometry):
    """Per point, its node at every level 1..depth (the cells it penetrates)."""
    depth = int(geometry[4])
    ix, iy = leaf_coords(px, py, geometry)
    return np.stack([node_id(lv, ix >> (depth - lv), iy >> (depth - lv)) for lv in range(1, depth + 1)], axis=1)


@pytest.mark.parametrize("depth", [1, 3, DEPTH])
def test_a_cover_tiles_the_space_and_its_bound_holds_in_every_cell(stream, depth):
    d = stream
    geometry = ciq_index(d["s_x"], d["s_y"], d["s_off"], d["s_val"], d["s_w"], d["max_dist"], N_TERMS, 6, depth)[0]
    cover = cover_cells(d["s_x"], d["s_y"], geometry)
    assert cover.shape == (N_SUB, 3 * depth + 1)
    assert all(len(set(row)) == len(row) for row in cover.tolist())  # disjoint cells
    rng = np.random.default_rng(1)
    px, py = rng.uniform(-20, 120, 400), rng.uniform(-20, 120, 400)  # inside and outside the box
    path = ancestors(px, py, geometry)
    for s in range(0, N_SUB, 7):
        hit = np.isin(path, cover[s])
        assert (hit.sum(axis=1) == 1).all(), s  # every point lies in exactly one cell of the cover
        cell = path[hit]
        reach = node_reach(cell, np.full(len(cell), d["s_x"][s]), np.full(len(cell), d["s_y"][s]), geometry,
                           d["max_dist"])
        reach[cell == cover[s, -1]] = 1.0
        ssim = 1.0 - np.hypot(px - d["s_x"][s], py - d["s_y"][s]) / d["max_dist"]
        assert (ssim <= reach + 1e-12).all(), s  # the precomputed bound holds for every point of the cell


def test_ciq_finds_every_subscription_a_message_reaches_once(stream):
    d = stream
    theta = d["theta"].copy()
    longest = int(np.diff(d["m_off"]).max())
    ciq = ciq_index(d["s_x"], d["s_y"], d["s_off"], d["s_val"], d["s_w"], d["max_dist"], N_TERMS, longest)
    cand = np.empty(N_SUB, np.int64)
    s_ins, s_del = np.full(N_SUB, -1, np.int64), np.full(N_SUB, NEVER, np.int64)
    rejected_total = 0
    for m in range(N_MSG):
        n, rejected = ciq_candidates(m, m, d["m_off"], d["m_val"], d["m_w"], d["m_x"], d["m_y"], ciq, theta,
                                     np.full(N_SUB, -1, np.int64), s_ins, s_del, d["s_alpha"], cand)
        got = cand[:n].tolist()
        scores = d["scores"][:, m]
        sharing = set(np.flatnonzero(~np.isnan(scores)).tolist())
        assert len(set(got)) == len(got)  # one cell of each cover holds the message: met once
        assert set(np.flatnonzero(~np.isnan(scores) & (scores >= theta)).tolist()) <= set(got)
        assert set(got) <= sharing
        assert n + rejected == len(sharing)  # DAAT scores every subscription sharing a keyword, once
        rejected_total += rejected
    assert rejected_total > N_MSG  # MinT does reject


def test_ipt_skips_no_block_reads_more_than_igpt_and_finds_every_reached_subscription(stream):
    d = stream
    index, theta, alpha, lam, wsum, rmax = built_index(d, N_TERMS, per_cell=8.0)
    longest = int(np.diff(d["m_off"]).max())
    none, empty = np.full(N_TERMS, -1, np.int64), np.zeros(0, np.int64)
    s_ins, s_del = np.full(N_SUB, -1, np.int64), np.full(N_SUB, NEVER, np.int64)
    read = {True: 0, False: 0}
    for m in range(N_MSG):
        scores = d["scores"][:, m]
        reached = set(np.flatnonzero(~np.isnan(scores) & (scores >= theta)).tolist())
        for group in (True, False):
            cand = np.empty(N_SUB, np.int64)
            n, pruned, skipped = arrival_candidates(
                m, m, m, d["m_off"], d["m_val"], d["m_w"], d["m_x"], d["m_y"], np.empty(longest + 1),
                np.empty(longest + 1), index, none, empty, empty, empty, d["s_w"], wsum, rmax,
                np.full(N_SUB, -1, np.int64), lam, theta, np.full(N_SUB, -1, np.int64), s_ins, s_del, d["s_x"],
                d["s_y"], alpha, d["max_dist"], cand, group)
            assert reached <= set(cand[:n].tolist()), (m, group)
            if not group:
                assert skipped == 0
                # no early stop: every subscription sharing a keyword is read once
                assert n + pruned == int((~np.isnan(scores)).sum())
            read[group] += n + pruned
    assert read[False] > 1.5 * read[True]  # group pruning spares reading one by one
