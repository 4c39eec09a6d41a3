"""What a connection cannot do to the daemon: forged HTTP requests, deep nesting, floods
of batches and connections, huge names, and (with a token) anything before authenticating.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO, RawConnection, daemon_env, running_daemon, start_daemon

pytestmark = pytest.mark.sqlite_only("transport limits and hardening, not the store")

DEEP = 5000


def _closed(conn: RawConnection) -> bool:
    """True once the daemon has closed the connection (after any pending lines)."""
    conn.sock.settimeout(10)
    try:
        while True:
            chunk = conn.sock.recv(1 << 16)
            if not chunk:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_browser_style_post_is_not_executed(tmp_path: Path) -> None:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "insert_text",
            "params": {"collection": "user:victim", "id": "forged", "text": "forged by a page"},
        }
    )
    request = (
        "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body) + 1}\r\n\r\n{body}\n"
    ).encode()
    with running_daemon(tmp_path, "--tcp", "127.0.0.1:0") as daemon:
        with RawConnection(daemon.endpoint) as conn:
            conn.send_raw(request)
            reply = conn.read()
            assert reply["error"]["code"] == -32700 and reply["id"] is None
            assert "closing the connection" in reply["error"]["message"]
            assert _closed(conn)
        with RawConnection(daemon.endpoint) as conn:
            listed = conn.call("list_collection", {"collection": "user:victim"})
        assert listed["result"]["results"] == []


def test_consecutive_parse_errors_close_the_connection(tmp_path: Path) -> None:
    with (
        running_daemon(tmp_path, "--tcp", "127.0.0.1:0") as daemon,
        RawConnection(daemon.endpoint) as conn,
    ):
        for _ in range(2):  # two in a row are forgiven
            conn.send_raw(b'{"broken": \n')
            assert conn.read()["error"]["code"] == -32700
        assert conn.call("health")["result"]["ok"] is True
        for _ in range(3):
            conn.send_raw(b"{nope\n")
            assert conn.read()["error"]["code"] == -32700
        assert _closed(conn)


def test_first_frame_that_is_not_an_object_or_batch_closes(tmp_path: Path) -> None:
    with (
        running_daemon(tmp_path, "--tcp", "127.0.0.1:0") as daemon,
        RawConnection(daemon.endpoint) as conn,
    ):
        conn.send_raw(b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\n")  # a TLS hello
        assert conn.read()["error"]["code"] == -32700
        assert _closed(conn)


@pytest.mark.parametrize(
    "frame",
    [
        b"[" * DEEP + b"]" * DEEP,
        b'{"jsonrpc":"2.0","id":7,"method":"health","params":{"a":'
        + b"[" * DEEP
        + b"]" * DEEP
        + b"}}",
    ],
    ids=["deep-batch", "deep-params"],
)
def test_deep_nesting_is_answered_and_the_connection_survives(tmp_path: Path, frame: bytes) -> None:
    with (
        running_daemon(tmp_path, "--tcp", "127.0.0.1:0") as daemon,
        RawConnection(daemon.endpoint) as conn,
    ):
        conn.send_raw(frame + b"\n")
        reply = conn.read()
        assert reply["error"]["code"] in (-32700, -32600, -32602)
        assert conn.call("health")["result"]["ok"] is True


def test_deep_nesting_on_stdio_keeps_the_daemon(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sidecar", "serve", "--stdio", "--data-dir", str(tmp_path / "d")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=daemon_env(tmp_path / "home"),
        cwd=REPO,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(b"[" * DEEP + b"]" * DEEP + b"\n")
        proc.stdin.write(b'{"jsonrpc":"2.0","id":2,"method":"health"}\n')
        proc.stdin.flush()
        first = json.loads(proc.stdout.readline())
        second = json.loads(proc.stdout.readline())
        assert first["error"]["code"] == -32700
        assert second["id"] == 2 and second["result"]["ok"] is True
    finally:
        proc.stdin.close()
        assert proc.wait(30) == 0


def test_batch_over_the_cap_is_refused(tmp_path: Path) -> None:
    with (
        running_daemon(
            tmp_path, "--tcp", "127.0.0.1:0", env_extra={"LIBRAVDB_MAX_BATCH": "10"}
        ) as daemon,
        RawConnection(daemon.endpoint) as conn,
    ):
        batch = [{"jsonrpc": "2.0", "id": i, "method": "health"} for i in range(11)]
        conn.send(batch)
        reply = conn.read()
        assert reply["error"]["code"] == -32600
        assert reply["error"]["data"] == {"maxBatch": 10}
        conn.send(batch[:10])
        assert len(conn.read()) == 10


def test_connections_over_the_limit_get_busy(tmp_path: Path) -> None:
    with running_daemon(
        tmp_path, "--tcp", "127.0.0.1:0", env_extra={"LIBRAVDB_MAX_CONNECTIONS": "2"}
    ) as daemon:
        with RawConnection(daemon.endpoint) as a, RawConnection(daemon.endpoint) as b:
            assert a.call("health")["result"]["ok"] and b.call("health")["result"]["ok"]
            with RawConnection(daemon.endpoint) as c:
                reply = c.read()
                assert reply["error"]["code"] == -32010
                assert _closed(c)
        with RawConnection(daemon.endpoint) as d:  # room again
            assert d.call("health")["result"]["ok"] is True


def test_requests_over_the_inflight_limit_get_busy(tmp_path: Path) -> None:
    env = {"LIBRAVDB_MAX_INFLIGHT": "1", "LIBRAVDB_DEBUG_METHODS": "1"}
    with (
        running_daemon(tmp_path, "--tcp", "127.0.0.1:0", env_extra=env) as daemon,
        RawConnection(daemon.endpoint) as slow,
        RawConnection(daemon.endpoint) as other,
    ):
        slow.send({"jsonrpc": "2.0", "id": 1, "method": "debug.sleep", "params": {"seconds": 3}})
        busy = other.call("embed", {"texts": ["x"]})
        for _ in range(100):  # the sleep may not have started yet
            if "error" in busy:
                break
            busy = other.call("embed", {"texts": ["x"]})
        assert busy["error"]["code"] == -32010
        assert other.call("health")["result"]["ok"] is True  # always served
        assert slow.read()["result"] is not None


def test_huge_method_name_is_bounded_in_reply_and_log(tmp_path: Path) -> None:
    name = "m" * (4 << 20)
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        with RawConnection(daemon.endpoint, timeout=30) as conn:
            for _ in range(5):
                reply = conn.call(name)
                assert reply["error"]["code"] == -32601
                assert len(reply["error"]["message"]) < 300
    finally:
        daemon.stop()
    assert len(daemon.stderr_text()) < 100_000


def _token_file(tmp: Path, mode: int) -> Path:
    path = tmp / "token"
    path.write_text("s3cret-token-of-enough-length\n")
    os.chmod(path, mode)
    return path


def test_token_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    token = _token_file(tmp_path, 0o644)
    daemon = start_daemon(
        tmp_path,
        "--tcp",
        "127.0.0.1:0",
        env_extra={"LIBRAVDB_AUTH_TOKEN_FILE": str(token)},
        wait=False,
    )
    daemon.proc.communicate(timeout=60)
    assert daemon.proc.returncode == 1
    assert "readable by others" in daemon.stderr_text() and "chmod 600" in daemon.stderr_text()


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_with_a_token_every_connection_authenticates_first(tmp_path: Path, transport: str) -> None:
    token = _token_file(tmp_path, 0o600)
    args = (
        ("--socket", str(tmp_path / "s.sock")) if transport == "unix" else ("--tcp", "127.0.0.1:0")
    )
    env = {"LIBRAVDB_AUTH_TOKEN_FILE": str(token)}
    with running_daemon(tmp_path, *args, env_extra=env) as daemon:
        with RawConnection(daemon.endpoint) as conn:
            reply = conn.call("list_collection", {"collection": "user:a"})
            assert reply["error"]["code"] == -32011 and reply["id"] == 1
            assert _closed(conn)
        with RawConnection(daemon.endpoint) as conn:
            reply = conn.call("initialize", {"authToken": "wrong-token-wrong-token"})
            assert reply["error"]["code"] == -32011
            assert _closed(conn)
        with RawConnection(daemon.endpoint) as conn:
            reply = conn.call("initialize", {"authToken": "s3cret-token-of-enough-length"})
            assert reply["result"]["serverInfo"]["name"]
            assert conn.call("health")["result"]["ok"] is True
    assert "s3cret-token" not in daemon.stderr_text()


def test_non_loopback_tcp_needs_a_token(tmp_path: Path) -> None:
    refused = start_daemon(tmp_path, "--tcp", "0.0.0.0:0", wait=False)
    refused.proc.communicate(timeout=60)
    assert refused.proc.returncode == 1
    assert "auth token" in refused.stderr_text()
    token = _token_file(tmp_path, 0o600)
    env = {"LIBRAVDB_AUTH_TOKEN_FILE": str(token)}
    with running_daemon(tmp_path, "--tcp", "0.0.0.0:0", env_extra=env) as daemon:
        port = int(daemon.endpoint.rpartition(":")[2])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"health"}\n')
            assert b"-32011" in sock.recv(4096)


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_a_client_that_stops_reading_stalls_only_itself(tmp_path: Path) -> None:
    import threading
    import time

    with running_daemon(tmp_path, "--tcp", "127.0.0.1:0") as daemon:
        with RawConnection(daemon.endpoint, timeout=60) as setup:
            body = "lorem ipsum dolor " * 300  # ~5 KB per record, ~1 MB per listing
            for i in range(200):
                rec = {"collection": "big", "id": f"r{i}", "text": f"{i} {body}"}
                assert "result" in setup.call("insert_text", rec)
            before = _rss_mb(daemon.proc.pid)
        stalled = RawConnection(daemon.endpoint, timeout=30)
        frame = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "list_collection",
                "params": {"collection": "big"},
            }
        ).encode()

        def flood() -> None:  # 2,000 requests (2 GB of replies) and never a read
            try:
                for _ in range(2000):
                    stalled.send_raw(frame + b"\n")
            except OSError:
                pass  # the socket buffers filled: the daemon stopped reading

        sender = threading.Thread(target=flood, daemon=True)
        sender.start()
        time.sleep(3)
        with RawConnection(daemon.endpoint, timeout=10) as other:
            started = time.monotonic()
            assert "result" in other.call("health")
            assert (
                len(other.call("list_collection", {"collection": "big"})["result"]["results"])
                == 200
            )
            assert time.monotonic() - started < 5
        grown = _rss_mb(daemon.proc.pid) - before
        # one reply in flight for the stalled client, not 2,000
        assert grown < 150, f"resident memory grew {grown:.0f} MB"
        stalled.close()
        sender.join(10)
