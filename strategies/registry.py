"""Every module under `strategies/` (any depth) that defines a Strategy subclass with a `name` is
registered; modules that define none (router shapes, kernels, cost models) are simply not.

Adding a strategy is one module in its paper's folder plus `conf/strategy/<name>.yaml`; tests,
sweeps and plots ask this registry, so nothing else needs editing.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from functools import lru_cache

import strategies
from strategies.base import Strategy

@lru_cache(maxsize=None)
def discover(base: type) -> dict[str, type]:
    """Every subclass of `base` with a `name`, defined in a module under strategies/ (strategies and
    adjusters are found alike), by name."""
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(strategies.__path__, prefix="strategies."):
        if info.ispkg or info.name.rsplit(".", 1)[1].startswith("_"):
            continue
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, base) and obj is not base and getattr(obj, "name", None):
                if obj.__module__ != module.__name__:
                    continue
                if obj.name in found and found[obj.name] is not obj:
                    raise RuntimeError(f"two {base.__name__} classes named {obj.name!r}: {found[obj.name]} and {obj}")
                found[obj.name] = obj
    return dict(sorted(found.items()))


def _discover() -> dict[str, type[Strategy]]:
    return discover(Strategy)


def names() -> list[str]:
    return list(_discover())


def get(name: str) -> type[Strategy]:
    table = _discover()
    if name not in table:
        raise ValueError(f"unknown strategy {name!r}; valid strategies: {', '.join(table)} (or 'all')")
    return table[name]


def supporting(family: str) -> list[str]:
    """Names of the strategies that route the given query family (natively, or as the family it
    routes like)."""
    from strategies.base import routes

    return [n for n, cls in _discover().items() if routes(cls, family)]
