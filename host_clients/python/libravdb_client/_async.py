"""The asyncio client: one connection, many concurrent calls matched by id."""

# A per-call `timeout=` argument is the API (as in httpx), not an accident: ASYNC109 is off.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import Generator, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

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

# StreamReader buffer size. Replies are read in chunks into the Session's own line
# buffer (capped by max_frame_bytes), so this bounds memory per read, not frame size.
_STREAM_LIMIT = 4 * READ_CHUNK


class AsyncClient:
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
        self._writer: asyncio.StreamWriter | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._read_task: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[Reply]] = {}
        self._progress: dict[int, ProgressCallback] = {}
        self._open_lock: asyncio.Lock | None = None
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
        """A client for ``endpoint``; ``await`` it (or ``async with`` it) to connect."""
        return cls(
            endpoint,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_frame_bytes=max_frame_bytes,
            on_notification=on_notification,
            auth_token=auth_token,
        )

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
        """A client that starts ``python -m sidecar serve --stdio`` when opened.

        ``client = await AsyncClient.spawn(...)`` or ``async with AsyncClient.spawn(...)``.
        Same options and lifetime rules as ``Client.spawn``.
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
        return client

    # -- properties -----------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        target = self._target
        return target.describe() if isinstance(target, SpawnSpec) else str(target)

    @property
    def process(self) -> asyncio.subprocess.Process | None:
        """The spawned daemon, once started."""
        return self._process

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        """Calls waiting for their reply."""
        return len(self._pending)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open" if self._opened else "new"
        return f"<{type(self).__name__} {self.endpoint} {state}>"

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
                if self.auth_token is not None and not isinstance(self._target, SpawnSpec):
                    # first request of the connection; other callers wait on the lock
                    params = initialize_params(CLIENT_NAME, CLIENT_VERSION, self.auth_token)
                    result_as(
                        await self._roundtrip("initialize", params, self.connect_timeout, None),
                        InitializeResult,
                        "initialize",
                    )
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
            try:
                async with asyncio.timeout(spec.shutdown_timeout):
                    await process.wait()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.terminate()
                try:
                    async with asyncio.timeout(spec.shutdown_timeout):
                        await process.wait()
                except TimeoutError:
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
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

    def _dispatch(self, event: Reply | Progress | Any) -> None:
        if isinstance(event, Reply):
            future = self._pending.pop(event.id, None)
            if future is not None and not future.done():
                future.set_result(event)
        elif isinstance(event, Progress):
            token = event.params.token
            callback = self._progress.get(token) if isinstance(token, int) else None
            deliver_progress(callback, event)
        else:
            deliver_notification(self.on_notification, event)

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

    # -- typed convenience ----------------------------------------------------------
    async def initialize(
        self,
        *,
        client_name: str = CLIENT_NAME,
        client_version: str = CLIENT_VERSION,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> InitializeResult:
        params = initialize_params(client_name, client_version, self.auth_token)
        return await self.call_typed("initialize", params, InitializeResult, timeout=timeout)

    async def health(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> HealthResult:
        return await self.call_typed("health", None, HealthResult, timeout=timeout)

    async def status(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> StatusResult:
        return await self.call_typed("status", None, StatusResult, timeout=timeout)

    async def shutdown(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> ShutdownResult:
        """Ask the daemon to drain and exit (every client of a socket daemon loses it)."""
        return await self.call_typed("shutdown", None, ShutdownResult, timeout=timeout)

    # -- v2 methods, typed (params as keywords, results as protocol Structs) ----------
    async def ingest(
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
        return await self.call_typed(
            "ingest", params, IngestResult, timeout=timeout, on_progress=on_progress
        )

    async def assemble(  # noqa: PLR0913 - keyword-only, one per wire field
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
        return await self.call_typed("assemble", params, AssembleResult, timeout=timeout)

    async def search(
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
        return await self.call_typed("search", params, SearchResult, timeout=timeout)

    async def memory_get(
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
        return await self.call_typed("memory.get", params, MemoryGetResult, timeout=timeout)

    async def memory_list(  # noqa: PLR0913 - keyword-only options of one RPC
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
        return await self.call_typed("memory.list", params, MemoryListResult, timeout=timeout)

    async def memory_update(
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
        return await self.call_typed("memory.update", params, MemoryUpdateResult, timeout=timeout)

    async def sessions_list(
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
        return await self.call_typed("sessions.list", params, SessionsListResult, timeout=timeout)

    async def memory_stats(
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
        return await self.call_typed("memory.stats", params, MemoryStatsResult, timeout=timeout)

    async def compact(
        self,
        session_id: str,
        *,
        force: bool = False,
        target_size: int | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        on_progress: ProgressCallback | None = None,
    ) -> CompactResult:
        params = CompactParams(session_id=session_id, force=force, target_size=target_size)
        return await self.call_typed(
            "compact", params, CompactResult, timeout=timeout, on_progress=on_progress
        )

    async def expand(
        self,
        session_id: str,
        summary_id: str,
        *,
        max_depth: int | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> ExpandResult:
        params = ExpandParams(session_id=session_id, summary_id=summary_id, max_depth=max_depth)
        return await self.call_typed("expand", params, ExpandResult, timeout=timeout)

    async def forget(  # noqa: PLR0913 - keyword-only options of one RPC
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
        return await self.call_typed("forget", params, ForgetResult, timeout=timeout)

    async def embed(
        self,
        texts: Sequence[str],
        *,
        kind: Literal["query", "document"] = "document",
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> EmbedResult:
        params = EmbedParams(texts=list(texts), kind=kind)
        return await self.call_typed("embed", params, EmbedResult, timeout=timeout)

    async def summarize(
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
        return await self.call_typed("summarize", params, SummarizeResult, timeout=timeout)

    async def authored_ingest(
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
        return await self.call_typed(
            "authored.ingest",
            params,
            AuthoredIngestResult,
            timeout=timeout,
            on_progress=on_progress,
        )

    async def authored_delete(
        self, source_doc: str, *, timeout: Timeout = USE_CLIENT_DEFAULT
    ) -> AuthoredDeleteResult:
        params = AuthoredDeleteParams(source_doc=source_doc)
        return await self.call_typed(
            "authored.delete", params, AuthoredDeleteResult, timeout=timeout
        )

    async def authored_list(
        self, *, source_doc: str = "", timeout: Timeout = USE_CLIENT_DEFAULT
    ) -> AuthoredListResult:
        params = AuthoredListParams(source_doc=source_doc)
        return await self.call_typed("authored.list", params, AuthoredListResult, timeout=timeout)

    async def dream_promote(
        self, params: DreamPromoteParams, *, timeout: Timeout = USE_CLIENT_DEFAULT
    ) -> DreamPromoteResult:
        """``dream.promote``; its many optional fields are set on the params Struct."""
        return await self.call_typed("dream.promote", params, DreamPromoteResult, timeout=timeout)

    async def lifecycle_hint(
        self, params: LifecycleHintParams, *, timeout: Timeout = USE_CLIENT_DEFAULT
    ) -> LifecycleHintResult:
        """``lifecycle.hint``; its many optional fields are set on the params Struct."""
        return await self.call_typed("lifecycle.hint", params, LifecycleHintResult, timeout=timeout)

    async def lifecycle_journal(
        self,
        *,
        session_id: str = "",
        hook: str = "",
        limit: int = 50,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> LifecycleJournalResult:
        params = LifecycleJournalParams(session_id=session_id, hook=hook, limit=limit)
        return await self.call_typed(
            "lifecycle.journal", params, LifecycleJournalResult, timeout=timeout
        )
