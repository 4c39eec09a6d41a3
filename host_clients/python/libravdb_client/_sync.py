"""The blocking client: one connection, calls serialized by a lock."""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import IO, Any, Literal, Protocol, Self, TypeVar

from libravdb_client._core import (
    CLIENT_NAME,
    CLIENT_VERSION,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_FRAME_BYTES,
    DEFAULT_TIMEOUT,
    READ_CHUNK,
    USE_CLIENT_DEFAULT,
    NotificationCallback,
    Progress,
    ProgressCallback,
    Reply,
    Session,
    Timeout,
    closed_error,
    copy_error,
    deliver_notification,
    deliver_progress,
    ingest_messages,
    initialize_params,
    resolve_timeout,
    result_any,
    result_as,
)
from libravdb_client._spawn import DEFAULT_SHUTDOWN_TIMEOUT, SpawnSpec, StderrTarget
from libravdb_client.endpoints import Endpoint, default_endpoint, parse_endpoint
from libravdb_client.errors import (
    ConnectError,
    ConnectionClosed,
    LibravdbError,
    ProtocolError,
    RpcTimeout,
)
from protocol.assemble import (
    AssembleParams,
    AssembleResult,
    MemoryGetParams,
    MemoryGetResult,
    SearchFilters,
    SearchParams,
    SearchResult,
)
from protocol.authored import (
    AuthoredDeleteParams,
    AuthoredDeleteResult,
    AuthoredIngestParams,
    AuthoredIngestResult,
    AuthoredListParams,
    AuthoredListResult,
    DreamPromoteParams,
    DreamPromoteResult,
    LifecycleHintParams,
    LifecycleHintResult,
    LifecycleJournalParams,
    LifecycleJournalResult,
    SourceInfo,
)
from protocol.core import HealthResult, InitializeResult, ShutdownResult, StatusResult
from protocol.engines import EmbedParams, EmbedResult, SummarizeParams, SummarizeResult
from protocol.memory import (
    ListScope,
    MemoryListParams,
    MemoryListResult,
    MemoryUpdateParams,
    MemoryUpdateResult,
)
from protocol.memory_stats import MemoryStatsParams, MemoryStatsResult, StatsBucket
from protocol.sessions import (
    CompactParams,
    CompactResult,
    ExpandParams,
    ExpandResult,
    ForgetParams,
    ForgetResult,
    IngestMessage,
    IngestResult,
    RecordRef,
)
from protocol.sessions_list import SessionsListParams, SessionsListResult

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


class Client:
    """A blocking JSON-RPC client for libravdbd.

    ``Client("unix:/path")`` or ``Client("tcp:127.0.0.1:37421")`` connects on first use
    (or on ``with``/``open()``); without an endpoint it uses ``$LIBRAVDB_RPC_ENDPOINT`` or
    the daemon's default socket. ``Client.spawn(...)`` starts a private daemon over stdio.

    Thread-safe: calls from several threads are serialized on the one connection.
    """

    def __init__(
        self,
        endpoint: str | Endpoint | None = None,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        on_notification: NotificationCallback | None = None,
        auth_token: str | None = None,
    ) -> None:
        target = parse_endpoint(default_endpoint() if endpoint is None else endpoint)
        self._setup(target, timeout, connect_timeout, max_frame_bytes, on_notification)
        self.auth_token: str | None = auth_token

    def _setup(
        self,
        target: Endpoint | SpawnSpec,
        timeout: float | None,
        connect_timeout: float,
        max_frame_bytes: int,
        on_notification: NotificationCallback | None,
    ) -> None:
        self._target = target
        self.timeout = resolve_timeout(timeout, None)
        self.connect_timeout = connect_timeout
        self.on_notification = on_notification
        self._session = Session(max_frame_bytes)
        self._lock = threading.RLock()
        self._stream: _Stream | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._ready: dict[int, Reply] = {}
        self._progress: dict[int, ProgressCallback] = {}
        self._opened = False
        self._closed = False
        self._broken: LibravdbError | None = None
        # a daemon with server.auth_token_file wants initialize{authToken} first
        self.auth_token = None

    # -- construction ---------------------------------------------------------------
    @classmethod
    def connect(
        cls,
        endpoint: str | Endpoint | None = None,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        on_notification: NotificationCallback | None = None,
        auth_token: str | None = None,
    ) -> Self:
        """A client connected now (raises ConnectError if the daemon is not there)."""
        client = cls(
            endpoint,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_frame_bytes=max_frame_bytes,
            on_notification=on_notification,
            auth_token=auth_token,
        )
        return client.open()

    @classmethod
    def spawn(  # noqa: PLR0913 - keyword-only spawn options, as httpx clients take theirs
        cls,
        args: Sequence[str] = (),
        *,
        data_dir: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        stderr: StderrTarget = None,
        command: Sequence[str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
        timeout: float | None = DEFAULT_TIMEOUT,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        on_notification: NotificationCallback | None = None,
    ) -> Self:
        """Start ``python -m sidecar serve --stdio [--data-dir D] *args`` and talk to it.

        The client owns the child: ``close()`` closes its stdin (the daemon drains and
        exits), waits ``shutdown_timeout`` s, then terminates and finally kills it.
        ``env`` is laid over the current environment. ``stderr`` (the daemon's logs) is
        inherited by default, or a path (appended to), a file object, a descriptor or
        ``subprocess.DEVNULL``; with ``subprocess.PIPE`` you must drain
        ``client.process.stderr`` yourself. ``command`` replaces ``python -m sidecar``.
        """
        spec = SpawnSpec(
            args=tuple(args),
            data_dir=data_dir,
            env=env,
            stderr=stderr,
            command=None if command is None else tuple(command),
            cwd=cwd,
            shutdown_timeout=shutdown_timeout,
        )
        client = cls.__new__(cls)
        client._setup(spec, timeout, DEFAULT_CONNECT_TIMEOUT, max_frame_bytes, on_notification)
        return client.open()

    # -- properties -----------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        """``unix:…``/``tcp:…``, or ``stdio:<command line>`` for a spawned daemon."""
        target = self._target
        return target.describe() if isinstance(target, SpawnSpec) else str(target)

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The spawned daemon, if this client started one."""
        return self._process

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open" if self._opened else "new"
        return f"<{type(self).__name__} {self.endpoint} {state}>"

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
        if self.auth_token is not None and not isinstance(target, SpawnSpec):
            self._authenticate()
        assert self._stream is not None
        return self._stream

    def _authenticate(self) -> None:
        """The first request of a connection to a daemon with an auth token."""
        params = initialize_params(CLIENT_NAME, CLIENT_VERSION, self.auth_token)
        result_as(
            self._roundtrip("initialize", params, self.connect_timeout, None),
            InitializeResult,
            "initialize",
        )

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
            if isinstance(event, Reply):
                self._ready[event.id] = event
            elif isinstance(event, Progress):
                token = event.params.token
                callback = self._progress.get(token) if isinstance(token, int) else None
                deliver_progress(callback, event)
            else:
                deliver_notification(self.on_notification, event)

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

    # -- typed convenience ----------------------------------------------------------
    def initialize(
        self,
        *,
        client_name: str = CLIENT_NAME,
        client_version: str = CLIENT_VERSION,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> InitializeResult:
        params = initialize_params(client_name, client_version, self.auth_token)
        return self.call_typed("initialize", params, InitializeResult, timeout=timeout)

    def health(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> HealthResult:
        return self.call_typed("health", None, HealthResult, timeout=timeout)

    def status(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> StatusResult:
        return self.call_typed("status", None, StatusResult, timeout=timeout)

    def shutdown(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> ShutdownResult:
        """Ask the daemon to drain and exit (every client of a socket daemon loses it)."""
        return self.call_typed("shutdown", None, ShutdownResult, timeout=timeout)

    # -- v2 methods, typed (params as keywords, results as protocol Structs) ----------
    def ingest(
        self,
        session_id: str,
        messages: Sequence[IngestMessage | Mapping[str, Any]],
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        advancement_key: str | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        on_progress: ProgressCallback | None = None,
    ) -> IngestResult:
        """Store a batch of messages of one session (``{role, content, id?, ts?}``).

        With ``advancement_key`` the batch is an accepted-turn commit: written once, and
        a retry with the same key answers ``duplicate=True`` without writing."""
        params: dict[str, Any] = {"sessionId": session_id, "messages": ingest_messages(messages)}
        if namespace is not None:
            params["namespace"] = namespace
        if user_id is not None:
            params["userId"] = user_id
        if advancement_key is not None:
            params["advancementKey"] = advancement_key
        return self.call_typed(
            "ingest", params, IngestResult, timeout=timeout, on_progress=on_progress
        )

    def assemble(  # noqa: PLR0913 - keyword-only, one per wire field
        self,
        session_id: str,
        *,
        prompt: str | None = None,
        token_budget: float,
        messages: Sequence[Mapping[str, Any]] | None = None,
        namespace: str | None = None,
        user_id: str | None = None,
        memory_budget_fraction: float = 0.25,
        tail_placement: Literal["messages", "addition"] | None = None,
        window_messages: bool = False,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> AssembleResult:
        """The memory for one model call under ``token_budget`` (docs/protocol.md)."""
        params = AssembleParams(
            session_id=session_id,
            token_budget=token_budget,
            namespace=namespace,
            user_id=user_id,
            messages=None if messages is None else [dict(m) for m in messages],
            prompt=prompt,
            memory_budget_fraction=memory_budget_fraction,
            tail_placement=tail_placement,
            window_messages=window_messages,
        )
        return self.call_typed("assemble", params, AssembleResult, timeout=timeout)

    def search(
        self,
        query: str,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        scopes: Sequence[str] | None = None,
        k: int = 8,
        filters: SearchFilters | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> SearchResult:
        params = SearchParams(
            query=query,
            namespace=namespace,
            user_id=user_id,
            session_id=session_id,
            scopes=None if scopes is None else list(scopes),
            k=k,
            filters=filters,
        )
        return self.call_typed("search", params, SearchResult, timeout=timeout)

    def memory_get(
        self,
        collection: str,
        id: str,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> MemoryGetResult:
        """One record by the ``collection`` and ``id`` of a search hit, within the namespace
        (``NotFound`` for a record of another namespace, as for a missing one)."""
        params = MemoryGetParams(
            collection=collection,
            id=id,
            namespace=namespace,
            user_id=user_id,
            session_id=session_id,
        )
        return self.call_typed("memory.get", params, MemoryGetResult, timeout=timeout)

    def memory_list(  # noqa: PLR0913 - keyword-only options of one RPC
        self,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        scope: ListScope = "durable",
        since: int | None = None,
        until: int | None = None,
        limit: int = 50,
        cursor: str | None = None,
        include_superseded: bool = False,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> MemoryListResult:
        """One page of the namespace's records of ``scope``, newest first; pass the
        result's ``next_cursor`` as ``cursor`` for the next page ("" = the last)."""
        params = MemoryListParams(
            namespace=namespace,
            user_id=user_id,
            session_id=session_id,
            scope=scope,
            since=since,
            until=until,
            limit=limit,
            cursor=cursor,
            include_superseded=include_superseded,
        )
        return self.call_typed("memory.list", params, MemoryListResult, timeout=timeout)

    def memory_update(
        self,
        collection: str,
        id: str,
        text: str,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> MemoryUpdateResult:
        """Replace a durable fact's text (or correct a turn of ``turns:<ns>``); the old
        text is kept as a superseded version (``previous``)."""
        params = MemoryUpdateParams(
            collection=collection, id=id, text=text, namespace=namespace, user_id=user_id
        )
        return self.call_typed("memory.update", params, MemoryUpdateResult, timeout=timeout)

    def sessions_list(
        self,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        limit: int = 20,
        cursor: str | None = None,
        since: int | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> SessionsListResult:
        """One page of the namespace's sessions, most recently active first; pass the
        result's ``next_cursor`` as ``cursor`` for the next page ("" = the last)."""
        params = SessionsListParams(
            namespace=namespace, user_id=user_id, limit=limit, cursor=cursor, since=since
        )
        return self.call_typed("sessions.list", params, SessionsListResult, timeout=timeout)

    def memory_stats(
        self,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        bucket: StatsBucket = "month",
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> MemoryStatsResult:
        """What the memory holds per namespace (every namespace without one), the
        authored rules by tier and the store's size on disk."""
        params = MemoryStatsParams(namespace=namespace, user_id=user_id, bucket=bucket)
        return self.call_typed("memory.stats", params, MemoryStatsResult, timeout=timeout)

    def compact(
        self,
        session_id: str,
        *,
        force: bool = False,
        target_size: int | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        on_progress: ProgressCallback | None = None,
    ) -> CompactResult:
        params = CompactParams(session_id=session_id, force=force, target_size=target_size)
        return self.call_typed(
            "compact", params, CompactResult, timeout=timeout, on_progress=on_progress
        )

    def expand(
        self,
        session_id: str,
        summary_id: str,
        *,
        max_depth: int | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> ExpandResult:
        params = ExpandParams(session_id=session_id, summary_id=summary_id, max_depth=max_depth)
        return self.call_typed("expand", params, ExpandResult, timeout=timeout)

    def forget(  # noqa: PLR0913 - keyword-only options of one RPC
        self,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        include_sessions: bool = False,
        message_ids: Sequence[str] | None = None,
        records: Sequence[tuple[str, str]] | None = None,
        query: str | None = None,
        limit: int = 1,
        dry_run: bool = False,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> ForgetResult:
        """The whole namespace, or just ``message_ids``, ``records`` ((collection, id)
        pairs) or the memories that clearly match ``query`` (none when nothing does,
        and none, refused, when more than ``limit`` do); ``dry_run`` lists what would go
        and changes nothing."""
        params = ForgetParams(
            namespace=namespace,
            user_id=user_id,
            include_sessions=include_sessions,
            message_ids=list(message_ids) if message_ids is not None else None,
            records=[RecordRef(collection=c, id=i) for c, i in records]
            if records is not None
            else None,
            query=query,
            limit=limit,
            dry_run=dry_run,
        )
        return self.call_typed("forget", params, ForgetResult, timeout=timeout)

    def embed(
        self,
        texts: Sequence[str],
        *,
        kind: Literal["query", "document"] = "document",
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> EmbedResult:
        params = EmbedParams(texts=list(texts), kind=kind)
        return self.call_typed("embed", params, EmbedResult, timeout=timeout)

    def summarize(
        self,
        texts: Sequence[str],
        *,
        max_tokens: int | None = None,
        method: Literal["auto", "seq2seq", "extractive"] = "auto",
        density: float | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> SummarizeResult:
        params = SummarizeParams(
            texts=list(texts), max_tokens=max_tokens, method=method, density=density
        )
        return self.call_typed("summarize", params, SummarizeResult, timeout=timeout)

    def authored_ingest(
        self,
        source_doc: str,
        text: str,
        *,
        core: bool | None = None,
        source: SourceInfo | None = None,
        dry_run: bool = False,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        on_progress: ProgressCallback | None = None,
    ) -> AuthoredIngestResult:
        params = AuthoredIngestParams(
            source_doc=source_doc, text=text, core=core, source=source, dry_run=dry_run
        )
        return self.call_typed(
            "authored.ingest",
            params,
            AuthoredIngestResult,
            timeout=timeout,
            on_progress=on_progress,
        )

    def authored_delete(
        self, source_doc: str, *, timeout: Timeout = USE_CLIENT_DEFAULT
    ) -> AuthoredDeleteResult:
        params = AuthoredDeleteParams(source_doc=source_doc)
        return self.call_typed("authored.delete", params, AuthoredDeleteResult, timeout=timeout)

    def authored_list(
        self, *, source_doc: str = "", timeout: Timeout = USE_CLIENT_DEFAULT
    ) -> AuthoredListResult:
        params = AuthoredListParams(source_doc=source_doc)
        return self.call_typed("authored.list", params, AuthoredListResult, timeout=timeout)

    def dream_promote(
        self, params: DreamPromoteParams, *, timeout: Timeout = USE_CLIENT_DEFAULT
    ) -> DreamPromoteResult:
        """``dream.promote``; its many optional fields are set on the params Struct."""
        return self.call_typed("dream.promote", params, DreamPromoteResult, timeout=timeout)

    def lifecycle_hint(
        self, params: LifecycleHintParams, *, timeout: Timeout = USE_CLIENT_DEFAULT
    ) -> LifecycleHintResult:
        """``lifecycle.hint``; its many optional fields are set on the params Struct."""
        return self.call_typed("lifecycle.hint", params, LifecycleHintResult, timeout=timeout)

    def lifecycle_journal(
        self,
        *,
        session_id: str = "",
        hook: str = "",
        limit: int = 50,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> LifecycleJournalResult:
        params = LifecycleJournalParams(session_id=session_id, hook=hook, limit=limit)
        return self.call_typed("lifecycle.journal", params, LifecycleJournalResult, timeout=timeout)
