"""The method table: wire schema (from `protocol`) joined with the handler that serves it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from protocol.base import MethodSchema
from protocol.catalog import all_methods

if TYPE_CHECKING:
    from sidecar.api.context import CallContext

P = TypeVar("P")
Handler = Callable[["CallContext", Any], Awaitable[Any]]
H = TypeVar("H", bound=Handler)


@dataclass(frozen=True)
class Method:
    name: str
    schema: MethodSchema
    handler: Handler


class Registry:
    def __init__(self) -> None:
        self._methods: dict[str, Method] = {}

    def add(self, name: str, handler: Handler) -> None:
        schema = all_methods().get(name)
        if schema is None:
            raise KeyError(f"method {name!r} has no wire schema in protocol/")
        if name in self._methods:
            raise KeyError(f"method {name!r} is registered twice")
        self._methods[name] = Method(name, schema, handler)

    def method(self, name: str) -> Callable[[H], H]:
        def decorate(handler: H) -> H:
            self.add(name, handler)
            return handler

        return decorate

    def get(self, name: str) -> Method | None:
        return self._methods.get(name)

    def names(self) -> list[str]:
        return sorted(self._methods)


class MethodTable:
    """The handlers one ``api`` module serves, declared at module level.

    Handlers stay top-level functions (importable and testable alone); the module's
    ``register`` adds them to the daemon's :class:`Registry`.
    """

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}

    def method(self, name: str) -> Callable[[H], H]:
        def decorate(handler: H) -> H:
            if name in self._handlers:
                raise KeyError(f"method {name!r} is declared twice")
            self._handlers[name] = handler
            return handler

        return decorate

    def register(self, registry: Registry) -> None:
        for name, handler in self._handlers.items():
            registry.add(name, handler)
