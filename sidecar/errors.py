"""Errors that handlers raise; the dispatcher turns them into JSON-RPC error objects."""

from __future__ import annotations

from typing import Any

from protocol.codes import ErrorCode


class StartupError(Exception):
    """A service could not start; the daemon exits 1 with this message."""


class RpcError(Exception):
    """An error with a JSON-RPC code. ``data`` carries structured detail for the client."""

    code: ErrorCode = ErrorCode.SERVER_ERROR

    def __init__(self, message: str, *, data: Any = None, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data
        if code is not None:
            self.code = code


class InvalidParams(RpcError):
    code = ErrorCode.INVALID_PARAMS


class InvalidInput(RpcError):
    code = ErrorCode.INVALID_INPUT


class MethodNotFound(RpcError):
    code = ErrorCode.METHOD_NOT_FOUND


class NotFound(RpcError):
    code = ErrorCode.NOT_FOUND


class Conflict(RpcError):
    code = ErrorCode.CONFLICT


class ModelUnavailable(RpcError):
    code = ErrorCode.MODEL_UNAVAILABLE


class StorageError(RpcError):
    code = ErrorCode.STORAGE_ERROR


class FingerprintMismatch(RpcError):
    code = ErrorCode.FINGERPRINT_MISMATCH


class ShuttingDown(RpcError):
    code = ErrorCode.SHUTTING_DOWN


class Cancelled(RpcError):
    code = ErrorCode.CANCELLED


class Busy(RpcError):
    code = ErrorCode.BUSY


class Unauthorized(RpcError):
    code = ErrorCode.UNAUTHORIZED


class WrongNamespace(RpcError):
    code = ErrorCode.WRONG_NAMESPACE
