"""The workload cache key (harness/run/workload_cache.py): the workload config without the knobs that
cannot change the stream, found from what the families declare (no family is named): each family's
workloads keep their own knobs and drop the others', so a new family or knob leaves the workloads
cached before it under their key. And the flat `workload.*` schema those knobs form."""

from __future__ import annotations

import hashlib
import inspect
import json
from dataclasses import dataclass, fields

import pytest
from omegaconf import OmegaConf

from datasets.workloads.config import DRIFT_FIELDS, FILE_FIELDS, OFF_WHEN_NULL, SNAPSHOT_FIELDS, SharedWorkloadConfig
from harness.families import registry as families
from harness.families.base import Family
from harness.families.range.family import RangeFamily
from harness.families.workload import WorkloadConfig, compose_schema, foreign_fields
from harness.run import workload_cache
from harness.run.workload_cache import workload_key

QUERY_SHAPE = {"protocol", "k_min", "k_max", "op", "tau_hours", "hour_s"}
KNN_OWN = {"init_objects", "timestamps", "objects_per_ts", "inserts_per_ts", "deletes_per_ts"}
TOPK_OWN = {"window", "measured_messages", "alpha_low", "alpha_high"}
TIME_WINDOW = {"window_by", "window_s"}
# what every workload's key holds: the STS generator's knobs (the schema's first ones), name and family
BASE = ({f.name for f in fields(SharedWorkloadConfig)} - set(DRIFT_FIELDS) - set(FILE_FIELDS) - set(SNAPSHOT_FIELDS)
        - QUERY_SHAPE - set(OFF_WHEN_NULL))


def keyed(**kw) -> set[str]:
    return set(workload_key(WorkloadConfig(**kw)))


def test_each_family_keeps_its_own_knobs_and_drops_the_others():
    assert keyed(family="range") == BASE
    assert keyed(family="knn") == BASE | QUERY_SHAPE | KNN_OWN
    # top-k's key has held the kNN knobs since top-k came: kept, so its cached workloads keep their key
    assert keyed(family="topk") == BASE | QUERY_SHAPE | KNN_OWN | TOPK_OWN
    assert keyed(family="topk", window_by="time") == BASE | QUERY_SHAPE | KNN_OWN | TOPK_OWN | TIME_WINDOW


@pytest.mark.parametrize("family,protocol", [("range", "srq"), ("knn", "skq"), ("frequent_terms", "stq"),
                                             ("frequent_terms", "ctq"), ("range", "mix")])
def test_a_snapshot_workload_keeps_the_snapshot_generators_knobs(family, protocol):
    """SSTD's generator makes range, kNN and frequent_terms queries: the knobs of those families stay."""
    assert keyed(family=family, protocol=protocol) == BASE | QUERY_SHAPE | KNN_OWN | set(SNAPSHOT_FIELDS)


def test_drift_and_event_file_knobs_only_when_used(tmp_path):
    assert keyed(family="range", drift="q3_switch") == BASE | set(DRIFT_FIELDS)
    path = tmp_path / "e.csv"
    path.write_text("seq,ts,kind,id,x,y,terms\n0,0,object,1,1.0,1.0,1\n")
    key = workload_key(WorkloadConfig(family="range", source="file", path=str(path)))
    assert set(key) == BASE | set(FILE_FIELDS) | {"file"} and key["file"]["size"] == path.stat().st_size


def test_a_knob_that_is_off_stays_out_of_the_key_and_enters_it_when_set():
    assert "keyword_rarity" not in keyed(family="range")
    assert workload_key(WorkloadConfig(family="range", keyword_rarity=0.5))["keyword_rarity"] == 0.5


def test_the_keys_of_the_shipped_workloads_are_the_ones_cached_before_the_knobs_moved():
    """The hashes recorded before the families' knobs left the shared schema (and the key its
    family names): the same configuration, the same cache folder."""
    before = {"range": "a67169498a5751b0", "knn": "1ca6e6a99dc398c4", "topk": "3e1e638d03dce5c9",
              "srq": "413d28dad9ef4b7b"}  # conf/workload/tiny.yaml, then with family / protocol overridden
    tiny = dict(name="tiny", family="range", profile="q3", queries=300, updates=600, objects_per_update=5.0)
    got = {"range": tiny, "knn": {**tiny, "family": "knn"}, "topk": {**tiny, "family": "topk"},
           "srq": {**tiny, "protocol": "srq"}}
    for what, cfg in got.items():
        key = json.dumps(workload_key(OmegaConf.structured(WorkloadConfig(**cfg))), sort_keys=True)
        assert hashlib.sha256(key.encode()).hexdigest()[:16] == before[what], what


def test_the_cache_key_names_no_family():
    source = inspect.getsource(workload_cache)
    for name in families.names():
        assert f'"{name}"' not in source, name


def test_a_new_familys_knobs_leave_the_other_families_keys_alone(monkeypatch):
    @dataclass
    class Knobs:
        toy_rate: float = 2.0

    toy = type("ToyFamily", (Family,), {"code": 77, "index": RangeFamily.index, "merger": RangeFamily.merger,
                                        "WorkloadKnobs": Knobs, "__module__": __name__})
    toy.name = "toy_knobs"  # set after the class is made: registered by the test alone, then forgotten
    monkeypatch.setitem(families._FAMILIES, "toy_knobs", toy)
    assert "toy_rate" in foreign_fields("range", False) and "toy_rate" not in foreign_fields("toy_knobs", False)
    plain = {**OmegaConf.to_container(OmegaConf.structured(WorkloadConfig(name="tiny"))), "toy_rate": 3.0}
    assert "toy_rate" not in workload_key(OmegaConf.create(plain))
    assert workload_key(OmegaConf.create({**plain, "family": "toy_knobs"}))["toy_rate"] == 3.0


def test_the_schema_is_flat_and_refuses_clashing_knobs():
    names = [f.name for f in fields(WorkloadConfig)]
    assert len(names) == len(set(names)) == len(fields(SharedWorkloadConfig)) + len(KNN_OWN | TOPK_OWN | TIME_WINDOW)
    assert names[:len(fields(SharedWorkloadConfig))] == [f.name for f in fields(SharedWorkloadConfig)]
    assert WorkloadConfig(init_objects=5, window=7).window == 7

    @dataclass
    class Clash:
        queries: int = 1

    @dataclass
    class Rate:
        rate: float = 1.0

    @dataclass
    class OtherRate:
        rate: float = 2.0

    with pytest.raises(RuntimeError, match="workload knob 'queries' is a shared one"):
        compose_schema([("a", Clash)])
    with pytest.raises(RuntimeError, match="'a' and 'b' both declare workload knob 'rate'"):
        compose_schema([("a", Rate), ("b", OtherRate)])
    assert compose_schema([("a", Rate), ("b", Rate)])().rate == 1.0
