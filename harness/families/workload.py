"""A family's workloads, built and checked in one place from the attributes it declares.

Every family's workload comes from one of three sources, chosen by the workload config:

- a user's event file (`workload.source=file`): the generic reader (datasets/workloads/events_file.py)
  with the family's code and every registered family's query types (`file_formats`), after the
  family's own `check_file`;
- SSTD's snapshot generator (datasets/workloads/snapshot.py), when `workload.protocol` is one of
  the family's `snapshot_protocols`, or always for a family without a generator of its own (frequent_terms);
- the family's own `generator`, checked by its `check_generator`.

So a family states its needs as data on its class (harness/families/base.py) and none of them
repeats this dispatch.

Its knobs: the flat `workload.*` schema (`WorkloadConfig`, the dataclass Hydra types the config's
`workload` group with) is the knobs every family shares (datasets/workloads/config.py) plus each
registered family's own (`Family.WorkloadKnobs`), composed when first asked for; `foreign_fields`
says which knobs a workload's cache key leaves out because another family declares them.
"""

from __future__ import annotations

from dataclasses import fields, make_dataclass

from datasets.workloads.config import SharedWorkloadConfig
from datasets.workloads.events_file import build_file_workload, validate_file_workload
from datasets.workloads.file_types import FileFormat
from datasets.workloads.snapshot import TYPE_FAMILY, build_snapshot_workload, validate_snapshot_workload
from harness.families import registry


def _source(cfg) -> str:
    return getattr(cfg, "source", "generator")


def uses_snapshot_generator(family, cfg) -> bool:
    """Whether SSTD's snapshot generator builds this generated workload of `family`."""
    return family.generator is None or (_source(cfg) == "generator" and cfg.protocol in family.snapshot_protocols)


def file_formats() -> dict[int, FileFormat]:
    """What the event-file reader knows of each registered family, by code: its name, its query
    types (`Family.file_types`) and its derivations (`derive_file`, `finish_file`)."""
    out = {}
    for name in registry.names():
        fam = registry.get(name)
        out[fam.code] = FileFormat(fam.name, fam.code, dict(fam.file_types), fam.derive_file, fam.finish_file)
    return out


def build_workload(family, objects, term_df, extent, cfg, seed: int):
    """The workload of `family` for `cfg` (module docstring), over a prepared dataset."""
    if _source(cfg) == "file":
        return build_file_workload(objects, term_df, cfg, family.code, extent=extent, formats=file_formats())
    if uses_snapshot_generator(family, cfg):
        return build_snapshot_workload(objects, term_df, extent, cfg, seed)
    return family.generator(objects, term_df, extent, cfg, seed)


def plan_workload(family, objects, term_df, extent, cfg, seed: int):
    """The plan of `family`'s own generator for `cfg` (`Family.planner`: its draws, the stream
    written from them a chunk at a time), or None where the workload is an event file's, the
    snapshot generator's or a generator without a plan (then built whole, `build_workload`)."""
    if _source(cfg) == "file" or uses_snapshot_generator(family, cfg) or family.planner is None:
        return None
    return family.planner(objects, term_df, extent, cfg, seed)


def validate_workload(family, cfg) -> None:
    """Refuse settings the workload's source cannot use (ValueError naming the field): the family's
    file checks and the event file's, or the generator's (the snapshot generator's with the
    family's protocols, or the family's own)."""
    if _source(cfg) == "file" and family.check_file is not None:
        family.check_file(cfg)
    validate_file_workload(cfg, family.code, file_formats())
    if _source(cfg) == "file":
        check_file_stream(family, cfg)
    if _source(cfg) != "generator":
        return
    if uses_snapshot_generator(family, cfg):
        validate_snapshot_workload(cfg, family.snapshot_protocols)
    elif family.check_generator is not None:
        family.check_generator(cfg)


def check_file_stream(family, cfg) -> None:
    """Every check the run makes of an event file's stream before its first epoch, made before
    Spark starts (issue 52): the stream built as the run builds it (datasets/workloads/events_file.py:
    its space, the file's objects' bounding box, then derived and normalised), then the context of
    each family it holds (`Family.stream_context`: a snapshot region meeting the space, an SKQ
    covering the objects, look-backs, k, a CTQ's window and step), the checks the run assembly
    repeats (harness/engine/setup.py: family_setup). The space does not depend on the projection's
    origin for these checks: each axis projects by an increasing affine map, which keeps which
    rectangles meet or cover which."""
    import numpy as np

    from datasets.workloads.events_file import build_file_workload, file_space, read_events
    from harness.families.base import IndexContext

    formats = file_formats()
    extent = file_space(read_events(cfg.path, family.code, formats=formats))
    events = build_file_workload(None, None, cfg, family.code, extent=extent, formats=formats).events
    context = IndexContext(extent, int(events.values.max()) + 1 if len(events.values) else 1)
    for code in np.unique(events.family[events.family >= 0]):
        registry.by_code(int(code)).stream_context(context, events)


# -- the knobs ------------------------------------------------------------------------------------


def keyed_fields(family) -> tuple[str, ...]:
    """The knobs `family` declares: its WorkloadKnobs' fields and the shared knobs only it (among the
    families) reads (`Family.workload_fields`)."""
    own = tuple(f.name for f in fields(family.WorkloadKnobs)) if family.WorkloadKnobs is not None else ()
    return own + tuple(family.workload_fields)


def foreign_fields(family_name: str, snapshots: bool) -> frozenset[str]:
    """The knobs a workload of `family_name` is not keyed by: those some registered family declares
    and its own does not. With snapshot queries (`snapshots`: the protocol is SSTD's), the knobs
    of every family SSTD's snapshot generator makes queries of stay: it reads them."""
    known = {name: registry.get(name) for name in registry.names()}
    declared = set().union(*(keyed_fields(f) for f in known.values()))
    mine = set(keyed_fields(known[family_name])) if family_name in known else set()
    if snapshots:
        for code in set(TYPE_FAMILY.values()):
            mine |= set(keyed_fields(registry.by_code(code)))
    return frozenset(declared - mine)


_SCHEMA: type | None = None


def workload_schema() -> type:
    """`WorkloadConfig` (`compose_schema` over the registered families), composed once: from the
    families registered when first asked for, the built-in ones and a plugin imported before."""
    global _SCHEMA
    if _SCHEMA is None:
        _SCHEMA = compose_schema([(name, registry.get(name).WorkloadKnobs) for name in registry.names()])
    return _SCHEMA


def compose_schema(knobs: list[tuple[str, type | None]]) -> type:
    """The shared knobs, then each family's own (`knobs`: (family name, its WorkloadKnobs or None)),
    as one flat dataclass. A family knob named like a shared one, or like another family's with a
    different default, is an error naming both."""
    shared = {f.name for f in fields(SharedWorkloadConfig)}
    seen: dict[str, tuple[str, object]] = {}
    bases = []
    for name, cls in knobs:
        if cls is None:
            continue
        for f in fields(cls):
            if f.name in shared:
                raise RuntimeError(f"query family {name!r}: workload knob {f.name!r} is a shared one "
                                   "(datasets/workloads/config.py); name it in workload_fields instead")
            other = seen.get(f.name)
            if other is not None and other[1] != f.default:
                raise RuntimeError(f"query families {other[0]!r} and {name!r} both declare workload knob "
                                   f"{f.name!r}, with defaults {other[1]!r} and {f.default!r}")
            seen[f.name] = (name, f.default)
        if cls not in bases:  # two families may share one knobs class
            bases.append(cls)
    # a dataclass collects its fields from its bases' last first: the shared knobs lead
    schema = make_dataclass("WorkloadConfig", [], bases=(*reversed(bases), SharedWorkloadConfig),
                            namespace={"__doc__": _SCHEMA_DOC})
    schema.__module__ = __name__  # pickled by reference: this module's `WorkloadConfig`
    return schema


_SCHEMA_DOC = """The workload config (`workload.*`): the shared knobs and every family's own, flat."""


def __getattr__(name: str):
    if name == "WorkloadConfig":
        return workload_schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
