"""The protocol model shared by ``Client`` and ``AsyncClient``; no sockets, no event loop.

A :class:`Session` turns calls into bytes to write and bytes read into events:

* framing: newline-delimited JSON with a line-size cap (:class:`LineBuffer`);
* request ids: per-connection integers, with the bookkeeping that drops late replies
  to calls that timed out or were cancelled (``abandon``);
* decoding: replies, ``$/progress`` notifications and other server notifications;
* results: decoding a reply's ``result`` into ``Any`` or a typed Struct, or raising the
  exception class mapped from its error code (see :mod:`libravdb_client.errors`).

Both clients only add I/O around it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from libravdb_client.errors import ConnectionClosed, LibravdbError, ProtocolError, rpc_error
from protocol.core import PROTOCOL_VERSION, ClientInfo, InitializeParams
from protocol.jsonrpc import ErrorObject, Notification, ProgressParams, Request
from protocol.sessions import IngestMessage

log = logging.getLogger("libravdb_client")

T = TypeVar("T")

CLIENT_NAME: Final = "libravdb_client"
CLIENT_VERSION: Final = "0.2.0"

DEFAULT_TIMEOUT: Final = 30.0
DEFAULT_CONNECT_TIMEOUT: Final = 5.0
# Largest reply line accepted (newline excluded). The daemon caps requests at 8 MiB by
# default, but replies (search results, exports) can be much larger.
DEFAULT_MAX_FRAME_BYTES: Final = 64 * 1024 * 1024
READ_CHUNK: Final = 256 * 1024
PROGRESS_METHOD: Final = "$/progress"

ProgressCallback = Callable[[ProgressParams], object]
NotificationCallback = Callable[[str, Any], object]


class UseClientDefault:
    """Type of :data:`USE_CLIENT_DEFAULT`: "use the timeout configured on the client"."""

    _instance: UseClientDefault | None = None

    def __new__(cls) -> UseClientDefault:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "USE_CLIENT_DEFAULT"


USE_CLIENT_DEFAULT: Final = UseClientDefault()
Timeout = float | None | UseClientDefault


def resolve_timeout(timeout: Timeout, default: float | None) -> float | None:
    value = default if isinstance(timeout, UseClientDefault) else timeout
    if value is not None and value < 0:
        raise ValueError(f"timeout must be >= 0 or None, got {value}")
    return value


# -- framing -----------------------------------------------------------------------------


class LineBuffer:
    """Splits a byte stream into lines; a line longer than ``max_line`` is a ProtocolError."""

    def __init__(self, max_line: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()
        self._scanned = 0  # bytes at the start of _buf known to hold no newline
        self.max_line = max_line

    def feed(self, data: bytes) -> list[bytearray]:
        buf = self._buf
        buf += data
        lines: list[bytearray] = []
        start = 0
        while True:
            end = buf.find(b"\n", max(start, self._scanned))
            if end < 0:
                break
            if end - start > self.max_line:
                raise ProtocolError(f"reply line of {end - start} bytes exceeds {self.max_line}")
            line = buf[start:end]
            start = end + 1
            if line and (not line[:1].isspace() or line.strip()):  # skip blank lines cheaply
                lines.append(line)
        if start:
            del buf[:start]
        self._scanned = len(buf)
        if len(buf) > self.max_line:
            raise ProtocolError(f"reply line exceeds {self.max_line} bytes")
        return lines

    @property
    def pending(self) -> int:
        """Bytes of an incomplete line held in the buffer."""
        return len(self._buf)


# -- events ------------------------------------------------------------------------------


@dataclass(slots=True)
class Reply:
    """A response to one of our requests."""

    id: int
    result: msgspec.Raw | None = None
    error: ErrorObject | None = None


@dataclass(slots=True)
class Progress:
    """A ``$/progress`` notification; ``token`` is the id of the request it is about."""

    params: ProgressParams


@dataclass(slots=True)
class ServerNotification:
    """Any other notification from the server."""

    method: str
    params: Any


Event = Reply | Progress | ServerNotification


class _Incoming(msgspec.Struct):
    jsonrpc: str | UnsetType = UNSET
    id: int | str | float | UnsetType | None = UNSET
    method: str | UnsetType = UNSET
    params: Any = None
    result: msgspec.Raw | UnsetType = UNSET
    error: ErrorObject | UnsetType = UNSET


_decode_incoming = msgspec.json.Decoder(_Incoming).decode
_decode_any = msgspec.json.Decoder().decode
_encoder = msgspec.json.Encoder()


def _encode_line(message: Request | Notification) -> bytes:
    buf = bytearray()
    _encoder.encode_into(message, buf)
    buf += b"\n"
    return bytes(buf)


# -- the session -------------------------------------------------------------------------


class Session:
    """Client-side state of one JSON-RPC connection.

    ``request`` allocates an id and returns the line to send. ``feed`` takes bytes read
    from the connection and returns the events they complete; replies to abandoned ids
    are dropped there. Error replies with ``id: null`` (the server could not read the
    request: parse error, frame too large) go to the oldest unanswered request, since the
    daemon answers the requests of one connection in order.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._buffer = LineBuffer(max_frame_bytes)
        self._next_id = 1
        # Sent and unanswered, in send order. False: abandoned, its reply is dropped.
        self._outstanding: dict[int, bool] = {}

    # sending
    def request(self, method: str, params: Any = None) -> tuple[int, bytes]:
        request_id = self._next_id
        data = _encode_line(
            Request(id=request_id, method=method, params=UNSET if params is None else params)
        )
        self._next_id += 1
        self._outstanding[request_id] = True
        return request_id, data

    def notification(self, method: str, params: Any = None) -> bytes:
        return _encode_line(Notification(method=method, params=UNSET if params is None else params))

    def abandon(self, request_id: int) -> None:
        """Stop waiting for a reply (timeout, cancellation); it is dropped if it arrives."""
        if request_id in self._outstanding:
            self._outstanding[request_id] = False

    def unsent(self, request_id: int) -> None:
        """The request never reached the connection: forget it entirely."""
        self._outstanding.pop(request_id, None)

    @property
    def waiting(self) -> int:
        """Requests sent whose caller still waits for the reply."""
        return sum(self._outstanding.values())

    # receiving
    def feed(self, data: bytes) -> list[Event]:
        """Events completed by ``data``. Raises ProtocolError on a malformed frame."""
        events: list[Event] = []
        for line in self._buffer.feed(data):
            event = self._event(line)
            if event is not None:
                events.append(event)
        return events

    def _event(self, line: bytearray) -> Event | None:
        try:
            msg = _decode_incoming(line)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ProtocolError(f"invalid frame from server: {exc}: {_preview(line)}") from exc
        if not isinstance(msg.method, UnsetType):
            if not isinstance(msg.id, UnsetType):
                log.debug("ignoring request from server: %s", msg.method)
                return None
            if msg.method == PROGRESS_METHOD:
                try:
                    return Progress(msgspec.convert(msg.params, ProgressParams))
                except msgspec.ValidationError:
                    log.debug("malformed $/progress params: %r", msg.params)
            return ServerNotification(msg.method, msg.params)
        if isinstance(msg.result, UnsetType) and isinstance(msg.error, UnsetType):
            raise ProtocolError(f"frame is neither a response nor a notification: {_preview(line)}")
        if isinstance(msg.id, UnsetType):
            raise ProtocolError(f"response without id: {_preview(line)}")
        request_id: Any = msg.id
        if request_id is None:
            if isinstance(msg.error, UnsetType):
                raise ProtocolError(f"success response with id null: {_preview(line)}")
            request_id = next(iter(self._outstanding), None)
            if request_id is None:
                log.debug("dropping error with id null: %s", msg.error.message)
                return None
        live = self._outstanding.pop(request_id, None)
        if not live:  # unknown id, or a late reply to an abandoned call
            log.debug("dropping reply to id %r (late or unknown)", request_id)
            return None
        if isinstance(msg.error, ErrorObject):
            return Reply(request_id, error=msg.error)
        assert not isinstance(msg.result, UnsetType)
        return Reply(request_id, result=msg.result)


def _preview(line: bytes | bytearray, limit: int = 200) -> str:
    text = bytes(line[:limit]).decode("utf-8", "replace")
    return text + ("..." if len(line) > limit else "")


# -- results -----------------------------------------------------------------------------


def result_any(reply: Reply) -> Any:
    """The reply's result as plain Python values, or raise the mapped RpcError."""
    if reply.error is not None:
        raise rpc_error(reply.error.code, reply.error.message, reply.error.data)
    assert reply.result is not None
    return _decode_any(reply.result)


def result_as(reply: Reply, result_type: type[T], method: str) -> T:
    """The reply's result decoded into ``result_type``, or raise the mapped RpcError."""
    if reply.error is not None:
        raise rpc_error(reply.error.code, reply.error.message, reply.error.data)
    assert reply.result is not None
    try:
        return msgspec.json.decode(reply.result, type=result_type)
    except msgspec.ValidationError as exc:
        name = getattr(result_type, "__name__", repr(result_type))
        raise ProtocolError(f"{method}: result does not match {name}: {exc}") from exc


def deliver_progress(callback: ProgressCallback | None, progress: Progress) -> None:
    if callback is None:
        return
    try:
        callback(progress.params)
    except Exception:
        log.exception("on_progress callback failed")


def deliver_notification(callback: NotificationCallback | None, event: ServerNotification) -> None:
    if callback is None:
        log.debug("unhandled notification %s", event.method)
        return
    try:
        callback(event.method, event.params)
    except Exception:
        log.exception("on_notification callback failed")


def ingest_messages(
    messages: Sequence[IngestMessage | Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """Messages for ``ingest`` on the wire: Structs by their wire names, mappings as they
    are (the daemon checks them and names a misspelled field in ``InvalidParams``)."""
    return [msgspec.to_builtins(m) if isinstance(m, IngestMessage) else dict(m) for m in messages]


def initialize_params(
    client_name: str, client_version: str, auth_token: str | None = None
) -> InitializeParams:
    return InitializeParams(
        client_info=ClientInfo(name=client_name, version=client_version),
        protocol_version=PROTOCOL_VERSION,
        auth_token=auth_token,
    )


def copy_error(reason: LibravdbError) -> LibravdbError:
    """A fresh exception like ``reason`` (one per failed call, so tracebacks stay separate)."""
    if isinstance(reason, ProtocolError):
        return ProtocolError(str(reason))
    return ConnectionClosed(str(reason))


def closed_error(reason: LibravdbError | None) -> ConnectionClosed:
    """The exception for a call made after the connection ended because of ``reason``."""
    if reason is None:
        return ConnectionClosed("the client is closed")
    return ConnectionClosed(f"the connection is closed: {reason}")
