"""The UI's connections to the running daemon.

The daemon answers the requests of one connection in order, so a page that waits for a
slow call (a stats pass over a large store) would hold up every other page on a single
connection: the UI keeps a few connections and sends each call on the least busy one. A
connection that breaks (the daemon was restarted) is dropped and the call is tried once
more on a fresh one; when nothing answers the call raises :class:`DaemonDown`, which the
pages show as "the daemon is not running". The UI never starts a daemon: it browses the
memory the user's daemon serves.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog
from libravdb_client import AsyncClient, ConnectError, LibravdbError
from libravdb_client.errors import RpcError, TransportError

T = TypeVar("T")
log = structlog.get_logger("libravdb.ui")

# The first call after the daemon starts may wait for the model to load.
CALL_TIMEOUT_S = 120.0
CONNECTIONS = 4


class DaemonDown(Exception):
    """No daemon answers at the endpoint; the message says where and how to start one."""


class DaemonLink:
    def __init__(self, endpoint: str, auth_token: str | None, size: int = CONNECTIONS) -> None:
        self.endpoint = endpoint
        self._token = auth_token
        self._clients: list[AsyncClient | None] = [None] * size
        self._lock = asyncio.Lock()

    async def _open(self) -> AsyncClient:
        client = AsyncClient.connect(self.endpoint, timeout=CALL_TIMEOUT_S, auth_token=self._token)
        try:
            return await client.open()
        except ConnectError as exc:
            await client.close()
            raise DaemonDown(
                f"the libravdb daemon is not running at {self.endpoint} ({exc}); start it "
                "with `libravdbd serve` (or `libravdb service install`), then reload"
            ) from exc

    async def _pick(self) -> tuple[int, AsyncClient]:
        """The open connection with the fewest calls in flight; a slot without one gets a
        new connection when every open one is busy."""
        async with self._lock:
            best: tuple[int, AsyncClient] | None = None
            for i, client in enumerate(self._clients):
                if client is None or client.closed:
                    continue
                if best is None or client.in_flight < best[1].in_flight:
                    best = (i, client)
            if best is not None and best[1].in_flight == 0:
                return best
            free = next((i for i, c in enumerate(self._clients) if c is None or c.closed), None)
            if free is None:
                assert best is not None
                return best
            client = await self._open()
            self._clients[free] = client
            return free, client

    async def _drop(self, slot: int, client: AsyncClient) -> None:
        if self._clients[slot] is client:
            self._clients[slot] = None
        with contextlib.suppress(LibravdbError):
            await client.close()

    async def call(self, op: Callable[[AsyncClient], Awaitable[T]]) -> T:
        """``op(client)`` on a connection; RpcError (the daemon's refusal) passes through."""
        for attempt in (1, 2):
            slot, client = await self._pick()
            try:
                return await op(client)
            except RpcError:
                raise
            except TransportError as exc:
                log.warning("ui_daemon_connection_lost", attempt=attempt, error=str(exc))
                await self._drop(slot, client)
                if attempt == 2:
                    raise DaemonDown(
                        f"the libravdb daemon at {self.endpoint} stopped answering ({exc}); "
                        "start it with `libravdbd serve`, then reload"
                    ) from exc
        raise AssertionError("unreachable")

    async def close(self) -> None:
        clients, self._clients = self._clients, [None] * len(self._clients)
        for client in clients:
            if client is not None:
                with contextlib.suppress(LibravdbError):
                    await client.close()
