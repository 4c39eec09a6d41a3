"""One typed method, two faces: how ``Client`` and ``AsyncClient`` share their RPC methods.

A typed method is written once (:mod:`libravdb_client._methods`) as a builder: it takes
the method's keywords and returns a :class:`Call` (the wire method, its params, the result
type, the timeout and the progress callback). :class:`rpc` turns the builder into a
method of each client: on a :class:`SyncCaller` it sends the call and returns the result,
on an :class:`AsyncCaller` it returns a coroutine that does. The signature (and the
type a checker sees) is the builder's, minus ``self``, with the builder's ``Call[T]``
answered as ``T`` or as an awaitable of ``T``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

from libravdb_client._core import ProgressCallback, Timeout

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One request as a typed method builds it; the client sends it."""

    method: str
    params: Any
    result_type: type[T]
    timeout: Timeout
    on_progress: ProgressCallback | None = None


class SyncCaller:
    """A client whose ``call_typed`` blocks and returns the result (``Client``)."""


class AsyncCaller:
    """A client whose ``call_typed`` is a coroutine (``AsyncClient``)."""


class rpc(Generic[P, T]):  # lower case: used as a decorator, like property
    """Turns a builder ``(self, ...) -> Call[T]`` into a typed method of both clients."""

    def __init__(self, build: Callable[Concatenate[Any, P], Call[T]]) -> None:
        self._build = build
        self.__doc__ = build.__doc__
        self.__name__ = build.__name__
        signature = inspect.signature(build)
        self._signature = signature.replace(
            parameters=list(signature.parameters.values())[1:],
            return_annotation=inspect.Signature.empty,
        )

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Self: ...

    @overload
    def __get__(self, obj: SyncCaller, owner: type[Any]) -> Callable[P, T]: ...

    @overload
    def __get__(
        self, obj: AsyncCaller, owner: type[Any]
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...

    def __get__(self, obj: object, owner: type[Any]) -> Any:
        if obj is None:
            return self
        build = self._build
        client: Any = obj
        bound: Any
        if isinstance(obj, AsyncCaller):

            async def bound_async(*args: Any, **kwargs: Any) -> Any:
                return await _send(client, build(client, *args, **kwargs))

            bound = bound_async
        else:

            def bound_sync(*args: Any, **kwargs: Any) -> Any:
                return _send(client, build(client, *args, **kwargs))

            bound = bound_sync
        for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(bound, attr, getattr(build, attr))
        bound.__signature__ = self._signature  # the builder's, without self
        return bound


def _send(client: Any, call: Call[Any]) -> Any:
    """``client.call_typed`` for ``call``: the result, or (async) the coroutine for it."""
    return client.call_typed(
        call.method,
        call.params,
        call.result_type,
        timeout=call.timeout,
        on_progress=call.on_progress,
    )
