"""Parameter dataclasses built from config dicts, shared by strategies, adjusters and query families.

A plugin declares a `Params` dataclass; `make_params` builds it from the config's dict and rejects
an unknown key with the valid ones listed, so a misspelling fails before Spark starts. A plugin
refuses a job it cannot run in its `check_run` hook, with a ValueError or a `RunRefused`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar


class ParamsMixin:
    """A `Params` dataclass built from a dict, rejecting unknown keys with the valid ones listed."""

    kind: ClassVar[str] = "strategy"
    name: ClassVar[str]

    @dataclass
    class Params:
        pass

    @classmethod
    def make_params(cls, params: dict[str, Any] | None) -> Any:
        params = dict(params or {})
        valid = {f.name for f in fields(cls.Params)}
        unknown = sorted(set(params) - valid)
        if unknown:
            raise ValueError(
                f"{cls.kind} {cls.name!r}: unknown parameter(s) {unknown}; valid parameters: {sorted(valid) or 'none'}"
            )
        return cls.Params(**params)


class RunRefused(ValueError):
    """A job a family, strategy or adjuster refuses in its `check_run` hook, before Spark starts.
    Its text is the error of a job that names the strategy (the field, the value, what is allowed);
    `skip` is the one line a `strategy=all` job prints when it leaves the strategy out and runs the
    others (default: the same text)."""

    def __init__(self, message: str, skip: str | None = None):
        super().__init__(message)
        self.skip = skip or message
