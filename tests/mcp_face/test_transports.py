"""How `libravdb mcp` is reached and how it reaches the daemon: stdout carries only the
protocol; streamable HTTP on loopback (and never anywhere else); a named endpoint is never
replaced; a private daemon with --spawn; a clear exit 1 when it cannot serve. The shared
daemon it starts when none answers: test_daemon_sharing.py."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from libravdb_client import Client as DaemonClient
from libravdb_client.testing import DaemonProcess
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.mcp_face.conftest import REPO, mcp_argv, structured, text_of

pytestmark = pytest.mark.sqlite_only(
    "the MCP face's transports and daemon discovery, not the store"
)


def _run_mcp(
    args: list[str], env: dict[str, str], stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *mcp_argv(*args)],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
    )


@pytest.mark.timeout(120)
def test_stdout_carries_only_the_protocol(
    daemon: DaemonProcess, env: dict[str, str], tmp_path: Path
) -> None:
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    log = tmp_path / "raw.log"
    with log.open("w") as errlog:
        proc = subprocess.Popen(
            [sys.executable, *mcp_argv("--endpoint", daemon.endpoint)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errlog,
            text=True,
            env=env,
            cwd=REPO,
        )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
    proc.stdin.flush()
    replies = [json.loads(proc.stdout.readline()) for _ in range(2)]
    proc.stdin.close()  # the host is done: the server exits 0
    rest = proc.stdout.read()
    assert proc.wait(30) == 0, log.read_text()
    assert rest == ""
    assert [r["id"] for r in replies] == [1, 2]
    assert replies[0]["result"]["serverInfo"]["name"] == "libravdb"
    assert len(replies[1]["result"]["tools"]) == 5
    # the logs went to stderr, as JSON lines, and say what is being served
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    ready = next(e for e in events if e["event"] == "mcp_serving")
    assert (ready["daemon"], ready["namespace"], ready["transport"]) == (
        daemon.endpoint,
        "default",
        "stdio",
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[str]:
    with log.open("w") as errlog:
        return subprocess.Popen(
            [sys.executable, *mcp_argv(*args)],
            stdout=subprocess.PIPE,
            stderr=errlog,
            text=True,
            env=env,
            cwd=REPO,
        )


def _wait_for_port(port: int, proc: subprocess.Popen[str], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "libravdb mcp --http exited early"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on {port}")


async def test_streamable_http_on_loopback(
    daemon: DaemonProcess, env: dict[str, str], tmp_path: Path
) -> None:
    port = _free_port()
    args = ["--endpoint", daemon.endpoint, "--namespace", "mcp-http", "--http", f"127.0.0.1:{port}"]
    proc = _start(args, env, tmp_path / "http.log")
    try:
        _wait_for_port(port, proc)
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, cache=None) as client:
            kept = structured(
                await client.call_tool("remember", {"text": "The HTTP fact: the kiln is blue."})
            )
            found = structured(await client.call_tool("search_memory", {"query": "kiln colour"}))
        assert kept["stored"] is True and kept["namespace"] == "mcp-http"
        assert any("kiln is blue" in h["text"] for h in found["hits"])
        # DNS rebinding: a request that names another host is refused
        assert _post_naming_host(port, "evil.example") == 421
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert out == ""  # nothing on stdout, in HTTP mode either
    # Regression (issue 34): uvicorn wrote its own plain-text "INFO:     Started server
    # process" lines and the server a plain "serving MCP at" line. Every line is JSON.
    events = [json.loads(line) for line in (tmp_path / "http.log").read_text().splitlines()]
    serving = [e for e in events if e["event"] == "mcp_serving"]
    assert [e["transport"] for e in serving] == [f"http://127.0.0.1:{port}/mcp"]
    uvicorn = [e for e in events if str(e.get("logger", "")).startswith("uvicorn")]
    assert uvicorn and all(e["level"] in ("info", "warning", "error") for e in uvicorn)


def _post_naming_host(port: int, host: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
        conn.putrequest("POST", "/mcp", skip_host=True)
        conn.putheader("Host", host)
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Accept", "application/json, text/event-stream")
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.parametrize(
    "where", ["0.0.0.0:8765", "192.168.1.20:8765", "example.com:8765", "[::]:1"]
)
def test_a_non_loopback_http_host_is_refused(where: str, env: dict[str, str]) -> None:
    done = _run_mcp(["--endpoint", "tcp:127.0.0.1:9", "--http", where], env)
    assert done.returncode == 1
    assert done.stdout == ""
    line = done.stderr.strip()
    assert line.startswith(
        "libravdb mcp: --http serves loopback only (127.0.0.1, ::1 or localhost)"
    )
    assert "\n" not in line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--http", "8765"], "--http wants HOST:PORT"),
        (["--http", "127.0.0.1:99999"], "--http port must be 1..65535"),
        (["--namespace", "a/b"], "--namespace 'a/b' contains a path separator"),
        (["--session", " "], "--session is required"),
    ],
)
def test_bad_options_exit_1_with_one_line(
    args: list[str], message: str, env: dict[str, str]
) -> None:
    done = _run_mcp(["--endpoint", "tcp:127.0.0.1:9", *args], env)
    assert done.returncode == 1
    assert done.stderr.strip().startswith(f"libravdb mcp: {message}"), done.stderr


def test_a_named_endpoint_that_does_not_answer_is_not_replaced(
    env: dict[str, str], tmp_path: Path
) -> None:
    done = _run_mcp(["--endpoint", f"unix:{tmp_path / 'none.sock'}"], env)
    assert done.returncode == 1
    assert "libravdb mcp: no daemon answers at unix:" in done.stderr
    assert "start it with `libravdbd serve`" in done.stderr
    assert done.stdout == ""


def _processes_naming(text: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmdline:
                found.append(int(proc.name))
    return found


def _gone(cmdline: str, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while _processes_naming(cmdline):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


async def test_a_restarted_daemon_is_found_again(env: dict[str, str], tmp_path: Path) -> None:
    home, data = tmp_path / "home", tmp_path / "data"
    sock = f"unix:{tmp_path / 'restart.sock'}"
    params = StdioServerParameters(
        command=sys.executable,
        args=mcp_argv("--endpoint", sock, "--namespace", "restart", "--session", "r-1"),
        env=env,
        cwd=str(REPO),
    )
    first = DaemonProcess.start(sock, data_dir=data, home=home)
    with (tmp_path / "restart.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), cache=None) as client:
            try:
                structured(await client.call_tool("remember", {"text": "Before the restart."}))
            finally:
                first.stop()
            down = await client.call_tool("list_sessions", {})
            assert down.is_error
            assert f"list sessions failed: the libravdb daemon is not running at {sock}" in text_of(
                down
            )
            with DaemonProcess.start(sock, data_dir=data, home=home):
                listed = structured(await client.call_tool("list_sessions", {}))
    assert [(s["session_id"], s["turn_count"]) for s in listed["sessions"]] == [("r-1", 1)]


async def test_spawn_uses_a_private_daemon_even_when_one_runs(
    daemon: DaemonProcess, env: dict[str, str], tmp_path: Path
) -> None:
    data = tmp_path / "private-data"
    args = ["--spawn", "--endpoint", daemon.endpoint, "--data-dir", str(data)]
    params = StdioServerParameters(
        command=sys.executable,
        args=mcp_argv(*args, "--namespace", "private", "--session", "pv-1"),
        env=env,
        cwd=str(REPO),
    )
    with (tmp_path / "private.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), cache=None) as client:
            empty = await client.call_tool("recall_context", {"question": "What do you know?"})
            assert text_of(empty) == "No stored memory is relevant to this question."
            structured(await client.call_tool("remember", {"text": "Only the private daemon."}))
            mine = structured(await client.call_tool("list_sessions", {}))
    assert [s["session_id"] for s in mine["sessions"]] == ["pv-1"]
    with DaemonClient(daemon.endpoint, timeout=60) as shared:
        assert shared.sessions_list(namespace="private").sessions == []
    assert _gone(f"serve --stdio --data-dir {data}")


def test_a_daemon_that_cannot_start_is_a_clear_exit_1(
    daemon: DaemonProcess, env: dict[str, str]
) -> None:
    with DaemonClient(daemon.endpoint, timeout=60) as shared:
        busy = shared.status().data_dir  # locked by the running daemon
    done = _run_mcp(["--spawn", "--data-dir", busy], env)
    assert done.returncode == 1
    assert done.stdout == ""
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("libravdb mcp: the daemon it started did not answer"), done.stderr
