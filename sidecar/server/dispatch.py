"""JSON-RPC 2.0 decoding, validation and dispatch of one frame to its handler.

Transport-agnostic: takes bytes, returns the bytes to write back (or None for
notifications). Every error object carries ``code`` and ``message``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import structlog

from protocol.codes import ErrorCode
from protocol.jsonrpc import ErrorObject, ErrorResponse, RequestId, SuccessResponse
from sidecar.api.context import CallContext
from sidecar.api.errors import rpc_error_for
from sidecar.api.registry import Registry
from sidecar.app import App
from sidecar.errors import Busy, RpcError
from sidecar.server.coerce import ParamsError, convert_or_explain
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
        self._method_names = tuple(registry.names())

    async def handle_frame(self, frame: Frame, connection_id: int, send: Sender) -> bytes | None:
        message, error = self.decode(frame)
        if error is not None:
            return error
        return await self.handle_decoded(message, connection_id, send)

    def decode(self, frame: Frame) -> tuple[Any, bytes | None]:
        """(the decoded message, None), or (None, the error reply) for a frame that is too
        large or not JSON. Never raises: a frame must not be able to drop the connection."""
        if frame is OVERSIZED:
            cap = self.app.settings.server.max_frame_bytes
            return None, error_line(
                None,
                ErrorCode.FRAME_TOO_LARGE,
                f"request exceeds the frame size cap of {cap} bytes",
                {"maxFrameBytes": cap},
            )
        assert isinstance(frame, bytes)
        try:
            return msgspec.json.decode(frame), None
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            return None, error_line(None, ErrorCode.PARSE_ERROR, f"parse error: {clip(str(exc))}")
        except RecursionError:
            return None, error_line(
                None, ErrorCode.PARSE_ERROR, "parse error: JSON nested too deeply"
            )
        except Exception as exc:  # a decoder fault: answer it, keep the connection
            log.error("decode_failed", error=type(exc).__name__, frame_bytes=len(frame))
            return None, error_line(None, ErrorCode.PARSE_ERROR, "parse error: undecodable frame")

    async def handle_decoded(self, message: Any, connection_id: int, send: Sender) -> bytes | None:
        if isinstance(message, list):
            return await self._handle_batch(message, connection_id, send)
        response = await self._handle_message(message, connection_id, send)
        return None if response is None else encode_line(response)

    async def _handle_batch(
        self, messages: list[Any], connection_id: int, send: Sender
    ) -> bytes | None:
        if not messages:
            return error_line(None, ErrorCode.INVALID_REQUEST, "invalid request: empty batch")
        cap = self.app.settings.server.max_batch
        if len(messages) > cap:
            return error_line(
                None,
                ErrorCode.INVALID_REQUEST,
                f"invalid request: a batch of {len(messages)} entries exceeds the cap of {cap}",
                {"maxBatch": cap},
            )
        responses = []
        for message in messages:  # in order: later entries observe earlier effects
            response = await self._handle_message(message, connection_id, send)
            if response is not None:
                responses.append(response)
            await asyncio.sleep(0)  # other connections run between entries
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
        app = self.app
        app.inflight_requests += 1
        try:
            if (
                app.inflight_requests > app.settings.server.max_inflight
                and method_name not in self.ALWAYS_ALLOWED
            ):
                raise Busy(
                    f"busy: {app.inflight_requests - 1} requests are executing "
                    "(server.max_inflight); retry later",
                    data={"maxInflight": self.app.settings.server.max_inflight},
                )
            result = await self._call(
                method_name, message.get("params"), request_id, connection_id, send, is_notification
            )
            response: SuccessResponse | ErrorResponse = SuccessResponse(
                id=request_id, result=result
            )
        except Exception as exc:
            ok = False
            mapped = rpc_error_for(exc, clip(method_name))
            if mapped is None:
                log.exception(
                    "handler_crashed", method=clip(method_name), request_id=_loggable(request_id)
                )
                mapped = RpcError(
                    f"internal error in {clip(method_name)}: {type(exc).__name__}: {exc}",
                    code=ErrorCode.INTERNAL_ERROR,
                )
            response = _error(request_id, mapped.code, mapped.message, mapped.data)
        finally:
            self.app.inflight_requests -= 1
        duration_ms = (time.perf_counter() - started) * 1000.0
        # Unknown names share one bucket so a client cannot grow the stats table at will.
        known = self.registry.get(method_name) is not None
        self.app.stats.record(method_name if known else "<unknown>", duration_ms, ok)
        log.info(
            "rpc",
            method=method_name if known else clip(method_name, 64),
            request_id=_loggable(request_id),
            connection=connection_id,
            duration_ms=round(duration_ms, 3),
            ok=ok,
            # the code only: messages quote what the client sent (names, texts)
            **({} if ok else {"error_code": response.error.code}),  # type: ignore[union-attr]
        )
        if not ok:
            log.debug(
                "rpc_error",
                request_id=_loggable(request_id),
                connection=connection_id,
                message=response.error.message,  # type: ignore[union-attr]
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
            raise RpcError(f"unknown method: {clip(method_name)}", code=ErrorCode.METHOD_NOT_FOUND)
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
                typed = convert_or_explain(params, method.schema.params)
            except ParamsError as exc:
                # a value outside a declared bound is invalid input, like the handlers'
                # own refusals; a request of the wrong shape is invalid params
                code = ErrorCode.INVALID_INPUT if exc.out_of_bounds else ErrorCode.INVALID_PARAMS
                raise RpcError(f"invalid params for {method_name}: {exc}", code=code) from exc
            except RecursionError:
                raise RpcError(
                    f"invalid params for {method_name}: nested too deeply",
                    code=ErrorCode.INVALID_PARAMS,
                ) from None

        async def progress(done: int, total: int | None, text: str | None) -> None:
            if is_notification:
                return
            body: dict[str, Any] = {"token": request_id, "done": done}
            if total is not None:
                body["total"] = total
            if text is not None:
                body["message"] = text
            await send(encode_line({"jsonrpc": "2.0", "method": "$/progress", "params": body}))

        ctx = CallContext(
            self.app, method_name, request_id, connection_id, progress, self._method_names
        )
        return await method.handler(ctx, typed)


def _error(request_id: RequestId, code: int, message: str, data: Any = None) -> ErrorResponse:
    return ErrorResponse(id=request_id, error=ErrorObject(code, clip(message, MAX_MESSAGE), data))


# Client-supplied text that reaches a reply or a log line is cut to these sizes, so a 4 MiB
# method name cannot grow the log by 4 MiB per request.
MAX_QUOTED = 200
MAX_MESSAGE = 2000


def clip(text: str, limit: int = MAX_QUOTED) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…({len(text)} chars)"


def _loggable(request_id: RequestId) -> RequestId:
    return clip(request_id, 64) if isinstance(request_id, str) else request_id
