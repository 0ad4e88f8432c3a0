"""The family registry refuses what would make codes or names ambiguous, and tells what it knows."""

from __future__ import annotations

import pytest

from harness.core.events import RANGE
from harness.families import registry as families
from harness.families.base import Family
from harness.families.range.family import RangeFamily


def _family(name: str, code: int):
    return type("Toy", (Family,), {"name": name, "code": code, "index": RangeFamily.index,
                                   "merger": RangeFamily.merger, "__module__": __name__})


def test_a_code_taken_by_another_family_is_refused():
    with pytest.raises(RuntimeError, match="takes code 0, already the code of 'range'"):
        _family("copy_of_range", RANGE)
    assert "copy_of_range" not in families.names()


def test_a_code_outside_int8_is_refused():
    with pytest.raises(RuntimeError, match="code 300 is invalid"):
        _family("too_big", 300)


def test_lookups_name_the_known_families():
    assert families.get("range") is RangeFamily and families.by_code(RANGE) is RangeFamily
    with pytest.raises(ValueError, match="unknown query family 'nope'; families: .*range"):
        families.get("nope")
    assert families.name_of(99) == "99"
    with pytest.raises(ValueError, match="cannot import plugin module"):
        families.load_plugins(["no_such_module_for_tests"])


def test_routing_codes_show_a_routes_like_family_as_its_base():
    assert families.routing_codes(["range"], {"range"}) is None
