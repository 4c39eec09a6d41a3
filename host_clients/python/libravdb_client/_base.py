"""What ``Client`` and ``AsyncClient`` share besides their typed methods: construction
(``__init__``, ``connect``, ``spawn``), the per-client state and the properties.

Each client adds its transport (``_init_transport``: sockets and a lock, or a reader
task and futures) and says what a new client is before it is returned from
``connect``/``spawn`` (``_constructed``: ``Client`` opens it now, ``AsyncClient`` waits
to be awaited).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Self

from libravdb_client._core import (
    CLIENT_NAME,
    CLIENT_VERSION,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_FRAME_BYTES,
    DEFAULT_TIMEOUT,
    Event,
    NotificationCallback,
    Progress,
    ProgressCallback,
    Reply,
    Session,
    deliver_notification,
    deliver_progress,
    initialize_params,
    resolve_timeout,
)
from libravdb_client._spawn import DEFAULT_SHUTDOWN_TIMEOUT, SpawnSpec, StderrTarget
from libravdb_client.endpoints import Endpoint, default_endpoint, parse_endpoint
from libravdb_client.errors import LibravdbError
from protocol.core import InitializeParams


class ClientBase:
    """One connection to a daemon (a socket, or a child over stdio) and its settings."""

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
        self._progress: dict[int, ProgressCallback] = {}
        self._opened = False
        self._closed = False
        self._broken: LibravdbError | None = None
        # a daemon with server.auth_token_file wants initialize{authToken} first
        self.auth_token = None
        self._init_transport()

    def _init_transport(self) -> None:
        raise NotImplementedError

    def _constructed(self) -> Self:
        """What ``connect`` and ``spawn`` return: the client opened, or ready to open."""
        raise NotImplementedError

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
        """A client for ``endpoint``: ``Client.connect`` connects now (raises ConnectError
        if the daemon is not there); ``await`` (or ``async with``) an ``AsyncClient``'s."""
        client = cls(
            endpoint,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_frame_bytes=max_frame_bytes,
            on_notification=on_notification,
            auth_token=auth_token,
        )
        return client._constructed()

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

        ``Client.spawn(...)`` starts it now; ``await AsyncClient.spawn(...)`` or ``async
        with AsyncClient.spawn(...)`` when awaited. The client owns the child: ``close()``
        closes its stdin (the daemon drains and exits), waits ``shutdown_timeout`` s, then
        terminates and finally kills it. ``env`` is laid over the current environment.
        ``stderr`` (the daemon's logs) is inherited by default, or a path (appended to), a
        file object, a descriptor or ``subprocess.DEVNULL``; with ``subprocess.PIPE`` you
        must drain ``client.process.stderr`` yourself. ``command`` replaces ``python -m
        sidecar``.
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
        return client._constructed()

    # -- shared by both transports --------------------------------------------------
    def _deliver(self, event: Event) -> Reply | None:
        """A reply to hand to its caller; a notification is delivered here (None)."""
        if isinstance(event, Reply):
            return event
        if isinstance(event, Progress):
            token = event.params.token
            callback = self._progress.get(token) if isinstance(token, int) else None
            deliver_progress(callback, event)
        else:
            deliver_notification(self.on_notification, event)
        return None

    def _auth_params(self) -> InitializeParams | None:
        """``initialize`` params a socket connection sends first, when there is a token."""
        if self.auth_token is None or isinstance(self._target, SpawnSpec):
            return None
        return initialize_params(CLIENT_NAME, CLIENT_VERSION, self.auth_token)

    # -- properties -----------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        """``unix:…``/``tcp:…``, or ``stdio:<command line>`` for a spawned daemon."""
        target = self._target
        return target.describe() if isinstance(target, SpawnSpec) else str(target)

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open" if self._opened else "new"
        return f"<{type(self).__name__} {self.endpoint} {state}>"
