"""Connection loops and graceful draining.

Each connection is one task that reads a frame, awaits its handler and writes the
reply before reading the next, so a later request on a connection always observes
the effects of an earlier one. Connections run concurrently with each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from protocol.codes import ErrorCode
from sidecar.app import App
from sidecar.server.auth import token_matches
from sidecar.server.dispatch import Dispatcher, error_line
from sidecar.server.framing import Frame, FrameReader

log = structlog.get_logger(__name__)

WriteFn = Callable[[bytes], Awaitable[None]]


class Connection:
    def __init__(self, connection_id: int, reader: FrameReader, write: WriteFn) -> None:
        self.id = connection_id
        self.reader = reader
        self._write = write
        self._write_lock = asyncio.Lock()
        self.busy = False
        self.task: asyncio.Task[None] | None = None

    async def send(self, data: bytes) -> None:
        async with self._write_lock:
            await self._write(data)


class ConnectionManager:
    def __init__(self, app: App, dispatcher: Dispatcher, *, auth_token: str | None = None) -> None:
        self.app = app
        self.dispatcher = dispatcher
        self.auth_token = auth_token
        self._ids = itertools.count(1)
        self._connections: dict[int, Connection] = {}
        self._stopping = False

    @property
    def count(self) -> int:
        return len(self._connections)

    async def serve(
        self,
        reader: FrameReader,
        write: WriteFn,
        on_close: Callable[[], None],
        *,
        trusted: bool = False,
    ) -> None:
        """Run one connection until EOF, an I/O error, shutdown, or a guard closes it.

        ``trusted``: the stdio channel of the parent that started the daemon. Socket
        connections (untrusted) are closed when their first frame is not JSON-RPC (an HTTP
        request from a web page, a TLS hello), after ``server.max_parse_errors``
        consecutive unparsable frames, and, with an auth token configured, when their first
        request is not an ``initialize`` carrying it.
        """
        conn = Connection(next(self._ids), reader, write)
        conn.task = asyncio.current_task()
        limit = self.app.settings.server.max_connections
        if len(self._connections) >= limit:
            with contextlib.suppress(ConnectionError, BrokenPipeError):
                await conn.send(
                    error_line(None, ErrorCode.BUSY, f"busy: {limit} connections are open")
                )
            on_close()
            log.warning("connection_refused_busy", limit=limit)
            return
        self._connections[conn.id] = conn
        self.app.open_connections = len(self._connections)
        log.debug("connection_opened", connection=conn.id)
        guard = None if trusted else _Guard(self)
        try:
            while not (self._stopping or self.app.shutdown_requested.is_set()):
                frame = await conn.reader.next()
                if frame is None:
                    break
                conn.busy = True
                try:
                    if guard is not None and not await guard.admit(frame, conn):
                        break
                    message, error = self.dispatcher.decode(frame)
                    if error is not None:
                        await conn.send(error)
                        if guard is not None and guard.parse_error_limit_reached():
                            break
                        continue
                    if guard is not None:
                        guard.parsed()
                        if not await guard.authenticated(message, conn):
                            break
                    reply = await self.dispatcher.handle_decoded(message, conn.id, conn.send)
                    if reply is not None:
                        await conn.send(reply)
                finally:
                    conn.busy = False
        except (ConnectionError, BrokenPipeError):
            log.debug("connection_lost", connection=conn.id)
        except asyncio.CancelledError:
            if not self._stopping:
                raise
        finally:
            self._connections.pop(conn.id, None)
            self.app.open_connections = len(self._connections)
            on_close()
            log.debug("connection_closed", connection=conn.id)

    async def drain(self, grace_s: float) -> None:
        """Stop reading new requests, let in-flight ones finish (bounded), then close."""
        self._stopping = True
        for conn in list(self._connections.values()):
            if not conn.busy and conn.task is not None:
                conn.task.cancel()
        tasks = [c.task for c in self._connections.values() if c.task is not None]
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=grace_s)
        if pending:
            log.warning("drain_timeout", pending=len(pending), grace_s=grace_s)
            for task in pending:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*pending, return_exceptions=True)


class _Guard:
    """What a socket connection must get right before and while it is served."""

    def __init__(self, manager: ConnectionManager) -> None:
        self._manager = manager
        self._first = True
        self._parse_errors = 0
        self._authenticated = manager.auth_token is None

    async def admit(self, frame: Frame, conn: Connection) -> bool:
        """False (after a one-line error) when the first frame is not a JSON-RPC frame:
        it must start with ``{`` or ``[``. An oversized first frame is answered as usual
        but counts as a parse error."""
        if not self._first:
            return True
        self._first = False
        if not isinstance(frame, bytes):
            self._parse_errors += 1
            return True
        if frame.lstrip()[:1] in (b"{", b"["):
            return True
        message, error = self._manager.dispatcher.decode(frame)
        if error is None:  # a JSON scalar: the usual -32600 before closing
            reply = await self._manager.dispatcher.handle_decoded(message, conn.id, conn.send)
            if reply is not None:
                await conn.send(reply)
        else:
            await conn.send(
                error_line(
                    None,
                    ErrorCode.PARSE_ERROR,
                    "parse error: this endpoint speaks JSON-RPC 2.0, one JSON object per "
                    "line; closing the connection",
                )
            )
        log.warning("connection_not_jsonrpc", connection=conn.id)
        return False

    def parse_error_limit_reached(self) -> bool:
        self._parse_errors += 1
        return self._parse_errors >= self._manager.app.settings.server.max_parse_errors

    def parsed(self) -> None:
        self._parse_errors = 0

    async def authenticated(self, message: Any, conn: Connection) -> bool:
        """With an auth token: the first request must be ``initialize`` carrying it."""
        if self._authenticated:
            return True
        token = self._manager.auth_token
        assert token is not None
        if isinstance(message, dict) and message.get("method") == "initialize":
            params = message.get("params")
            given = params.get("authToken") if isinstance(params, dict) else None
            if token_matches(token, given):
                self._authenticated = True
                return True
        request_id = message.get("id") if isinstance(message, dict) else None
        if not (isinstance(request_id, str | int) and not isinstance(request_id, bool)):
            request_id = None
        await conn.send(
            error_line(
                request_id,
                ErrorCode.UNAUTHORIZED,
                "unauthorized: this daemon requires authentication; send `initialize` with "
                "`authToken` as the first request of the connection",
            )
        )
        log.warning("connection_unauthorized", connection=conn.id)
        return False
