"""The asyncio client: one connection, many concurrent calls matched by id."""

# A per-call `timeout=` argument is the API (as in httpx), not an accident: ASYNC109 is off.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import Generator
from types import TracebackType
from typing import Any, Self, TypeVar

from libravdb_client._base import ClientBase
from libravdb_client._core import (
    READ_CHUNK,
    USE_CLIENT_DEFAULT,
    Event,
    ProgressCallback,
    Reply,
    Timeout,
    closed_error,
    copy_error,
    resolve_timeout,
    result_any,
    result_as,
)
from libravdb_client._methods import RpcMethods
from libravdb_client._rpc import AsyncCaller
from libravdb_client._spawn import SpawnSpec
from libravdb_client.errors import (
    ConnectError,
    ConnectionClosed,
    LibravdbError,
    ProtocolError,
    RpcTimeout,
)
from protocol.core import InitializeResult

T = TypeVar("T")

# StreamReader buffer size. Replies are read in chunks into the Session's own line
# buffer (capped by max_frame_bytes), so this bounds memory per read, not frame size.
_STREAM_LIMIT = 4 * READ_CHUNK


class AsyncClient(RpcMethods, ClientBase, AsyncCaller):
    """An asyncio JSON-RPC client for libravdbd.

    Connects on ``await client``, ``async with client``, ``await client.open()`` or the
    first call. Many calls may be in flight at once on the one connection (pipelining);
    a reader task matches replies to calls by id and routes ``$/progress`` notifications
    to the call's ``on_progress`` callback. Not thread-safe: use it from one event loop.

    ::

        async with AsyncClient("unix:/run/libravdb.sock") as client:
            health = await client.health()

        async with AsyncClient.spawn(data_dir="/tmp/d") as client:   # private daemon
            ...
    """

    def _init_transport(self) -> None:
        self._writer: asyncio.StreamWriter | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._read_task: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[Reply]] = {}
        self._open_lock: asyncio.Lock | None = None

    def _constructed(self) -> Self:
        return self

    # -- properties -----------------------------------------------------------------
    @property
    def process(self) -> asyncio.subprocess.Process | None:
        """The spawned daemon, once started."""
        return self._process

    @property
    def in_flight(self) -> int:
        """Calls waiting for their reply."""
        return len(self._pending)

    # -- lifecycle ------------------------------------------------------------------
    async def open(self) -> Self:
        """Connect (or start the child) now; a no-op when already open."""
        if self._writer is not None and self._broken is None:
            return self
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if self._closed or self._broken is not None:
                raise closed_error(self._broken)
            if not self._opened:
                reader, self._writer = await self._connect()
                self._opened = True
                self._read_task = asyncio.create_task(
                    self._read_loop(reader), name=f"libravdb-reader {self.endpoint}"
                )
                params = self._auth_params()
                if params is not None:
                    # first request of the connection; other callers wait on the lock
                    reply = await self._roundtrip("initialize", params, self.connect_timeout, None)
                    result_as(reply, InitializeResult, "initialize")
        return self

    def __await__(self) -> Generator[Any, None, Self]:
        return self.open().__await__()

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        target = self._target
        if isinstance(target, SpawnSpec):
            return await self._start_child(target)
        try:
            async with asyncio.timeout(self.connect_timeout):
                if target.kind == "unix":
                    return await asyncio.open_unix_connection(target.path, limit=_STREAM_LIMIT)
                return await asyncio.open_connection(target.host, target.port, limit=_STREAM_LIMIT)
        except TimeoutError as exc:
            raise ConnectError(f"cannot connect to {target}: timed out") from exc
        except OSError as exc:
            raise ConnectError(f"cannot connect to {target}: {exc.strerror or exc}") from exc

    async def _start_child(
        self, spec: SpawnSpec
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        argv = spec.argv()
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=spec.open_stderr(),
                env=spec.environment(),
                cwd=spec.cwd,
                limit=_STREAM_LIMIT,
            )
        except OSError as exc:
            spec.close_owned()
            raise ConnectError(f"cannot start the daemon ({argv[0]}): {exc}") from exc
        assert process.stdin is not None and process.stdout is not None
        self._process = process
        return process.stdout, process.stdin

    async def close(self) -> None:
        """Close the connection; for a spawned daemon, stop it and reap it."""
        if self._closed:
            return
        self._closed = True
        self._fail(ConnectionClosed("the client was closed"))
        writer, task = self._writer, self._read_task
        if writer is None:
            return
        try:
            if isinstance(self._target, SpawnSpec):
                await self._stop_child(writer, self._target)
            else:
                writer.close()
                with contextlib.suppress(OSError, TimeoutError):
                    async with asyncio.timeout(1.0):
                        await writer.wait_closed()
        finally:
            if task is not None and not task.done():
                task.cancel()
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _stop_child(self, writer: asyncio.StreamWriter, spec: SpawnSpec) -> None:
        process = self._process
        assert process is not None
        try:
            writer.close()  # EOF on its stdin: the daemon drains and exits 0
            # The reader task keeps draining its stdout meanwhile.
            for escalate in (process.terminate, process.kill):
                try:
                    async with asyncio.timeout(spec.shutdown_timeout):
                        await process.wait()
                    break
                except TimeoutError:
                    with contextlib.suppress(ProcessLookupError):
                        escalate()
            else:
                await process.wait()
        finally:
            spec.close_owned()

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- the reader task ------------------------------------------------------------
    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        reason: LibravdbError
        try:
            while True:
                data = await reader.read(READ_CHUNK)
                if not data:
                    reason = ConnectionClosed(await self._eof_message())
                    break
                for event in self._session.feed(data):
                    self._dispatch(event)
        except ProtocolError as exc:
            reason = exc
            if self._writer is not None and not isinstance(self._target, SpawnSpec):
                self._writer.close()
        except OSError as exc:
            reason = ConnectionClosed(f"connection lost: {exc}")
        except asyncio.CancelledError:
            self._fail(ConnectionClosed("the client was closed"))
            raise
        self._fail(reason)

    def _dispatch(self, event: Event) -> None:
        reply = self._deliver(event)
        if reply is not None:
            future = self._pending.pop(reply.id, None)
            if future is not None and not future.done():
                future.set_result(reply)

    async def _eof_message(self) -> str:
        process = self._process
        if process is None:
            return "the daemon closed the connection"
        try:
            async with asyncio.timeout(1.0):
                code = await process.wait()
        except TimeoutError:
            return "the daemon closed its stdout"
        return f"the daemon exited with code {code}"

    def _fail(self, reason: LibravdbError) -> None:
        """The connection has ended: fail every waiting call with (a copy of) ``reason``."""
        if self._broken is None:
            self._broken = reason
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(copy_error(reason))

    # -- calls ----------------------------------------------------------------------
    async def call(
        self,
        method: str,
        params: Any = None,
        *,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        on_progress: ProgressCallback | None = None,
    ) -> Any:
        """Call ``method`` and return its decoded ``result`` (dicts, lists, str, numbers).

        ``params`` is anything msgspec encodes (a dict, a list, a Struct). Raises the
        RpcError subclass of the error code, RpcTimeout, or a TransportError.
        ``on_progress`` (a plain function) receives this call's ``$/progress``
        notifications, in the reader task.
        """
        return result_any(await self._roundtrip(method, params, timeout, on_progress))

    async def call_typed(
        self,
        method: str,
        params: Any,
        result_type: type[T],
        *,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        on_progress: ProgressCallback | None = None,
    ) -> T:
        """Like ``call`` but decodes the result into ``result_type`` (a Struct, usually)."""
        reply = await self._roundtrip(method, params, timeout, on_progress)
        return result_as(reply, result_type, method)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no id, no reply)."""
        data = self._session.notification(method, params)
        await self.open()
        await self._send(data)

    async def _send(self, data: bytes) -> None:
        writer = self._writer
        if self._broken is not None or self._closed or writer is None:
            raise closed_error(self._broken)
        try:
            writer.write(data)
            await writer.drain()
        except (OSError, RuntimeError) as exc:
            raise ConnectionClosed(f"cannot send: {exc}") from exc

    async def _roundtrip(
        self,
        method: str,
        params: Any,
        timeout: Timeout,
        on_progress: ProgressCallback | None,
    ) -> Reply:
        seconds = resolve_timeout(timeout, self.timeout)
        await self.open()
        request_id, data = self._session.request(method, params)
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        if on_progress is not None:
            self._progress[request_id] = on_progress
        try:
            try:
                await self._send(data)
            except BaseException:
                self._session.unsent(request_id)
                raise
            if seconds is None:
                return await future
            try:
                async with asyncio.timeout(seconds):
                    return await future
            except TimeoutError:
                if future.done() and not future.cancelled():
                    return future.result()
                raise RpcTimeout(method, seconds) from None
        finally:
            self._pending.pop(request_id, None)
            self._progress.pop(request_id, None)
            self._session.abandon(request_id)  # no-op once answered
