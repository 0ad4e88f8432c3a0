"""A family's workloads, built and checked in one place from the attributes it declares.

Every family's workload comes from one of three sources, chosen by the workload config:

- a user's event file (`workload.source=file`): the generic reader (datasets/workloads/events_file.py)
  with the family's code, after the family's own `check_file`;
- SSTD's snapshot generator (datasets/workloads/snapshot.py), when `workload.protocol` is one of
  the family's `snapshot_protocols`, or always for a family without a generator of its own (terms);
- the family's own `generator`, checked by its `check_generator`.

So a family states its needs as data on its class (harness/families/base.py) and none of them
repeats this dispatch.
"""

from __future__ import annotations

from datasets.workloads.events_file import build_file_workload, validate_file_workload
from datasets.workloads.snapshot import build_snapshot_workload, validate_snapshot_workload


def _source(cfg) -> str:
    return getattr(cfg, "source", "generator")


def uses_snapshot_generator(family, cfg) -> bool:
    """Whether SSTD's snapshot generator builds this generated workload of `family`."""
    return family.generator is None or (_source(cfg) == "generator" and cfg.protocol in family.snapshot_protocols)


def build_workload(family, objects, term_df, extent, cfg, seed: int):
    """The workload of `family` for `cfg` (module docstring), over a prepared dataset."""
    if _source(cfg) == "file":
        return build_file_workload(objects, term_df, cfg, family.code, extent=extent)
    if uses_snapshot_generator(family, cfg):
        return build_snapshot_workload(objects, term_df, extent, cfg, seed)
    return family.generator(objects, term_df, extent, cfg, seed)


def validate_workload(family, cfg) -> None:
    """Refuse settings the workload's source cannot use (ValueError naming the field): the family's
    file checks and the event file's, or the generator's (the snapshot generator's with the
    family's protocols, or the family's own)."""
    if _source(cfg) == "file" and family.check_file is not None:
        family.check_file(cfg)
    validate_file_workload(cfg, family.code)
    if _source(cfg) != "generator":
        return
    if uses_snapshot_generator(family, cfg):
        validate_snapshot_workload(cfg, family.snapshot_protocols)
    elif family.check_generator is not None:
        family.check_generator(cfg)
