"""`libravdb mcp --http` holds a bounded session table: past the cap the least recently
used idle session is closed to admit a new one, and a session idle for
`mcp.http_session_idle_s` is closed. Every `initialize` opens a session, so without the
bound a client that never says goodbye grows the server for as long as it runs."""

from __future__ import annotations

import contextlib
import http.client
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from libravdb_client.testing import DaemonProcess

from tests.mcp_face.test_transports import _free_port, _start, _wait_for_port

pytestmark = pytest.mark.sqlite_only("the MCP face's HTTP transport, not the store")

PROTOCOL = "2025-06-18"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class Http:
    """Plain requests to the MCP endpoint over one kept-alive connection."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def post(self, body: dict[str, Any], session: str = "") -> http.client.HTTPResponse:
        headers = dict(HEADERS)
        if session:
            headers |= {"mcp-session-id": session, "mcp-protocol-version": PROTOCOL}
        self.conn.request("POST", "/mcp", json.dumps(body), headers)
        reply = self.conn.getresponse()
        reply.read()
        return reply

    def initialize(self) -> str:
        """A bare `initialize` (a client that never closes its session); its session id."""
        params = {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "churn", "version": "1"},
        }
        reply = self.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
        assert reply.status == 200, reply.status
        session = reply.getheader("mcp-session-id")
        assert session
        return session

    def ping(self, session: str) -> int:
        return self.post({"jsonrpc": "2.0", "id": 2, "method": "ping"}, session).status


def _session_events(log: Path) -> list[dict[str, Any]]:
    events = []
    for line in log.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            event = json.loads(line)
            if str(event.get("event", "")).startswith("mcp_http_session"):
                events.append(event)
    return events


@contextlib.contextmanager
def _http_server(
    daemon: DaemonProcess, env: dict[str, str], log: Path, **settings: str
) -> Iterator[tuple[int, Http]]:
    port = _free_port()
    args = ["--endpoint", daemon.endpoint, "--http", f"127.0.0.1:{port}", "--log-level", "debug"]
    proc = _start(args, {**env, **settings}, log)
    try:
        _wait_for_port(port, proc)
        http = Http(port)
        try:
            yield port, http
        finally:
            http.conn.close()
    finally:
        proc.terminate()
        proc.communicate(timeout=20)
    assert proc.returncode == 0, log.read_text()


@pytest.mark.timeout(180)
def test_sessions_beyond_the_cap_close_the_least_recently_used(
    daemon: DaemonProcess, env: dict[str, str], tmp_path: Path
) -> None:
    log = tmp_path / "http.log"
    with _http_server(daemon, env, log, LIBRAVDB_MCP_HTTP_MAX_SESSIONS="4") as (port, http):
        # a client listening on its event stream has a request in flight all along: it
        # keeps its session through the churn, however long ago it last asked anything
        busy = http.initialize()
        with _event_stream(port, busy):
            churn = [http.initialize() for _ in range(40)]
            assert http.ping(busy) == 200
        assert len(set(churn)) == 40
        statuses = [http.ping(session) for session in churn]
    # the oldest were closed to admit the newest; the newest still answer
    assert statuses[-3:] == [200, 200, 200]
    assert statuses[:30] == [404] * 30
    held = [e["sessions"] for e in _session_events(log)]
    assert held and max(held) <= 4


@contextlib.contextmanager
def _event_stream(port: int, session: str) -> Iterator[None]:
    """The session's standalone event stream (GET), held open."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        headers = {
            "Accept": "text/event-stream",
            "mcp-session-id": session,
            "mcp-protocol-version": PROTOCOL,
        }
        conn.request("GET", "/mcp", headers=headers)
        assert conn.getresponse().status == 200
        yield
    finally:
        conn.close()


@pytest.mark.timeout(180)
def test_an_idle_session_is_closed(
    daemon: DaemonProcess, env: dict[str, str], tmp_path: Path
) -> None:
    log = tmp_path / "idle.log"
    settings = {"LIBRAVDB_MCP_HTTP_SESSION_IDLE_S": "0.5"}
    with _http_server(daemon, env, log, **settings) as (_port, http):
        session = http.initialize()
        deadline = time.monotonic() + 60
        while not any(e.get("reason") == "idle" for e in _session_events(log)):
            assert time.monotonic() < deadline, "the idle session was never closed"
            time.sleep(0.1)
        assert http.ping(session) == 404
    closed = [e for e in _session_events(log) if e["event"] == "mcp_http_session_closed"]
    assert [(e["reason"], e["sessions"]) for e in closed][:1] == [("idle", 0)]
