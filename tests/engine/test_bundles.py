"""Worker state bundles: written and read back part by part, and split and gathered by a migration
so that each subscription's kept results travel with it and stored objects go where the new
router sends them, each once."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from harness.core.events import INSERT, OBJECT
from harness.engine.blocks import read_bundle, write_bundle
from harness.engine.migration import gather_bundle, split_bundle
from harness.engine.simulate import default_context
from harness.families.base import IndexContext, StateBundle
from harness.families.range.family import RangeFamily
from strategies import registry
from tests.streams import random_stream


def _bundle(seed=3):
    ev = random_stream(seed, n_objects=80, n_queries=30, delete_fraction=0.0)
    queries = ev.take(np.flatnonzero(ev.kind == INSERT))
    objects = ev.take(np.flatnonzero(ev.kind == OBJECT))
    results = pa.table({"qid": np.repeat(queries.id, 2), "oid": np.arange(2 * len(queries), dtype=np.int64)})
    return ev, StateBundle(queries, objects, results)


def test_a_bundle_round_trips_through_its_files(tmp_path):
    _, bundle = _bundle()
    write_bundle(tmp_path, 3, 0, bundle)
    back = read_bundle(tmp_path, 3, 0)
    assert back.queries.id.tolist() == bundle.queries.id.tolist()
    assert back.objects.id.tolist() == bundle.objects.id.tolist()
    assert back.results.equals(bundle.results)
    write_bundle(tmp_path, 3, 0, StateBundle())  # an empty state leaves no files behind
    assert len(read_bundle(tmp_path, 3, 0)) == 0 and not list(tmp_path.iterdir())


def test_split_and_gather_move_results_with_their_subscription_once_and_objects_stay():
    """Subscriptions move with their results; the kept objects stay on their worker (snapshot
    queries follow them: harness/engine/versions.py)."""
    ev, bundle = _bundle()
    context = default_context(ev)
    cls = registry.get("grid")
    router = cls().fit(ev.take(np.arange(40)), 4, cls.make_params({"cells_per_side": 8}), context)
    parts, _, leaving = split_bundle(bundle, router, worker=0)
    q_route = router.route_queries(bundle.queries, np.arange(len(bundle.queries)))
    factory = RangeFamily.index_factory(IndexContext(context.extent, context.vocab_size), {"cells_per_side": 8})
    moved = 0
    for dest, part in parts.items():
        assert set(part.queries.id.tolist()) == set(bundle.queries.id[q_route[0][q_route[1] == dest]].tolist())
        assert set(part.results.column("qid").to_pylist()) == set(part.queries.id.tolist())
        assert sorted(part.objects.id.tolist()) == (sorted(bundle.objects.id.tolist()) if dest == 0 else [])
        # the destination already holds one of its subscriptions: that one does not arrive twice
        held = StateBundle(part.queries.take(np.arange(1)), part.objects.take(np.arange(0)), None)
        g = gather_bundle(dest, held, [part, part], factory)
        assert sorted(g.state.queries.id.tolist()) == sorted(part.queries.id.tolist())
        assert g.moved_in == len(part.queries) - 1
        assert sorted(g.state.objects.id.tolist()) == sorted(part.objects.id.tolist())
        assert g.state.results.num_rows == 2 * (len(part.queries) - 1)  # the held one kept none of its own
        moved += dest != 0
    assert moved and leaving > 0
