"""The JSON-RPC 2.0 envelope shared by the daemon and the clients."""

from __future__ import annotations

from typing import Any

import msgspec

# JSON-RPC ids are strings, numbers or null; we keep whatever the peer sent.
RequestId = str | int | float | None


class ErrorObject(msgspec.Struct, omit_defaults=True):
    code: int
    message: str
    data: Any = None


class Request(msgspec.Struct, kw_only=True):
    jsonrpc: str = "2.0"
    id: RequestId
    method: str
    params: Any | msgspec.UnsetType = msgspec.UNSET


class Notification(msgspec.Struct, kw_only=True):
    jsonrpc: str = "2.0"
    method: str
    params: Any | msgspec.UnsetType = msgspec.UNSET


class SuccessResponse(msgspec.Struct, kw_only=True):
    jsonrpc: str = "2.0"
    id: RequestId
    result: Any


class ErrorResponse(msgspec.Struct, kw_only=True):
    jsonrpc: str = "2.0"
    id: RequestId
    error: ErrorObject


class ProgressParams(msgspec.Struct, rename="camel", omit_defaults=True):
    """Params of the `$/progress` notification sent during long operations."""

    token: str | int | float | None
    done: int
    total: int | None = None
    message: str | None = None
