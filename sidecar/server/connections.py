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

import structlog

from sidecar.app import App
from sidecar.server.dispatch import Dispatcher
from sidecar.server.framing import FrameReader

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
    def __init__(self, app: App, dispatcher: Dispatcher) -> None:
        self.app = app
        self.dispatcher = dispatcher
        self._ids = itertools.count(1)
        self._connections: dict[int, Connection] = {}
        self._stopping = False

    @property
    def count(self) -> int:
        return len(self._connections)

    async def serve(
        self, reader: FrameReader, write: WriteFn, on_close: Callable[[], None]
    ) -> None:
        """Run one connection until EOF, an I/O error, or shutdown."""
        conn = Connection(next(self._ids), reader, write)
        conn.task = asyncio.current_task()
        self._connections[conn.id] = conn
        self.app.open_connections = len(self._connections)
        log.debug("connection_opened", connection=conn.id)
        try:
            while not (self._stopping or self.app.shutdown_requested.is_set()):
                frame = await conn.reader.next()
                if frame is None:
                    break
                conn.busy = True
                try:
                    reply = await self.dispatcher.handle_frame(frame, conn.id, conn.send)
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
