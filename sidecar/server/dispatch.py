"""JSON-RPC 2.0 decoding, validation and dispatch of one frame to its handler.

Transport-agnostic: takes bytes, returns the bytes to write back (or None for
notifications). Every error object carries ``code`` and ``message``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import structlog

from protocol.codes import ErrorCode
from protocol.jsonrpc import ErrorObject, ErrorResponse, RequestId, SuccessResponse
from sidecar.api.context import CallContext
from sidecar.api.registry import Registry
from sidecar.app import App
from sidecar.errors import RpcError
from sidecar.server.coerce import convert_params
from sidecar.server.framing import OVERSIZED, Frame

log = structlog.get_logger(__name__)

_encoder = msgspec.json.Encoder()
_NO_ID: Any = object()

Sender = Callable[[bytes], Awaitable[None]]


def encode_line(message: Any) -> bytes:
    return _encoder.encode(message) + b"\n"


def error_line(request_id: RequestId, code: int, message: str, data: Any = None) -> bytes:
    return encode_line(ErrorResponse(id=request_id, error=ErrorObject(code, message, data)))


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, str | int | float) and not isinstance(value, bool))


class Dispatcher:
    """Turns frames into handler calls. One instance serves every connection."""

    # Methods still served while the daemon drains.
    ALWAYS_ALLOWED = frozenset({"health", "status", "shutdown", "initialize"})

    def __init__(self, app: App, registry: Registry) -> None:
        self.app = app
        self.registry = registry

    async def handle_frame(self, frame: Frame, connection_id: int, send: Sender) -> bytes | None:
        if frame is OVERSIZED:
            cap = self.app.settings.server.max_frame_bytes
            return error_line(
                None,
                ErrorCode.FRAME_TOO_LARGE,
                f"request exceeds the frame size cap of {cap} bytes",
                {"maxFrameBytes": cap},
            )
        assert isinstance(frame, bytes)
        try:
            message = msgspec.json.decode(frame)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            return error_line(None, ErrorCode.PARSE_ERROR, f"parse error: {exc}")

        if isinstance(message, list):
            return await self._handle_batch(message, connection_id, send)
        response = await self._handle_message(message, connection_id, send)
        return None if response is None else encode_line(response)

    async def _handle_batch(
        self, messages: list[Any], connection_id: int, send: Sender
    ) -> bytes | None:
        if not messages:
            return error_line(None, ErrorCode.INVALID_REQUEST, "invalid request: empty batch")
        responses = []
        for message in messages:  # in order: later entries observe earlier effects
            response = await self._handle_message(message, connection_id, send)
            if response is not None:
                responses.append(response)
        return encode_line(responses) if responses else None

    async def _handle_message(
        self, message: Any, connection_id: int, send: Sender
    ) -> SuccessResponse | ErrorResponse | None:
        if not isinstance(message, dict):
            return _error(None, ErrorCode.INVALID_REQUEST, "invalid request: expected an object")
        request_id = message.get("id", _NO_ID)
        is_notification = request_id is _NO_ID
        if is_notification:
            request_id = None
        elif not _valid_id(request_id):
            return _error(
                None, ErrorCode.INVALID_REQUEST, "invalid request: id must be a string or number"
            )
        method_name = message.get("method")
        if not isinstance(method_name, str) or not method_name:
            return _error(request_id, ErrorCode.INVALID_REQUEST, "invalid request: missing method")
        if message.get("jsonrpc", "2.0") != "2.0":
            return _error(
                request_id, ErrorCode.INVALID_REQUEST, 'invalid request: jsonrpc must be "2.0"'
            )

        started = time.perf_counter()
        ok = True
        try:
            result = await self._call(
                method_name, message.get("params"), request_id, connection_id, send, is_notification
            )
            response: SuccessResponse | ErrorResponse = SuccessResponse(
                id=request_id, result=result
            )
        except RpcError as exc:
            ok = False
            response = _error(request_id, exc.code, exc.message, exc.data)
        except Exception as exc:
            ok = False
            log.exception("handler_crashed", method=method_name, request_id=request_id)
            response = _error(
                request_id,
                ErrorCode.INTERNAL_ERROR,
                f"internal error in {method_name}: {type(exc).__name__}: {exc}",
            )
        duration_ms = (time.perf_counter() - started) * 1000.0
        # Unknown names share one bucket so a client cannot grow the stats table at will.
        known = self.registry.get(method_name) is not None
        self.app.stats.record(method_name if known else "<unknown>", duration_ms, ok)
        log.info(
            "rpc",
            method=method_name,
            request_id=request_id,
            connection=connection_id,
            duration_ms=round(duration_ms, 3),
            ok=ok,
            **({} if ok else {"error": response.error.message}),  # type: ignore[union-attr]
        )
        return None if is_notification else response

    async def _call(
        self,
        method_name: str,
        params: Any,
        request_id: RequestId,
        connection_id: int,
        send: Sender,
        is_notification: bool,
    ) -> Any:
        method = self.registry.get(method_name)
        if method is None:
            raise RpcError(f"unknown method: {method_name}", code=ErrorCode.METHOD_NOT_FOUND)
        if self.app.closing and method_name not in self.ALWAYS_ALLOWED:
            raise RpcError("daemon is shutting down", code=ErrorCode.SHUTTING_DOWN)
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise RpcError(
                f"invalid params for {method_name}: params must be an object",
                code=ErrorCode.INVALID_PARAMS,
            )
        typed: Any = params
        if method.schema.params is not None:
            try:
                typed = convert_params(params, method.schema.params)
            except msgspec.ValidationError as exc:
                raise RpcError(
                    f"invalid params for {method_name}: {exc}", code=ErrorCode.INVALID_PARAMS
                ) from exc

        async def progress(done: int, total: int | None, text: str | None) -> None:
            if is_notification:
                return
            body: dict[str, Any] = {"token": request_id, "done": done}
            if total is not None:
                body["total"] = total
            if text is not None:
                body["message"] = text
            await send(encode_line({"jsonrpc": "2.0", "method": "$/progress", "params": body}))

        ctx = CallContext(self.app, method_name, request_id, connection_id, progress)
        return await method.handler(ctx, typed)


def _error(request_id: RequestId, code: int, message: str, data: Any = None) -> ErrorResponse:
    return ErrorResponse(id=request_id, error=ErrorObject(code, message, data))
