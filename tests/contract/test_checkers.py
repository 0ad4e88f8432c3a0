"""The public checkers (harness/engine/contract.py) fail a class that breaks the contract, naming
what broke: a family without an oracle, with a figure it does not declare, or whose oracle the
runs disagree with; a strategy whose router routes other families than it declares, or that
accepts any parameter."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.events import INSERT
from harness.engine.contract import ContractError, check_family, check_family_parts, check_strategy, tiny_workload
from harness.families import registry as families
from harness.families.base import Family
from harness.families.range.family import RangeFamily
from strategies import registry

CODE = 111


def _toy(monkeypatch, **attrs):
    """A range look-alike under another name and code, registered for the test only."""
    base = {"code": CODE, "index": RangeFamily.index, "merger": RangeFamily.merger, "routes_like": "range",
            "oracle": staticmethod(lambda stream: RangeFamily.oracle(_as_range(stream))),
            "build_workload": classmethod(lambda cls, *a: _relabel(RangeFamily.build_workload(*a))),
            "__module__": __name__}
    cls = type("ToyFamily", (Family,), {**base, **attrs})
    cls.name = "toy_checked"  # after the class is made: only the monkeypatched registry knows it
    cls.index = type("ToyIndex", (RangeFamily.index,), {"family": "toy_checked"})
    monkeypatch.setitem(families._FAMILIES, cls.name, cls)
    return cls


def _relabel(wl):
    ev = wl.events
    ev.cols["family"][ev.family >= 0] = CODE
    return wl


def _as_range(stream):
    ev = stream.take(np.arange(len(stream)))
    ev.cols["family"][ev.family == CODE] = RangeFamily.code
    return ev


def test_a_family_without_an_oracle_is_named(monkeypatch):
    toy = _toy(monkeypatch, oracle=Family.oracle)
    with pytest.raises(ContractError, match="family 'toy_checked': no `oracle`"):
        check_family_parts(toy)


def test_a_figure_the_family_does_not_declare_is_named(monkeypatch):
    toy = _toy(monkeypatch, summarise=classmethod(lambda cls, workers, final: {"toy_rate": 1.0}))
    with pytest.raises(ContractError, match=r"summarise returns \['toy_rate'\]"):
        check_family_parts(toy)


def test_a_family_whose_runs_disagree_with_its_oracle_fails(monkeypatch):
    def short(stream):  # forgets the first subscription's answers
        keys = RangeFamily.oracle(_as_range(stream))
        first = int(stream.id[np.flatnonzero(stream.kind == INSERT)[0]])
        return keys[(keys >> 32) != first]

    honest = _toy(monkeypatch)
    wl = tiny_workload(honest)
    assert check_family(honest, wl, ["grid"], workers=(3,))[-1].endswith("epochs")
    toy = _toy(monkeypatch, oracle=staticmethod(short))
    with pytest.raises(ContractError, match="family 'toy_checked' under strategy 'grid' at 3 workers: digest"):
        check_family(toy, wl, ["grid"], workers=(3,))


def test_a_strategy_whose_router_routes_other_families_is_named():
    grid = registry.get("grid")
    broken = type("BrokenGrid", (grid,), {"name": "broken_grid", "families": frozenset({"range"})})
    with pytest.raises(ContractError, match="its router routes \\['frequent_terms', 'range'\\].*declares \\['range'\\]"):
        check_strategy(broken, families=[])


def test_a_strategy_that_accepts_any_parameter_is_named():
    grid = registry.get("grid")
    lax = type("LaxGrid", (grid,), {"name": "lax_grid", "make_params": classmethod(lambda cls, p: grid.make_params({}))})
    with pytest.raises(ContractError, match="strategy 'lax_grid': accepted an unknown parameter"):
        check_strategy(lax, families=[])
