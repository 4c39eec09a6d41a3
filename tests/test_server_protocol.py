"""Protocol behaviour of the real daemon process over a Unix socket and loopback TCP."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import DaemonProcess, RawConnection, start_daemon

pytestmark = pytest.mark.sqlite_only("framing and protocol errors, not the store")

DEBUG = {"LIBRAVDB_DEBUG_METHODS": "1"}
SMALL_FRAME = 4096


@pytest.fixture(scope="module")
def unix_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    tmp = tmp_path_factory.mktemp("unix")
    daemon = start_daemon(
        tmp,
        "--socket",
        str(tmp / "run" / "d.sock"),
        "--max-frame-bytes",
        str(SMALL_FRAME),
        env_extra=DEBUG,
    )
    yield daemon
    daemon.stop()


@pytest.fixture(scope="module")
def tcp_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    tmp = tmp_path_factory.mktemp("tcp")
    daemon = start_daemon(tmp, "--tcp", "127.0.0.1:0", env_extra=DEBUG)
    yield daemon
    daemon.stop()


@pytest.fixture(params=["unix", "tcp"])
def endpoint(request: pytest.FixtureRequest) -> str:
    daemon: DaemonProcess = request.getfixturevalue(f"{request.param}_daemon")
    return daemon.endpoint


def test_endpoint_line_shapes(unix_daemon: DaemonProcess, tcp_daemon: DaemonProcess) -> None:
    assert unix_daemon.endpoint.startswith("unix:/")
    host, port = tcp_daemon.endpoint.removeprefix("tcp:").rsplit(":", 1)
    assert host == "127.0.0.1"
    assert int(port) > 0  # the real port, not the 0 that was asked for


def test_initialize_lists_methods(endpoint: str) -> None:
    with RawConnection(endpoint) as conn:
        reply = conn.call("initialize", {"clientInfo": {"name": "pytest"}})
    result = reply["result"]
    assert reply["jsonrpc"] == "2.0"
    assert result["serverInfo"]["name"] == "libravdbd"
    assert {"initialize", "health", "status", "shutdown"} <= set(result["methods"])
    assert result["capabilities"]["maxFrameBytes"] > 0


def test_health_and_status(endpoint: str) -> None:
    with RawConnection(endpoint) as conn:
        health = conn.call("health")["result"]
        status = conn.call("status")["result"]
    assert health["ok"] is True
    assert health["message"] == "ok"
    for key in ("uptimeS", "version", "pid", "dataDir", "records", "models", "methods"):
        assert key in status
    # The reference daemon's fields are always present.
    for key in ("turnCount", "memoryCount", "lifecycleHintCount", "gatingThreshold"):
        assert key in status
    assert status["methods"]["health"]["calls"] >= 1
    assert status["methods"]["health"]["p95Ms"] >= status["methods"]["health"]["p50Ms"] >= 0


def test_malformed_json_gets_parse_error_and_connection_survives(endpoint: str) -> None:
    with RawConnection(endpoint) as conn:
        conn.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
        reply = conn.read()
        assert reply["id"] is None
        assert reply["error"]["code"] == -32700
        assert reply["error"]["message"]
        assert conn.call("health")["result"]["ok"] is True


def test_invalid_utf8_gets_parse_error(endpoint: str) -> None:
    with RawConnection(endpoint) as conn:
        conn.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"he\xffalth"}\n')
        reply = conn.read()
        assert reply == {"jsonrpc": "2.0", "id": None, "error": reply["error"]}
        assert reply["error"]["code"] == -32700
        assert conn.call("health")["result"]["ok"] is True


def test_oversized_frame_is_refused_and_connection_stays_usable(
    unix_daemon: DaemonProcess,
) -> None:
    with RawConnection(unix_daemon.endpoint) as conn:
        big = json.dumps(
            {"jsonrpc": "2.0", "id": 7, "method": "health", "params": {"pad": "x" * 50_000}}
        )
        conn.send_raw(big.encode() + b"\n")
        reply = conn.read()
        assert reply["error"]["code"] == -32001
        assert str(SMALL_FRAME) in reply["error"]["message"]
        # A frame just under the cap is fine.
        ok = json.dumps({"jsonrpc": "2.0", "id": 8, "method": "health", "params": {"p": "y"}})
        conn.send_raw(ok.encode() + b"\n")
        assert conn.read()["id"] == 8


def test_unknown_method(endpoint: str) -> None:
    with RawConnection(endpoint) as conn:
        reply = conn.call("no_such_method")
    assert reply["error"] == {"code": -32601, "message": "unknown method: no_such_method"}


@pytest.mark.parametrize("params", ["a string", 5, [1, 2], True])
def test_params_that_are_not_an_object(endpoint: str, params: object) -> None:
    with RawConnection(endpoint) as conn:
        reply = conn.call("health", params)
    assert reply["error"]["code"] == -32602


def test_wrong_param_field_type(endpoint: str) -> None:
    with RawConnection(endpoint) as conn:
        reply = conn.call("debug.sleep", {"seconds": "soon"})
    assert reply["error"]["code"] == -32602
    assert "seconds" in reply["error"]["message"]


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": 1, "method": 12},
        {"jsonrpc": "1.0", "id": 1, "method": "health"},
        "just a string",
        42,
    ],
)
def test_invalid_requests(endpoint: str, message: object) -> None:
    with RawConnection(endpoint) as conn:
        conn.send(message)
        reply = conn.read()
    assert reply["error"]["code"] == -32600
    assert reply["error"]["message"]


def test_notifications_get_no_reply(endpoint: str) -> None:
    with RawConnection(endpoint) as conn:
        conn.send({"jsonrpc": "2.0", "method": "health"})
        conn.send({"jsonrpc": "2.0", "method": "no_such_method"})
        conn.send({"jsonrpc": "2.0", "id": "after", "method": "health"})
        reply = conn.read()
    assert reply["id"] == "after"  # nothing was sent for the two notifications


def test_batch_is_answered_in_order(endpoint: str) -> None:
    with RawConnection(endpoint) as conn:
        conn.send(
            [
                {"jsonrpc": "2.0", "id": 1, "method": "health"},
                {"jsonrpc": "2.0", "method": "health"},
                {"jsonrpc": "2.0", "id": 2, "method": "nope"},
            ]
        )
        replies = conn.read()
    assert [r["id"] for r in replies] == [1, 2]
    assert replies[1]["error"]["code"] == -32601


def test_ordering_and_read_your_writes_on_one_connection(endpoint: str) -> None:
    with RawConnection(endpoint) as conn:
        before = conn.call("status")["result"]["methods"].get("debug.sleep", {}).get("calls", 0)
        # Pipeline a slow request then a fast one: replies come back in request order,
        # and the status observes the sleep that preceded it.
        conn.send(
            {"jsonrpc": "2.0", "id": "slow", "method": "debug.sleep", "params": {"seconds": 0.2}}
        )
        conn.send({"jsonrpc": "2.0", "id": "fast", "method": "status"})
        first, second = conn.read(), conn.read()
    assert first["id"] == "slow"
    assert second["id"] == "fast"
    assert second["result"]["methods"]["debug.sleep"]["calls"] == before + 1


def test_twenty_concurrent_connections(endpoint: str) -> None:
    errors: list[BaseException] = []
    durations: list[float] = []

    def worker(i: int) -> None:
        try:
            with RawConnection(endpoint) as conn:
                started = time.monotonic()
                reply = conn.call("debug.sleep", {"seconds": 0.3})
                durations.append(time.monotonic() - started)
                assert reply["result"]["slept"] == 0.3
                assert conn.call("health")["result"]["ok"]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(20)]
    peak = 0
    with RawConnection(endpoint) as watcher:
        for t in threads:
            t.start()
        # Served concurrently: the daemon reports several sleeps executing at once (a
        # structural check; "20 sleeps finish in under N seconds" depended on the machine).
        while any(t.is_alive() for t in threads) and peak < 10:
            peak = max(peak, watcher.call("status")["result"]["inflight"])
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert len(durations) == 20
    assert peak >= 10, peak


def test_logs_are_json_with_method_id_and_duration(unix_daemon: DaemonProcess) -> None:
    with RawConnection(unix_daemon.endpoint) as conn:
        conn.call("health")
    time.sleep(0.1)
    events = unix_daemon.log_events()
    assert events, "stderr carries JSON lines"
    rpc = [e for e in events if e.get("event") == "rpc" and e.get("method") == "health"]
    assert rpc
    assert {"request_id", "duration_ms", "level", "timestamp"} <= set(rpc[-1])
    # Every stderr line is JSON.
    lines = [ln for ln in unix_daemon.stderr_text().splitlines() if ln.strip()]
    assert len(events) == len(lines)


def test_debug_level_logs_are_json_too(tmp_path: Path) -> None:
    # Regression: at debug level, standard-library loggers (asyncio) wrote plain text lines.
    daemon = start_daemon(
        tmp_path, "--socket", str(tmp_path / "d.sock"), extra_args=("--log-level", "debug")
    )
    try:
        with RawConnection(daemon.endpoint) as conn:
            conn.call("health")
    finally:
        assert daemon.stop() == 0
    lines = [ln for ln in daemon.stderr_text().splitlines() if ln.strip()]
    events = daemon.log_events()
    assert len(events) == len(lines)
    assert any(e.get("logger") == "asyncio" for e in events)  # a foreign logger, rendered as JSON
    assert any(e.get("level") == "debug" for e in events)


def test_unix_socket_permissions(tmp_path: Path) -> None:
    sock = tmp_path / "private" / "d.sock"
    daemon = start_daemon(tmp_path, "--socket", str(sock))
    try:
        assert (sock.stat().st_mode & 0o777) == 0o600
        assert (sock.parent.stat().st_mode & 0o777) == 0o700
    finally:
        assert daemon.stop() == 0


def test_existing_socket_directory_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    sock = shared / "d.sock"
    daemon = start_daemon(tmp_path, "--socket", str(sock))
    try:
        assert (sock.stat().st_mode & 0o777) == 0o600
        assert (shared.stat().st_mode & 0o777) == 0o755  # never chmod a directory we did not make
    finally:
        assert daemon.stop() == 0
    assert any(e.get("event") == "socket_directory_not_private" for e in daemon.log_events())


def test_sigterm_removes_socket_and_exits_zero(tmp_path: Path) -> None:
    sock = tmp_path / "run" / "d.sock"
    daemon = start_daemon(tmp_path, "--socket", str(sock))
    assert sock.exists()
    assert daemon.stop() == 0
    assert not sock.exists()
    assert any(e.get("event") == "daemon_stopped" for e in daemon.log_events())


def test_stale_socket_is_replaced(tmp_path: Path) -> None:
    sock = tmp_path / "run" / "d.sock"
    sock.parent.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(sock))  # bound but never listening: nobody answers
    stale.close()
    assert sock.exists()
    daemon = start_daemon(tmp_path, "--socket", str(sock))
    try:
        with RawConnection(daemon.endpoint) as conn:
            assert conn.call("health")["result"]["ok"]
    finally:
        daemon.stop()


def test_live_socket_is_refused(tmp_path: Path) -> None:
    sock = tmp_path / "run" / "d.sock"
    first = start_daemon(tmp_path / "a", "--socket", str(sock))
    try:
        second = start_daemon(tmp_path / "b", "--socket", str(sock), wait=False)
        out, _ = second.proc.communicate(timeout=30)
        assert second.proc.returncode == 1
        assert out == b""  # no endpoint line
        assert "already serving" in second.stderr_text()
        # The first daemon still owns its socket.
        with RawConnection(first.endpoint) as conn:
            assert conn.call("health")["result"]["ok"]
    finally:
        first.stop()


def test_regular_file_at_socket_path_is_not_deleted(tmp_path: Path) -> None:
    target = tmp_path / "run" / "not-a-socket"
    target.parent.mkdir()
    target.write_text("precious")
    daemon = start_daemon(tmp_path, "--socket", str(target), wait=False)
    daemon.proc.communicate(timeout=30)
    assert daemon.proc.returncode == 1
    assert target.read_text() == "precious"


@pytest.mark.parametrize("address", ["0.0.0.0:0", "192.0.2.1:9000", "example.com:80"])
def test_tcp_refuses_non_loopback(tmp_path: Path, address: str) -> None:
    daemon = start_daemon(tmp_path, "--tcp", address, wait=False)
    daemon.proc.communicate(timeout=30)
    assert daemon.proc.returncode == 1
    assert "loopback" in daemon.stderr_text()


def test_shutdown_finishes_request_in_flight(tmp_path: Path) -> None:
    daemon = start_daemon(tmp_path, "--socket", str(tmp_path / "d.sock"), env_extra=DEBUG)
    slow = RawConnection(daemon.endpoint)
    slow.send({"jsonrpc": "2.0", "id": "slow", "method": "debug.sleep", "params": {"seconds": 1.0}})
    with RawConnection(daemon.endpoint) as conn:
        deadline = time.monotonic() + 10
        while conn.call("status")["result"]["inflight"] < 1:  # the sleep is in flight
            assert time.monotonic() < deadline
        assert conn.call("shutdown")["result"] == {"ok": True}
    # The in-flight request still gets its answer before the daemon exits.
    assert slow.read() == {"jsonrpc": "2.0", "id": "slow", "result": {"slept": 1.0}}
    slow.close()
    assert daemon.proc.wait(15) == 0
    assert not (tmp_path / "d.sock").exists()


def test_sigterm_finishes_request_in_flight(tmp_path: Path) -> None:
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0", env_extra=DEBUG)
    slow = RawConnection(daemon.endpoint)
    slow.send({"jsonrpc": "2.0", "id": 1, "method": "debug.sleep", "params": {"seconds": 0.8}})
    time.sleep(0.2)
    daemon.proc.terminate()
    assert slow.read()["result"] == {"slept": 0.8}
    assert daemon.proc.wait(15) == 0
    # New connections are no longer accepted.
    with pytest.raises(OSError):
        RawConnection(daemon.endpoint, timeout=2)


def test_sigint_stops_cleanly_and_removes_socket(tmp_path: Path) -> None:
    sock = tmp_path / "run" / "d.sock"
    daemon = start_daemon(tmp_path, "--socket", str(sock))
    with RawConnection(daemon.endpoint) as conn:
        assert conn.call("health")["result"]["ok"]
    daemon.proc.send_signal(signal.SIGINT)
    assert daemon.proc.wait(15) == 0
    assert not sock.exists()
    events = daemon.log_events()
    assert any(e.get("event") == "daemon_stopped" for e in events)
    assert any(
        e.get("component") == "store" and e.get("event") == "component_closed" for e in events
    )


def test_drain_is_bounded_by_the_grace_period(tmp_path: Path) -> None:
    sock = tmp_path / "d.sock"
    env = {**DEBUG, "LIBRAVDB_SHUTDOWN_GRACE_S": "0.5"}
    daemon = start_daemon(tmp_path, "--socket", str(sock), env_extra=env)
    stuck = RawConnection(daemon.endpoint)
    stuck.send({"jsonrpc": "2.0", "id": 1, "method": "debug.sleep", "params": {"seconds": 30}})
    time.sleep(0.2)
    started = time.monotonic()
    daemon.proc.terminate()
    assert daemon.proc.wait(15) == 0
    assert time.monotonic() - started < 10  # not the 30 s the request wanted
    assert not sock.exists()
    events = daemon.log_events()
    assert any(e.get("event") == "drain_timeout" for e in events)
    assert any(
        e.get("component") == "store" and e.get("event") == "component_closed" for e in events
    )
    with pytest.raises(ConnectionError):
        stuck.read()  # cut off at the grace limit: the connection closes
    stuck.close()


def test_work_after_shutdown_in_a_batch_is_refused(tmp_path: Path) -> None:
    daemon = start_daemon(tmp_path, "--socket", str(tmp_path / "d.sock"))
    with RawConnection(daemon.endpoint) as conn:
        conn.send(
            [
                {"jsonrpc": "2.0", "id": 1, "method": "shutdown"},
                {"jsonrpc": "2.0", "id": 2, "method": "embed", "params": {"texts": ["x"]}},
                {"jsonrpc": "2.0", "id": 3, "method": "health"},
            ]
        )
        replies = {r["id"]: r for r in conn.read()}
    assert replies[1]["result"] == {"ok": True}
    assert replies[2]["error"]["code"] == -32007
    assert replies[3]["result"]["ok"] is False
    assert replies[3]["result"]["message"] == "shutting down"
    assert daemon.proc.wait(15) == 0


def test_debug_methods_are_hidden_by_default(tmp_path: Path) -> None:
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        with RawConnection(daemon.endpoint) as conn:
            methods = conn.call("initialize")["result"]["methods"]
            assert not [m for m in methods if m.startswith("debug.")]
            assert conn.call("debug.sleep", {"seconds": 0})["error"]["code"] == -32601
    finally:
        daemon.stop()
