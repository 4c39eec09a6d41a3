"""Exceptions raised by the client, and the one table that maps error codes to classes.

::

    LibravdbError
    ├── TransportError            the connection could not be made or was lost
    │   ├── ConnectError
    │   └── ConnectionClosed
    ├── RpcTimeout                (also a TimeoutError) no reply within the call's timeout
    ├── ProtocolError             the server sent something that is not valid JSON-RPC
    └── RpcError                  the server answered with an error object
        ├── ParseError, InvalidRequest, MethodNotFound, InvalidParams, InternalError
        └── FrameTooLarge, NotFound, Conflict, ModelUnavailable, StorageError,
            FingerprintMismatch, ShuttingDown, Cancelled, InvalidInput, Busy,
            Unauthorized, WrongNamespace

Codes without a class of their own (``SERVER_ERROR`` and any code a newer daemon
introduces) raise ``RpcError`` itself; ``exc.code`` always holds the code sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from protocol.codes import ErrorCode

__all__ = [
    "ERROR_CLASSES",
    "Busy",
    "Cancelled",
    "Conflict",
    "ConnectError",
    "ConnectionClosed",
    "FingerprintMismatch",
    "FrameTooLarge",
    "InternalError",
    "InvalidInput",
    "InvalidParams",
    "InvalidRequest",
    "LibravdbError",
    "MethodNotFound",
    "ModelUnavailable",
    "NotFound",
    "ParseError",
    "ProtocolError",
    "RpcError",
    "RpcTimeout",
    "ShuttingDown",
    "StorageError",
    "TransportError",
    "Unauthorized",
    "WrongNamespace",
    "error_class",
    "rpc_error",
]


class LibravdbError(Exception):
    """Base of every exception this package raises on purpose."""


class TransportError(LibravdbError):
    """The connection to the daemon could not be opened or was lost."""


class ConnectError(TransportError):
    """Opening the connection (or starting the child daemon) failed."""


class ConnectionClosed(TransportError):
    """The connection ended (or was closed) before the reply arrived."""


class RpcTimeout(LibravdbError, TimeoutError):
    """No reply within the call's timeout. The connection stays usable; a late reply is dropped."""

    def __init__(self, method: str, timeout: float) -> None:
        super().__init__(f"{method}: no reply within {timeout:g} s")
        self.method = method
        self.timeout = timeout

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.method, self.timeout))


class ProtocolError(LibravdbError):
    """The server sent a frame that is not valid JSON-RPC (or a result of the wrong shape)."""


class RpcError(LibravdbError):
    """The daemon answered with a JSON-RPC error object."""

    code: int  # set per instance; subclasses also carry it as a class attribute (see CODE)
    CODE: ClassVar[int | None] = None

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(code, message, data)
        self.code = code
        self.message = message
        self.data = data

    def __str__(self) -> str:
        return f"{self.message} (code {self.code})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r})"


class ParseError(RpcError):
    CODE = ErrorCode.PARSE_ERROR


class InvalidRequest(RpcError):
    CODE = ErrorCode.INVALID_REQUEST


class MethodNotFound(RpcError):
    CODE = ErrorCode.METHOD_NOT_FOUND


class InvalidParams(RpcError):
    CODE = ErrorCode.INVALID_PARAMS


class InternalError(RpcError):
    CODE = ErrorCode.INTERNAL_ERROR


class FrameTooLarge(RpcError):
    CODE = ErrorCode.FRAME_TOO_LARGE


class NotFound(RpcError):
    CODE = ErrorCode.NOT_FOUND


class Conflict(RpcError):
    CODE = ErrorCode.CONFLICT


class ModelUnavailable(RpcError):
    CODE = ErrorCode.MODEL_UNAVAILABLE


class StorageError(RpcError):
    CODE = ErrorCode.STORAGE_ERROR


class FingerprintMismatch(RpcError):
    CODE = ErrorCode.FINGERPRINT_MISMATCH


class ShuttingDown(RpcError):
    CODE = ErrorCode.SHUTTING_DOWN


class Cancelled(RpcError):
    CODE = ErrorCode.CANCELLED


class InvalidInput(RpcError):
    CODE = ErrorCode.INVALID_INPUT


class Busy(RpcError):
    """The daemon is at its connection or in-flight request limit; retry later."""

    CODE = ErrorCode.BUSY


class Unauthorized(RpcError):
    """The daemon requires an auth token (``initialize`` with ``authToken``)."""

    CODE = ErrorCode.UNAUTHORIZED


class WrongNamespace(RpcError):
    """The session was created in another namespace than the one the request names."""

    CODE = ErrorCode.WRONG_NAMESPACE


def _table(*classes: type[RpcError]) -> Mapping[int, type[RpcError]]:
    table: dict[int, type[RpcError]] = {}
    for cls in classes:
        assert cls.CODE is not None and cls.CODE not in table, cls
        table[int(cls.CODE)] = cls
    return MappingProxyType(table)


# The one place where codes meet classes.
ERROR_CLASSES: Mapping[int, type[RpcError]] = _table(
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    InternalError,
    FrameTooLarge,
    NotFound,
    Conflict,
    ModelUnavailable,
    StorageError,
    FingerprintMismatch,
    ShuttingDown,
    Cancelled,
    InvalidInput,
    Busy,
    Unauthorized,
    WrongNamespace,
)


def error_class(code: int) -> type[RpcError]:
    """The exception class for an error code; ``RpcError`` for codes without their own."""
    return ERROR_CLASSES.get(code, RpcError)


def rpc_error(code: int, message: str, data: Any = None) -> RpcError:
    """Build the exception for an error object received from the daemon."""
    return error_class(code)(code, message, data)
