"""The MCP server's one connection to libravdbd: the running daemon, or one it starts.

Every tool call goes through :meth:`DaemonBridge.call`, which turns the daemon's answers
into what a model can read: a daemon error becomes a :class:`ToolError` carrying the
daemon's own one-line message, and a lost connection is reopened once (a daemon that was
restarted under a long-lived MCP host is found again) before the call is retried. The
retry is safe because every write the tools make is idempotent (``remember`` always sends
a message id; ``forget`` deletes only ids it is given).

A daemon is started only by :meth:`DaemonBridge.open`, at the server's start, and then
serves the shared endpoint (``launcher``). A reconnect never starts one: the user stopped
the daemon, and a daemon started in its place would hold the data directory that the
user's own ``libravdbd serve`` (or the OpenClaw plugin) is about to take.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import structlog
from libravdb_client import AsyncClient, ConnectError, LibravdbError, RpcError
from libravdb_client.errors import TransportError
from mcp.server.mcpserver.exceptions import ToolError

from sidecar.mcp.launcher import DaemonUnavailable, start_shared_daemon, start_turn

T = TypeVar("T")
log = structlog.get_logger("libravdb.mcp")

# Long enough for the first call after a start, which may wait for the models to load.
CALL_TIMEOUT_S = 120.0
# How long a daemon it starts may take to listen (opening a large store, a migration).
READY_TIMEOUT_S = 120.0
HOW_TO_START = (
    "start it with `libravdbd serve` (or `libravdb service install` to keep it running), "
    "then call again"
)


@dataclass(frozen=True, slots=True)
class DaemonTarget:
    """Where the daemon is. ``spawn``: "never", "auto" (start the shared daemon at the
    endpoint when nothing answers there at start) or "always" (a private daemon over stdio,
    for a data directory of its own)."""

    endpoint: str
    spawn: str = "auto"
    data_dir: str | None = None
    auth_token: str | None = None


class DaemonBridge:
    def __init__(self, target: DaemonTarget) -> None:
        self.target = target
        self._client: AsyncClient | None = None
        self.private = target.spawn == "always"
        self.started: subprocess.Popen[bytes] | None = None  # the shared daemon it started

    @property
    def describe(self) -> str:
        if self.private:
            return "a private daemon started over stdio"
        if self.started is not None:
            return f"{self.target.endpoint} (started by this server, process {self.started.pid})"
        return self.target.endpoint

    async def open(self) -> None:
        """Connect (or start the daemon) now, so a missing daemon is reported at startup."""
        self._client = await self._first_connection()
        try:
            # One round trip proves the daemon speaks the protocol (and took the token).
            await self._client.health()
        except LibravdbError as exc:
            if self.private:
                raise DaemonUnavailable(
                    f"the daemon it started did not answer ({exc}); its reason is in the log "
                    "lines above"
                ) from exc
            where = self.describe
            raise DaemonUnavailable(f"the daemon at {where} did not answer ({exc})") from exc

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()
        if self.started is not None:
            self.started.poll()  # reaped if it has exited; a running one is left serving

    async def _first_connection(self) -> AsyncClient:
        if self.private:
            return await self._spawn_private()
        try:
            return await self._connect()
        except ConnectError as exc:
            if self.target.spawn == "never":
                raise DaemonUnavailable(
                    f"no daemon answers at {self.target.endpoint} ({exc}); start it with "
                    "`libravdbd serve`, or drop --endpoint to let `libravdb mcp` start one"
                ) from exc
        async with start_turn():
            # Another MCP server may have started it while this one waited for its turn.
            with contextlib.suppress(ConnectError):
                return await self._connect()
            log.info("mcp_daemon_spawn", reason="nothing answers", endpoint=self.target.endpoint)
            try:
                self.started = await start_shared_daemon(
                    self.target.endpoint, self.target.data_dir, READY_TIMEOUT_S
                )
            except DaemonUnavailable:
                # A daemon started by another client (the OpenClaw plugin) may have taken
                # the endpoint first: then the one started here stepped aside.
                with contextlib.suppress(ConnectError):
                    return await self._connect()
                raise
            try:
                return await self._connect()
            except ConnectError as exc:
                raise DaemonUnavailable(
                    f"the daemon it started listens but does not answer at "
                    f"{self.target.endpoint} ({exc})"
                ) from exc

    async def _connect(self) -> AsyncClient:
        client = AsyncClient.connect(
            self.target.endpoint, timeout=CALL_TIMEOUT_S, auth_token=self.target.auth_token
        )
        try:
            return await client.open()
        except ConnectError:
            await client.close()
            raise

    async def _spawn_private(self) -> AsyncClient:
        client = AsyncClient.spawn(data_dir=self.target.data_dir, timeout=CALL_TIMEOUT_S)
        try:
            await client.open()
        except ConnectError as exc:
            await client.close()
            raise DaemonUnavailable(f"cannot start a daemon: {exc}") from exc
        return client

    async def _reconnect(self) -> AsyncClient:
        """The daemon again, after a lost connection: connect, never start one."""
        if self.private:
            raise DaemonUnavailable(
                "the private daemon this server started (--spawn) has stopped; restart the "
                "MCP server (the daemon's reason is in its log lines)"
            )
        try:
            return await self._connect()
        except ConnectError as exc:
            raise DaemonUnavailable(
                f"the libravdb daemon is not running at {self.target.endpoint} ({exc}); "
                + HOW_TO_START
            ) from exc

    async def call(self, what: str, op: Callable[[AsyncClient], Awaitable[T]]) -> T:
        """``op(client)``; ``what`` names the action in error messages."""
        for attempt in (1, 2):
            try:
                if self._client is None or self._client.closed:
                    self._client = await self._reconnect()
                return await op(self._client)
            except RpcError as exc:
                raise ToolError(f"{what} failed: {exc.message}") from exc
            except DaemonUnavailable as exc:
                await self._discard()
                if attempt == 2:
                    raise ToolError(f"{what} failed: {exc}") from exc
            except TransportError as exc:
                log.warning("mcp_daemon_connection_lost", attempt=attempt, error=str(exc))
                await self._discard()
                if attempt == 2:
                    raise ToolError(
                        f"{what} failed: the libravdb daemon is not reachable at "
                        f"{self.target.endpoint} ({exc}); " + HOW_TO_START
                    ) from exc
            except LibravdbError as exc:
                raise ToolError(f"{what} failed: {exc}") from exc
        raise AssertionError("unreachable")

    async def _discard(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(LibravdbError):
                await client.close()
