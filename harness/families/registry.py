"""The family registry: which query families exist, by name and by code.

Every subpackage of harness/families/ that defines a `Family` subclass is a built-in family; a
user's module registers its families by being imported (`load_plugins`, or the config's
`families` list). The engine asks only this registry: nothing outside a family's folder names its
index, merger or oracle.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING

import numpy as np

from harness.core.events import FORMER_FAMILY_NAMES

if TYPE_CHECKING:
    from harness.families.base import Family

_FAMILIES: dict[str, "type[Family]"] = {}
_discovered = False


def register(cls: "type[Family]") -> None:
    """Called for every Family subclass with a name as it is defined."""
    other = _FAMILIES.get(cls.name)
    if other is not None and other.__qualname__ != cls.__qualname__:
        raise RuntimeError(f"two query families named {cls.name!r}: {other} and {cls}")
    clash = [f for f in _FAMILIES.values() if f.code == cls.code and f.name != cls.name]
    if clash:
        raise RuntimeError(f"query family {cls.name!r} takes code {cls.code}, already the code of {clash[0].name!r}")
    if not -1 < cls.code < 128:
        raise RuntimeError(f"query family {cls.name!r}: code {cls.code} is invalid; allowed: 0..127 (int8, -1 = object)")
    _FAMILIES[cls.name] = cls


def _discover() -> dict[str, "type[Family]"]:
    global _discovered
    if not _discovered:
        import harness.families

        for info in pkgutil.walk_packages(harness.families.__path__, prefix="harness.families."):
            if not info.ispkg:
                importlib.import_module(info.name)
        _discovered = True
    return _FAMILIES


def load_plugins(modules) -> list[str]:
    """Import user modules that define families; returns the names of the families now known."""
    for module in modules or ():
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ValueError(f"families: cannot import plugin module {module!r} ({exc})") from None
    return names()


def names() -> list[str]:
    return sorted(_discover())


def get(name: str) -> "type[Family]":
    table = _discover()
    if name not in table:
        renamed = FORMER_FAMILY_NAMES.get(name)
        hint = f" ({name!r} was renamed {renamed!r})" if renamed in table else ""
        raise ValueError(f"unknown query family {name!r}{hint}; families: {', '.join(sorted(table))}")
    return table[name]


def by_code(code: int) -> "type[Family]":
    for fam in _discover().values():
        if fam.code == code:
            return fam
    raise ValueError(f"no query family has code {code}; families: "
                     + ", ".join(f"{f.name}={f.code}" for f in _discover().values()))


def name_of(code: int) -> str:
    try:
        return by_code(int(code)).name
    except ValueError:
        return str(code)


def routable(family: str, routed: frozenset[str] | set[str]) -> bool:
    """Whether a strategy routing the families `routed` routes `family` exactly: natively, through
    the family it routes like, or to every worker (`Family.routes_everywhere`)."""
    fam = get(family)
    return fam.name in routed or fam.routes_everywhere or (fam.routes_like is not None and fam.routes_like in routed)


def routing_codes(families: list[str], routed: frozenset[str] | set[str]) -> np.ndarray | None:
    """The family column a router sees, as a table indexed by code + 128 (objects' -1 included):
    a family the router does not route natively shows as the family it routes like. None when
    the router sees the stream as it is."""
    table = np.arange(-128, 128, dtype=np.int8)
    changed = False
    for name in families:
        fam = get(name)
        if fam.name not in routed and fam.routes_like is not None:
            table[fam.code + 128] = get(fam.routes_like).code
            changed = True
    return table if changed else None
