"""The blocking Client against a real daemon on every transport."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from libravdb_client import (
    Client,
    ConnectError,
    ConnectionClosed,
    FrameTooLarge,
    InvalidParams,
    LibravdbError,
    MethodNotFound,
    RpcError,
    RpcTimeout,
)
from libravdb_client.testing import DaemonProcess

from protocol.core import HealthResult, InitializeResult, StatusResult


@pytest.fixture
def client(
    transport: str,
    unix_daemon: DaemonProcess,
    tcp_daemon: DaemonProcess,
    request: pytest.FixtureRequest,
) -> Iterator[Client]:
    if transport == "stdio":  # one spawned daemon for the module
        yield request.getfixturevalue("stdio_client")
        return
    with Client(unix_daemon.endpoint if transport == "unix" else tcp_daemon.endpoint) as made:
        yield made


def test_round_trips(client: Client, transport: str) -> None:
    init = client.initialize()
    assert isinstance(init, InitializeResult)
    assert init.server_info.name == "libravdbd"
    assert {"initialize", "health", "status", "shutdown"} <= set(init.methods)
    assert init.capabilities.transports == [transport]
    health = client.health()
    assert isinstance(health, HealthResult) and health.ok
    status = client.status()
    assert isinstance(status, StatusResult) and status.ok and status.pid > 0
    assert status.endpoint == ("stdio" if transport == "stdio" else client.endpoint)
    assert client.call("health")["ok"] is True
    assert client.call("status", {})["methods"]["health"]["calls"] >= 1


def test_engines_over_every_transport(client: Client) -> None:
    emb = client.call(
        "embed", {"texts": ["where do I live?", "I moved to Lisbon"], "kind": "query"}
    )
    assert emb["dims"] == 384 and len(emb["vectors"]) == 2
    assert len(emb["vectors"][0]) == 384 and emb["truncated"] == [False, False]
    turns = ["I moved to Lisbon in May.", "The flat is near the river.", "Thanks!"]
    summ = client.call("summarize", {"texts": turns})
    assert summ["method"] == "extractive" and summ["summary"]
    assert 0 < summ["confidence"] <= 1


def test_error_mapping(client: Client) -> None:
    with pytest.raises(MethodNotFound) as info:
        client.call("no_such_method")
    assert info.value.code == -32601 and "no_such_method" in info.value.message
    with pytest.raises(InvalidParams) as bad:
        client.call("health", "x")
    assert isinstance(bad.value, RpcError) and isinstance(bad.value, LibravdbError)
    with pytest.raises(InvalidParams):
        client.call("initialize", {"clientInfo": 5})
    assert client.health().ok  # errors leave the connection usable


def test_timeout_keeps_the_connection_usable(client: Client) -> None:
    with pytest.raises(RpcTimeout) as info:
        client.status(timeout=1e-6)
    assert isinstance(info.value, TimeoutError) and info.value.method == "status"
    # The late status reply is discarded: the next calls get their own replies.
    assert isinstance(client.health(), HealthResult)
    assert isinstance(client.status(), StatusResult)
    assert client.call("initialize")["serverInfo"]["name"] == "libravdbd"


def test_oversized_request_gets_frame_too_large(client: Client) -> None:
    with pytest.raises(FrameTooLarge) as info:
        client.call("health", {"blob": "x" * (9 * 1024 * 1024)})
    assert info.value.data == {"maxFrameBytes": 8 * 1024 * 1024}
    assert client.health().ok


def test_notify_gets_no_reply(client: Client) -> None:
    client.notify("health")
    client.notify("no_such_method", {"a": 1})
    assert client.status().ok  # the next reply is the status reply, not a stray one


def test_call_typed_with_own_struct(client: Client) -> None:
    class Mini(msgspec.Struct):
        ok: bool

    assert client.call_typed("health", None, Mini) == Mini(ok=True)
    assert client.call_typed("health", {}, dict[str, Any])["ok"] is True


def test_threads_share_one_client(unix_daemon: DaemonProcess) -> None:
    errors: list[BaseException] = []
    with Client(unix_daemon.endpoint) as client:

        def work() -> None:
            try:
                for _ in range(20):
                    assert client.health().ok
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []


def test_default_endpoint_from_env(
    unix_daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LIBRAVDB_RPC_ENDPOINT", unix_daemon.endpoint)
    with Client() as client:
        assert client.endpoint == unix_daemon.endpoint
        assert client.health().ok


def test_closed_client_refuses_calls(unix_daemon: DaemonProcess) -> None:
    client = Client.connect(unix_daemon.endpoint)
    client.close()
    client.close()  # idempotent
    assert client.closed
    with pytest.raises(ConnectionClosed):
        client.health()


# -- connection failures ------------------------------------------------------------------


def test_connection_refused(tmp_path: Path, free_port: int) -> None:
    with pytest.raises(ConnectError, match="cannot connect to unix:"):
        Client.connect(f"unix:{tmp_path / 'none.sock'}")
    with pytest.raises(ConnectError, match="refused"):
        Client.connect(f"tcp:127.0.0.1:{free_port}")
    lazy = Client(f"unix:{tmp_path / 'none.sock'}")  # connects on first use
    with pytest.raises(ConnectError):
        lazy.health()


def test_daemon_going_away_is_connection_closed(tmp_path: Path, home: Path) -> None:
    with DaemonProcess.start("tcp", data_dir=tmp_path / "data", home=home) as daemon:
        client = Client.connect(daemon.endpoint)
        assert client.shutdown().ok
        assert daemon.process.wait(10) == 0
        with pytest.raises(ConnectionClosed):
            client.health()
        with pytest.raises(ConnectionClosed):  # stays closed
            client.health()
        client.close()


# -- spawned daemons ----------------------------------------------------------------------


def test_spawn_owns_the_child(
    spawn_kwargs: dict[str, Any], tmp_path: Path, assert_reaped: Callable[[int], None]
) -> None:
    with Client.spawn(**spawn_kwargs) as client:
        assert client.process is not None
        pid = client.process.pid
        assert client.status().pid == pid
        assert client.endpoint.startswith("stdio:")
    assert client.process.returncode == 0
    assert_reaped(pid)
    log = (tmp_path / "daemon.log").read_text()
    assert '"daemon_ready"' in log and '"daemon_stopped"' in log  # stderr went to the file


def test_spawned_child_is_killed_when_it_will_not_stop(
    spawn_kwargs: dict[str, Any], assert_reaped: Callable[[int], None]
) -> None:
    client = Client.spawn(shutdown_timeout=0.2, **spawn_kwargs)
    assert client.process is not None
    assert client.health().ok
    os.kill(client.process.pid, signal.SIGSTOP)  # a hung daemon: ignores EOF and SIGTERM
    client.close()
    assert client.process.returncode == -signal.SIGKILL
    assert_reaped(client.process.pid)


def test_spawn_shutdown_then_close(
    spawn_kwargs: dict[str, Any], assert_reaped: Callable[[int], None]
) -> None:
    with Client.spawn(**spawn_kwargs) as client:
        assert client.shutdown().ok
        with pytest.raises(ConnectionClosed, match="exited with code 0"):
            client.health()
    assert client.process is not None and client.process.returncode == 0
    assert_reaped(client.process.pid)


def test_spawn_failures(spawn_kwargs: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(ConnectError, match="cannot start"):
        Client.spawn(command=[str(tmp_path / "no-such-daemon")], **spawn_kwargs)
    with (
        Client.spawn(["--log-level", "loud"], **spawn_kwargs) as client,
        pytest.raises(ConnectionClosed, match="exited with code 1"),
    ):
        client.health()


def test_large_reply(spawn_kwargs: dict[str, Any]) -> None:
    """A reply line far beyond asyncio's 64 KiB default limit (and the 8 MiB request cap)."""
    cap = 12 * 1024 * 1024
    args = ["--max-frame-bytes", str(cap)]
    with Client.spawn(args, **spawn_kwargs) as client:
        text = "large reply " * (400 * 1024)  # 4.7 MiB; a listing carries it twice
        client.call("insert_text", {"collection": "user:big", "id": "r", "text": text})
        listed = client.call("list_collection", {"collection": "user:big"})
        assert listed["results"][0]["text"] == text
        assert listed["results"][0]["metadata"]["text"] == text
        assert client.health().ok


def test_daemon_process_passes_extra_args_to_the_daemon(tmp_path: Path, home: Path) -> None:
    # Regression: DaemonProcess.start(args=...) used to drop ``args``; a debug log level
    # is visible in the daemon's own stderr, so it proves the flag reached the child.
    with DaemonProcess.start(
        "unix", data_dir=tmp_path / "data", home=home, args=["--log-level", "debug"]
    ) as daemon:
        with Client(daemon.endpoint) as client:
            client.health()
        levels = {json.loads(line).get("level") for line in daemon.stderr_text().splitlines()}
    assert "debug" in levels
