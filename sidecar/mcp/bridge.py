"""The MCP server's one connection to libravdbd: the running daemon, or one it starts.

Every tool call goes through :meth:`DaemonBridge.call`, which turns the daemon's answers
into what a model can read: a daemon error becomes a :class:`ToolError` carrying the
daemon's own one-line message, and a lost connection is reopened once (a daemon that was
restarted under a long-lived MCP host is found again) before the call is retried. The
retry is safe because every write the tools make is idempotent (``remember`` always sends
a message id).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import structlog
from libravdb_client import AsyncClient, ConnectError, LibravdbError, RpcError
from libravdb_client.errors import TransportError
from mcp.server.mcpserver.exceptions import ToolError

T = TypeVar("T")
log = structlog.get_logger("libravdb.mcp")

# Long enough for the first call after a spawn, which may wait for the models to load.
CALL_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class DaemonTarget:
    """Where the daemon is. ``spawn``: "never", "auto" (when nothing answers at the
    endpoint) or "always" (a private daemon over stdio, never the shared socket)."""

    endpoint: str
    spawn: str = "auto"
    data_dir: str | None = None
    auth_token: str | None = None


class DaemonUnavailable(Exception):
    """No daemon answers and none could be started; the message says what was tried."""


class DaemonBridge:
    def __init__(self, target: DaemonTarget) -> None:
        self.target = target
        self._client: AsyncClient | None = None
        self.spawned = False

    @property
    def describe(self) -> str:
        return "a daemon started over stdio" if self.spawned else self.target.endpoint

    async def open(self) -> None:
        """Connect (or start the daemon) now, so a missing daemon is reported at startup."""
        self._client = await self._connect()
        try:
            # One round trip proves the daemon speaks the protocol (and took the token).
            await self._client.health()
        except LibravdbError as exc:
            where = "the daemon it started" if self.spawned else f"the daemon at {self.describe}"
            raise DaemonUnavailable(
                f"{where} did not answer ({exc}); its reason is in the log lines above"
                if self.spawned
                else f"{where} did not answer ({exc})"
            ) from exc

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def _connect(self) -> AsyncClient:
        target = self.target
        if target.spawn != "always":
            client = AsyncClient.connect(
                target.endpoint, timeout=CALL_TIMEOUT_S, auth_token=target.auth_token
            )
            try:
                return await client.open()
            except ConnectError as exc:
                await client.close()
                if target.spawn == "never":
                    raise DaemonUnavailable(
                        f"no daemon answers at {target.endpoint} ({exc}); start it with "
                        "`libravdbd serve`, or drop --endpoint to let `libravdb mcp` start one"
                    ) from exc
                log.info("mcp_daemon_spawn", reason="nothing answers", endpoint=target.endpoint)
        return await self._spawn()

    async def _spawn(self) -> AsyncClient:
        client = AsyncClient.spawn(data_dir=self.target.data_dir, timeout=CALL_TIMEOUT_S)
        try:
            await client.open()
        except ConnectError as exc:
            await client.close()
            raise DaemonUnavailable(f"cannot start a daemon: {exc}") from exc
        self.spawned = True
        return client

    async def call(self, what: str, op: Callable[[AsyncClient], Awaitable[T]]) -> T:
        """``op(client)``; ``what`` names the action in error messages."""
        for attempt in (1, 2):
            try:
                if self._client is None or self._client.closed:
                    self._client = await self._connect()
                return await op(self._client)
            except RpcError as exc:
                raise ToolError(f"{what} failed: {exc.message}") from exc
            except (TransportError, DaemonUnavailable) as exc:
                log.warning("mcp_daemon_connection_lost", attempt=attempt, error=str(exc))
                await self._discard()
                if attempt == 2:
                    raise ToolError(
                        f"{what} failed: the libravdb daemon is not reachable ({exc})"
                    ) from exc
            except LibravdbError as exc:
                raise ToolError(f"{what} failed: {exc}") from exc
        raise AssertionError("unreachable")

    async def _discard(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(LibravdbError):
                await client.close()
