"""Every method the protocol defines, gathered from the modules of this package."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from types import ModuleType

import protocol
from protocol.base import MethodSchema

_SKIP = {"base", "catalog", "codes", "jsonrpc"}


def _modules() -> list[ModuleType]:
    names = sorted(m.name for m in pkgutil.iter_modules(protocol.__path__) if m.name not in _SKIP)
    return [importlib.import_module(f"protocol.{name}") for name in names]


@cache
def all_methods() -> dict[str, MethodSchema]:
    methods: dict[str, MethodSchema] = {}
    for module in _modules():
        table = getattr(module, "METHODS", None)
        if not isinstance(table, dict):
            continue
        for name, schema in table.items():
            if name in methods:
                raise RuntimeError(f"method {name!r} is defined twice (in {module.__name__})")
            methods[name] = schema
    return methods
