"""Request handlers. Each module of this package exposes ``register(registry)``."""

from __future__ import annotations

import importlib
import pkgutil

from sidecar.api.registry import Registry

_SKIP = {"registry", "context"}


def build_registry() -> Registry:
    registry = Registry()
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name in _SKIP or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if callable(register):
            register(registry)
    return registry
