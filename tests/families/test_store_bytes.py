"""ObjectStore.stored_bytes: what a worker's store of objects for snapshot queries holds, in bytes."""

from __future__ import annotations

import numpy as np

from harness.families.object_store import ObjectStore
from tests.streams import item_events


def test_the_stored_bytes_grow_with_the_objects_and_fall_after_eviction():
    """ObjectStore.stored_bytes: the objects' columns and terms, their cells and the indexes built."""
    items = [("o", i % 10, i % 7, [1, 2 + i % 5]) for i in range(60)]
    ev = item_events(items)
    ev.cols["ts"] = np.arange(60, dtype=np.float64)
    store = ObjectStore((0.0, 0.0, 10.0, 10.0), 4, 15.0, 8)
    assert store.stored_bytes() == sum(a.nbytes for a in (*store.objects.cols.values(), store.objects.offsets))
    store.add(ev.take(np.arange(10)))
    ten = store.stored_bytes()
    store.add(ev.take(np.arange(10, 20)))  # ts 10: nothing is 15 old yet
    twenty = store.stored_bytes()
    assert len(store.objects) == 20 and twenty > ten > 0
    built = [*store.index(), *store.by_term(), store.cells()]
    assert store.stored_bytes() == twenty + sum(a.nbytes for a in built)  # the indexes, once each
    store.restore(store.objects)  # a new epoch
    store.add(ev.take(np.arange(30, 35)))  # ts 30: the objects of ts <= 15 go, the indexes are dropped
    assert len(store.objects) == 9 and store.stored_bytes() < ten
    assert store.stored_bytes() == sum(a.nbytes for a in (*store.objects.cols.values(), store.objects.offsets,
                                                          store.objects.values))
