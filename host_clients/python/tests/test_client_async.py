"""The asyncio AsyncClient against a real daemon on every transport."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from libravdb_client import (
    AsyncClient,
    ConnectError,
    ConnectionClosed,
    FrameTooLarge,
    InvalidParams,
    MethodNotFound,
    RpcTimeout,
)
from libravdb_client.testing import DaemonProcess

from protocol.core import HealthResult, InitializeResult, StatusResult

# One event loop for the module, so that one spawned daemon serves all the stdio cases.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def spawned() -> AsyncIterator[list[AsyncClient]]:
    """Holds the module's one spawned (stdio) client, started on first use."""
    clients: list[AsyncClient] = []
    yield clients
    for client in clients:
        await client.close()


@pytest_asyncio.fixture(loop_scope="module")
async def aclient(
    transport: str,
    unix_daemon: DaemonProcess,
    tcp_daemon: DaemonProcess,
    spawned: list[AsyncClient],
    tmp_path_factory: pytest.TempPathFactory,
    home: Path,
) -> AsyncIterator[AsyncClient]:
    if transport == "stdio":
        if not spawned:
            base = tmp_path_factory.mktemp("astdio")
            env = {"HOME": str(home)}
            spawned.append(AsyncClient.spawn(data_dir=base / "data", env=env, stderr=base / "log"))
        yield await spawned[0].open()
        return
    async with AsyncClient(
        unix_daemon.endpoint if transport == "unix" else tcp_daemon.endpoint
    ) as made:
        yield made


async def test_round_trips_and_errors(aclient: AsyncClient, transport: str) -> None:
    init = await aclient.initialize()
    assert isinstance(init, InitializeResult) and init.capabilities.transports == [transport]
    assert (await aclient.health()).ok
    status = await aclient.status()
    assert isinstance(status, StatusResult) and status.ok
    assert (await aclient.call("health"))["ok"] is True
    with pytest.raises(MethodNotFound):
        await aclient.call("no_such_method")
    with pytest.raises(InvalidParams):
        await aclient.call("health", "x")
    with pytest.raises(FrameTooLarge):
        await aclient.call("health", {"blob": "x" * (9 * 1024 * 1024)})
    await aclient.notify("health")
    assert isinstance(await aclient.health(), HealthResult)


async def test_timeout_keeps_the_connection_usable(aclient: AsyncClient) -> None:
    with pytest.raises(RpcTimeout):
        await aclient.status(timeout=1e-6)
    assert isinstance(await aclient.health(), HealthResult)  # the late status reply is dropped
    assert isinstance(await aclient.status(), StatusResult)
    assert aclient.in_flight == 0


async def test_pipelining_50_concurrent_calls(aclient: AsyncClient) -> None:
    methods = ["health", "status", "initialize", "no_such_method", "health"] * 10
    results = await asyncio.gather(*(aclient.call(m) for m in methods), return_exceptions=True)
    assert len(results) == 50
    for method, result in zip(methods, results, strict=True):
        if method == "no_such_method":
            assert isinstance(result, MethodNotFound)
        elif method == "initialize":
            assert isinstance(result, dict) and "methods" in result
        else:
            assert isinstance(result, dict) and result["ok"] is True
            assert ("uptimeS" in result) == (method == "status")
    assert aclient.in_flight == 0


async def test_cancelled_call_leaves_the_connection_usable(aclient: AsyncClient) -> None:
    task = asyncio.create_task(aclient.status())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await aclient.health()).ok


async def test_await_and_connect_forms(unix_daemon: DaemonProcess) -> None:
    client = await AsyncClient.connect(unix_daemon.endpoint)
    assert (await client.health()).ok
    await client.close()
    await client.close()
    with pytest.raises(ConnectionClosed):
        await client.health()
    lazy = AsyncClient(unix_daemon.endpoint)  # opens on the first call
    try:
        assert (await lazy.health()).ok
    finally:
        await lazy.close()


async def test_connection_refused(tmp_path: Path, free_port: int) -> None:
    with pytest.raises(ConnectError, match="cannot connect"):
        await AsyncClient.connect(f"unix:{tmp_path / 'none.sock'}")
    with pytest.raises(ConnectError):
        async with AsyncClient(f"tcp:127.0.0.1:{free_port}"):
            pass


async def test_spawn_lifetime(
    spawn_kwargs: dict[str, Any], assert_reaped: Callable[[int], None]
) -> None:
    client = await AsyncClient.spawn(**spawn_kwargs)
    assert client.process is not None
    pid = client.process.pid
    assert (await client.status()).pid == pid
    await client.close()
    assert client.process.returncode == 0
    assert_reaped(pid)


async def test_daemon_death_fails_waiting_calls(
    spawn_kwargs: dict[str, Any], assert_reaped: Callable[[int], None]
) -> None:
    async with AsyncClient.spawn(shutdown_timeout=1.0, **spawn_kwargs) as client:
        assert (await client.health()).ok
        assert client.process is not None
        os.kill(client.process.pid, signal.SIGSTOP)
        calls = [asyncio.create_task(client.health(timeout=None)) for _ in range(5)]
        await asyncio.sleep(0.05)
        assert client.in_flight == 5
        os.kill(client.process.pid, signal.SIGKILL)
        for call in calls:
            with pytest.raises(ConnectionClosed, match="exited with code -9"):
                await call
        with pytest.raises(ConnectionClosed):
            await client.health()
    assert_reaped(client.process.pid)


async def test_large_reply(spawn_kwargs: dict[str, Any]) -> None:
    """Far beyond asyncio's 64 KiB default StreamReader limit (a 9 MiB one: sync tests)."""
    async with AsyncClient.spawn(**spawn_kwargs) as client:
        text = "large reply " * (100 * 1024)  # 1.2 MiB, twice in the listing
        await client.call("insert_text", {"collection": "user:big", "id": "r", "text": text})
        listed = await client.call("list_collection", {"collection": "user:big"})
        assert listed["results"][0]["text"] == text
        assert (await client.health()).ok
