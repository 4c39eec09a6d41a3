"""The blocking client: one connection, calls serialized by a lock."""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import subprocess
import threading
import time
from types import TracebackType
from typing import IO, Any, Protocol, Self, TypeVar

from libravdb_client._base import ClientBase
from libravdb_client._core import (
    READ_CHUNK,
    USE_CLIENT_DEFAULT,
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
from libravdb_client._rpc import SyncCaller
from libravdb_client._spawn import SpawnSpec
from libravdb_client.endpoints import Endpoint
from libravdb_client.errors import (
    ConnectError,
    ConnectionClosed,
    LibravdbError,
    ProtocolError,
    RpcTimeout,
)
from protocol.core import InitializeResult

T = TypeVar("T")


class _Stream(Protocol):
    def send(self, data: bytes) -> None: ...

    def recv(self, timeout: float | None) -> bytes | None:
        """Bytes read; b"" at end of stream; None if nothing arrived within ``timeout``."""
        ...

    def close(self) -> None: ...


class _SocketStream:
    def __init__(self, sock: socket.socket) -> None:
        sock.settimeout(None)
        self._sock = sock
        self._selector = selectors.DefaultSelector()
        self._selector.register(sock, selectors.EVENT_READ)

    def send(self, data: bytes) -> None:
        self._sock.sendall(data)

    def recv(self, timeout: float | None) -> bytes | None:
        if not self._selector.select(timeout):
            return None
        return self._sock.recv(READ_CHUNK)

    def close(self) -> None:
        self._selector.close()
        self._sock.close()


class _PipeStream:
    """The child's stdin and stdout (POSIX: select() on pipes)."""

    def __init__(self, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self._in = stdin
        self._out = stdout
        self._fd = stdout.fileno()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._fd, selectors.EVENT_READ)

    def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._in.fileno(), view)
            view = view[written:]

    def recv(self, timeout: float | None) -> bytes | None:
        if not self._selector.select(timeout):
            return None
        return os.read(self._fd, READ_CHUNK)

    def close_input(self) -> None:
        with contextlib.suppress(OSError):
            self._in.close()

    def close(self) -> None:
        self.close_input()
        self._selector.close()
        self._out.close()


def _connect_socket(endpoint: Endpoint, timeout: float) -> socket.socket:
    try:
        if endpoint.kind == "unix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(timeout)
                sock.connect(endpoint.path)
            except BaseException:
                sock.close()
                raise
        else:
            sock = socket.create_connection((endpoint.host, endpoint.port), timeout=timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
        raise ConnectError(f"cannot connect to {endpoint}: {reason}") from exc
    return sock


class Client(RpcMethods, ClientBase, SyncCaller):
    """A blocking JSON-RPC client for libravdbd.

    ``Client("unix:/path")`` or ``Client("tcp:127.0.0.1:37421")`` connects on first use
    (or on ``with``/``open()``); without an endpoint it uses ``$LIBRAVDB_RPC_ENDPOINT`` or
    the daemon's default socket. ``Client.spawn(...)`` starts a private daemon over stdio.

    Thread-safe: calls from several threads are serialized on the one connection.
    """

    def _init_transport(self) -> None:
        self._lock = threading.RLock()
        self._stream: _Stream | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._ready: dict[int, Reply] = {}

    def _constructed(self) -> Self:
        return self.open()

    # -- properties -----------------------------------------------------------------
    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The spawned daemon, if this client started one."""
        return self._process

    # -- lifecycle ------------------------------------------------------------------
    def open(self) -> Self:
        """Connect (or start the child) now; a no-op when already open."""
        with self._lock:
            self._ensure_open()
        return self

    def _ensure_open(self) -> _Stream:
        if self._stream is not None and self._broken is None:
            return self._stream
        if self._closed or self._opened:
            raise closed_error(self._broken)
        target = self._target
        if isinstance(target, SpawnSpec):
            self._stream = self._start_child(target)
        else:
            self._stream = _SocketStream(_connect_socket(target, self.connect_timeout))
        self._opened = True
        params = self._auth_params()
        if params is not None:  # the first request of the connection
            reply = self._roundtrip("initialize", params, self.connect_timeout, None)
            result_as(reply, InitializeResult, "initialize")
        assert self._stream is not None
        return self._stream

    def _start_child(self, spec: SpawnSpec) -> _PipeStream:
        argv = spec.argv()
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=spec.open_stderr(),
                env=spec.environment(),
                cwd=spec.cwd,
                bufsize=0,
            )
        except OSError as exc:
            spec.close_owned()
            raise ConnectError(f"cannot start the daemon ({argv[0]}): {exc}") from exc
        assert process.stdin is not None and process.stdout is not None
        self._process = process
        return _PipeStream(process.stdin, process.stdout)

    def close(self) -> None:
        """Close the connection; for a spawned daemon, stop it and reap it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            stream, self._stream = self._stream, None
            if stream is None:
                return
            if isinstance(stream, _PipeStream) and isinstance(self._target, SpawnSpec):
                self._stop_child(stream, self._target)
            else:
                stream.close()

    def _stop_child(self, stream: _PipeStream, spec: SpawnSpec) -> None:
        process = self._process
        assert process is not None
        try:
            stream.close_input()  # EOF on its stdin: the daemon drains and exits 0
            deadline = time.monotonic() + spec.shutdown_timeout
            # Keep reading its stdout so it never blocks writing a reply nobody reads.
            while (remaining := deadline - time.monotonic()) > 0:
                try:
                    data = stream.recv(remaining)
                except OSError:
                    break
                if not data:  # EOF (or timeout)
                    break
            try:
                process.wait(max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                process.terminate()
                try:
                    process.wait(spec.shutdown_timeout)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        finally:
            stream.close()
            spec.close_owned()

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- calls ----------------------------------------------------------------------
    def call(
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
        ``on_progress`` receives this call's ``$/progress`` notifications.
        """
        return result_any(self._roundtrip(method, params, timeout, on_progress))

    def call_typed(
        self,
        method: str,
        params: Any,
        result_type: type[T],
        *,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        on_progress: ProgressCallback | None = None,
    ) -> T:
        """Like ``call`` but decodes the result into ``result_type`` (a Struct, usually)."""
        return result_as(self._roundtrip(method, params, timeout, on_progress), result_type, method)

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no id, no reply)."""
        with self._lock:
            data = self._session.notification(method, params)
            stream = self._ensure_open()
            try:
                stream.send(data)
            except OSError as exc:
                raise self._lost(f"cannot send: {exc}") from exc

    def _roundtrip(
        self,
        method: str,
        params: Any,
        timeout: Timeout,
        on_progress: ProgressCallback | None,
    ) -> Reply:
        seconds = resolve_timeout(timeout, self.timeout)
        with self._lock:
            stream = self._ensure_open()
            request_id, data = self._session.request(method, params)
            deadline = None if seconds is None else time.monotonic() + seconds
            if on_progress is not None:
                self._progress[request_id] = on_progress
            try:
                try:
                    stream.send(data)
                except OSError as exc:
                    self._session.unsent(request_id)
                    raise self._lost(f"cannot send: {exc}") from exc
                while True:
                    reply = self._ready.pop(request_id, None)
                    if reply is not None:
                        return reply
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        assert seconds is not None
                        raise RpcTimeout(method, seconds)
                    self._pump(stream, remaining)
            finally:
                self._progress.pop(request_id, None)
                self._ready.pop(request_id, None)
                self._session.abandon(request_id)  # no-op once answered

    def _pump(self, stream: _Stream, timeout: float | None) -> None:
        """Read what arrives within ``timeout`` and dispatch it."""
        try:
            data = stream.recv(timeout)
        except OSError as exc:
            raise self._lost(f"connection lost: {exc}") from exc
        if data is None:
            return
        if not data:
            raise self._lost(self._eof_message())
        try:
            events = self._session.feed(data)
        except ProtocolError as exc:
            self._break(exc)
            raise
        for event in events:
            reply = self._deliver(event)
            if reply is not None:
                self._ready[reply.id] = reply

    def _eof_message(self) -> str:
        process = self._process
        if process is None:
            return "the daemon closed the connection"
        try:
            code = process.wait(1.0)
        except subprocess.TimeoutExpired:
            return "the daemon closed its stdout"
        return f"the daemon exited with code {code}"

    def _lost(self, message: str) -> LibravdbError:
        error = ConnectionClosed(message)
        self._break(error)
        return copy_error(error)

    def _break(self, reason: LibravdbError) -> None:
        """The connection is unusable from now on; close the socket (a child is kept)."""
        if self._broken is None:
            self._broken = reason
        if isinstance(self._stream, _SocketStream):
            self._stream.close()
            self._stream = None
