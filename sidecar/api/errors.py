"""The one table from exceptions to JSON-RPC errors.

Handlers raise what their layer raises; the dispatcher asks :func:`rpc_error_for` what the
client sees. Domain errors carry their code: an :class:`RpcError` as it is, a refusal of
the memory layer (:class:`MemoryInputError`) as -32009, the store's and the engines' errors
by their kind. Anything the table does not know is a fault in the daemon: ``None`` here, and
the dispatcher answers -32603 with the stack trace logged. A plain ``ValueError`` or
``RuntimeError`` is never the client's mistake.
"""

from __future__ import annotations

from collections.abc import Callable

from sidecar.engines.errors import CancelledError, EngineError, InvalidInputError
from sidecar.errors import (
    Cancelled,
    Conflict,
    FingerprintMismatch,
    InvalidInput,
    ModelUnavailable,
    NotFound,
    RpcError,
    ShuttingDown,
    StorageError,
    WrongNamespace,
)
from sidecar.memory.core.errors import MemoryInputError, MemoryNotFound, SessionNamespaceError
from sidecar.store import errors as se

__all__ = ["rpc_error_for", "store_rpc_error"]


def store_rpc_error(exc: se.StoreError) -> RpcError:
    """A store error as the client sees it (message and structured data kept)."""
    data = exc.data or None
    if isinstance(exc, se.InvalidInput):
        return InvalidInput(exc.message, data=data)
    if isinstance(exc, se.NotFound):
        return NotFound(exc.message, data=data)
    if isinstance(exc, se.VersionConflict):
        return Conflict(exc.message, data=data)
    if isinstance(exc, se.FingerprintMismatch):
        return FingerprintMismatch(exc.message, data=data)
    if isinstance(exc, se.StoreClosed):
        return ShuttingDown(exc.message, data=data)
    return StorageError(exc.message, data=data)


def _engine_error(exc: Exception, method: str) -> RpcError:
    message = f"{method}: {exc}"
    if isinstance(exc, InvalidInputError):
        return InvalidInput(message)
    if isinstance(exc, CancelledError):
        return Cancelled(message)
    return ModelUnavailable(message)


def _as_is(exc: Exception, method: str) -> RpcError:
    assert isinstance(exc, RpcError)
    return exc


def _from_store(exc: Exception, method: str) -> RpcError:
    assert isinstance(exc, se.StoreError)
    return store_rpc_error(exc)


def _wrong_namespace(exc: Exception, method: str) -> RpcError:
    return WrongNamespace(str(exc))


def _not_found(exc: Exception, method: str) -> RpcError:
    return NotFound(str(exc))


def _refused(exc: Exception, method: str) -> RpcError:
    return InvalidInput(str(exc))


# Checked in order; the first matching type wins (a SessionNamespaceError is also a
# refusal, so it comes before MemoryInputError; so is a MemoryNotFound).
_TABLE: tuple[tuple[type[Exception], Callable[[Exception, str], RpcError]], ...] = (
    (RpcError, _as_is),
    (SessionNamespaceError, _wrong_namespace),
    (MemoryNotFound, _not_found),
    (MemoryInputError, _refused),
    (se.StoreError, _from_store),
    (EngineError, _engine_error),
)


def rpc_error_for(exc: Exception, method: str) -> RpcError | None:
    """What the client sees for ``exc`` raised by ``method``; None for a daemon fault."""
    for kind, convert in _TABLE:
        if isinstance(exc, kind):
            return convert(exc, method)
    return None
