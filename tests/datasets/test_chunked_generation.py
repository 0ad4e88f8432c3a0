"""The range generator writes its stream a chunk at a time (datasets/workloads/range.py: RangePlan,
issue 51): the chunks make the same stream whatever their size, the same stream as before the
generator was cut into a plan and chunks, and every chunk is at most the rows asked for (the
bound on what generation holds per event). The workload cache writes a planned stream chunk by
chunk, and its mapped chunks read back the stream the whole path writes."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from datasets.tiny import random_objects
from datasets.workloads.anomalies import COUNTS, normalise_workload
from datasets.workloads.range import build_workload, plan_workload
from harness.core.events import INSERT, Events
from harness.families.workload import WorkloadConfig

CONFIGS = [dict(profile="q1", queries=300, updates=600),
           dict(profile="q2", queries=500, updates=2000, objects_per_update=3.0),  # objects cycled: 7,024 > 2,000
           dict(profile="q3", queries=300, updates=600, drift="q3_switch", drift_every=50),
           dict(profile="q1", queries=300, updates=600, drift="hotspot_objects"),
           dict(profile="q1", queries=300, updates=600, drift="scale")]
# sha256 (first 16 hex digits) of each config's stream written by the generator before it was cut
# into a plan and chunks (commit 434fcff, datasets/workloads/range.py build_workload), the same
# objects and seed: a cached stream of an existing size keeps its bytes
BEFORE = ["1c9ccb068d53c84c", "1aa313587993cf73", "c67ea1d794167548", "634486aaed2a2864", "bba70d2e81b5f184"]


@pytest.fixture(scope="module")
def data():
    return random_objects(2000, seed=11)


def stream_digest(ev: Events) -> str:
    h = hashlib.sha256()
    for name in sorted(ev.cols):
        h.update(name.encode())
        h.update(np.ascontiguousarray(ev.cols[name]).tobytes())
    h.update(ev.offsets.tobytes())
    h.update(ev.values.tobytes())
    return h.hexdigest()[:16]


def assert_same_stream(a: Events, b: Events) -> None:
    assert len(a) == len(b)
    for name in a.cols:
        np.testing.assert_array_equal(a.cols[name], b.cols[name], err_msg=name)  # NaN equals NaN here
        assert a.cols[name].dtype == b.cols[name].dtype, name
    np.testing.assert_array_equal(a.offsets, b.offsets)
    np.testing.assert_array_equal(a.values, b.values)


@pytest.mark.parametrize("i", range(len(CONFIGS)))
def test_the_stream_is_the_one_written_before_the_plan(data, i):
    objects, df, extent = data
    wl = build_workload(objects, df, extent, WorkloadConfig(name="t", **CONFIGS[i]), 5)
    assert stream_digest(wl.events) == BEFORE[i]


@pytest.mark.parametrize("i", range(len(CONFIGS)))
@pytest.mark.parametrize("rows", [1, 7, 1000, 4096])
def test_chunks_of_any_size_make_the_whole_stream(data, i, rows):
    objects, df, extent = data
    cfg = WorkloadConfig(name="t", **CONFIGS[i])
    whole = build_workload(objects, df, extent, cfg, 5)
    plan = plan_workload(objects, df, extent, cfg, 5)
    parts = list(plan.chunks(rows))
    assert all(len(p) <= rows for p in parts)  # what a chunk holds per event is bounded by `rows`
    assert len(parts) == -(-len(whole.events) // rows)
    assert_same_stream(Events.concat(parts), whole.events)
    assert (plan.warmup, plan.drift, plan.info) == (whole.warmup, whole.drift, whole.info)


@pytest.mark.parametrize("i", range(len(CONFIGS)))
def test_the_plan_finds_what_normalising_finds_nothing(data, i):
    objects, df, extent = data
    cfg = WorkloadConfig(name="t", **CONFIGS[i])
    plan = plan_workload(objects, df, extent, cfg, 5)
    found = plan.check_normal()
    assert list(found) == list(COUNTS) and not any(found.values())
    whole = build_workload(objects, df, extent, cfg, 5)
    normal = normalise_workload(whole)
    assert normal.events is whole.events  # nothing to fix: the same object back
    assert normal.info == {**plan.info, **found}


def test_the_plan_check_catches_a_query_inserted_twice(data):
    objects, df, extent = data
    plan = plan_workload(objects, df, extent, WorkloadConfig(name="t", queries=300, updates=600), 5)
    ins = np.flatnonzero(plan.kind == INSERT)
    plan.qref = plan.qref.copy()
    plan.qref[ins[1]] = plan.qref[ins[0]]
    with pytest.raises(RuntimeError, match="duplicate_inserts"):
        plan.check_normal()


def test_chunk_rows_must_be_positive(data):
    objects, df, extent = data
    plan = plan_workload(objects, df, extent, WorkloadConfig(name="t", queries=30, updates=60), 5)
    with pytest.raises(ValueError, match="rows=0 is invalid"):
        next(plan.chunks(0))


class _Dataset:
    def __init__(self, objects, df, extent):
        import pyarrow as pa

        self.objects, self.extent, self.cache_path = objects, extent, "tiny"
        self.vocab = pa.table({"df": df})

    def drop_objects(self):
        pass


def test_the_cache_writes_a_planned_stream_by_chunks_and_maps_it_back(data, tmp_path, monkeypatch):
    """A planned stream cached in chunks of 1,000 rows is several mapped batches whose join is the
    stream; its Parquet copy is the same rows; its meta is what the whole path writes."""
    from omegaconf import OmegaConf

    from harness.run import workload_cache
    from harness.run.workload_cache import load_or_build_workload, mapped_events

    objects, df, extent = data
    wcfg = OmegaConf.structured(WorkloadConfig(name="t", **CONFIGS[1]))
    cfg = OmegaConf.create({"workload": wcfg, "seed": 5})
    whole = normalise_workload(build_workload(objects, df, extent, WorkloadConfig(name="t", **CONFIGS[1]), 5))
    monkeypatch.setattr(workload_cache, "CHUNK_ROWS", 1000)
    chunks, warmup, folder, meta = load_or_build_workload(_Dataset(objects, df, extent), cfg, tmp_path, chunks=True)
    assert len(chunks) == -(-len(whole.events) // 1000) and all(len(c) <= 1000 for c in chunks)
    assert chunks.rows == len(whole.events)  # from the batches' headers
    assert_same_stream(Events.concat(chunks), whole.events)
    assert_same_stream(mapped_events(folder), whole.events)
    import pyarrow.parquet as pq

    assert_same_stream(Events.from_arrow(pq.read_table(folder / "events.parquet")), whole.events)
    assert warmup == whole.warmup and meta["events"] == len(whole.events)
    assert meta["info"] == json.loads(json.dumps(whole.info))
    # a cache hit reads the same chunks
    again, _, _, _ = load_or_build_workload(_Dataset(objects, df, extent), cfg, tmp_path, chunks=True)
    assert len(again) == len(chunks)
    # the count mode reads them a batch at a time: the counts of the stream given whole
    from harness.counts.tally import count_run, count_stream
    from harness.engine.simulate import default_context
    from strategies import registry

    read = dict(object_sample=0.5, sample_seed=3, workload_family="range", epoch_size=2000)
    kw = dict(index_params={"range": {"cells_per_side": 16}}, workload_family="range")
    context = default_context(whole.events)
    by_chunks = count_run(registry.get("grid"), count_stream(again, warmup, **read), 4, context, **kw)
    by_whole = count_run(registry.get("grid"), count_stream(whole.events, whole.warmup, **read), 4, context, **kw)
    assert by_chunks.digest == by_whole.digest
    assert by_chunks.workers.equals(by_whole.workers) and by_chunks.epochs.equals(by_whole.epochs)
