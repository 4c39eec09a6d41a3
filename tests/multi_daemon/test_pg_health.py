"""``health`` and ``status`` while the PostgreSQL server is stopped or unreachable: the
store is reported ``unavailable`` (``ok: false``) instead of ``ready`` with ``ok: true``
while writes failed with -32005, every call still answers (the probe is bounded and
cached), and both recover when the server is back. A server of the test's own (stopped
under the daemon), reached directly or through a TCP relay that can drop every packet."""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from libravdb_client import Client, RpcError
from libravdb_client.testing import DaemonProcess

from tests.pg_server import PgTestServer, start_server

CONFIG = '[compaction]\nauto = false\n[summarizer]\nbackend = "extractive"\n'
STORAGE_UNAVAILABLE = -32005


@pytest.fixture
def own_server() -> Iterator[PgTestServer]:
    """A server of the test's own, stopped under the daemon (not under tmp_path: a pytest
    starting elsewhere resets /tmp/pytest-of-<user> to 0700, which the server's own user,
    under root, could then not enter to restart)."""
    root = Path(tempfile.mkdtemp(prefix="libravdb-pg-health-"))
    server = start_server(root / "pg")
    try:
        yield server
    finally:
        server.close()
        shutil.rmtree(root, ignore_errors=True)


class Relay:
    """127.0.0.1:<port> -> the server's Unix socket. ``drop = True`` makes the network
    silent: connections are accepted, nothing is forwarded either way (packets lost)."""

    def __init__(self, unix_path: str) -> None:
        self.unix_path = unix_path
        self.drop = False
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._open.append(client)
            if self.drop:
                continue  # accepted, never answered
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.unix_path)
            self._open.append(upstream)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                if not self.drop:
                    dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        for s in (self._listener, *self._open):
            with contextlib.suppress(OSError):
                s.close()


def _socket(server: PgTestServer) -> tuple[str, str]:
    host = parse_qs(urlsplit(server.url()).query)["host"][0]
    with server.admin() as conn:
        row = conn.execute("SHOW port").fetchone()
    assert row is not None
    return host, str(row[0])


def _daemon(tmp: Path, url: str) -> DaemonProcess:
    (tmp / "config.toml").write_text(CONFIG)
    return DaemonProcess.start(
        "tcp",
        data_dir=tmp / "data",
        home=tmp / "home",
        args=["--store", url, "--config", str(tmp / "config.toml")],
        ready_timeout=90,
    )


def _until(client: Client, ok: bool) -> Any:
    """Ask ``health`` until its ``ok`` is ``ok`` (the probe's answer stands 2 s): the last
    answer. Every call must answer, which is what a hanging probe would break."""
    for _ in range(300):
        health = client.health()
        if health.ok is ok:
            return health
        time.sleep(0.1)
    raise AssertionError(f"health stayed ok={not ok}: {health.message}")


def _ingest(client: Client, n: int) -> None:
    client.ingest("s", [{"role": "user", "content": f"I keep {n} beehives."}], user_id="u")


def _check_outage(client: Client, why: Callable[[str], bool]) -> None:
    health = _until(client, False)
    assert health.message.startswith("store unavailable: PostgreSQL at postgresql://")
    assert why(health.message), health.message
    assert health.models["store"].state == "unavailable"
    status = client.status()
    assert status.ok is False and status.models["store"].state == "unavailable"
    assert status.records["turns"] >= 1  # the counts the server last gave


def test_health_reports_the_store_down_while_postgresql_is_stopped(
    tmp_path: Path, own_server: PgTestServer
) -> None:
    url = own_server.new_database()
    daemon = _daemon(tmp_path, url)
    try:
        with Client(daemon.endpoint, timeout=60) as client:
            assert client.health().ok
            _ingest(client, 1)
            assert client.status().models["store"].state == "ready"
            own_server.stop()
            with pytest.raises(RpcError) as caught:
                _ingest(client, 2)
            assert caught.value.code == STORAGE_UNAVAILABLE
            _check_outage(client, lambda m: "connection" in m.lower())
            own_server.start()
            health = _until(client, True)
            assert health.message == "ok" and health.models["store"].state == "ready"
            _ingest(client, 3)
            assert client.status().records["turns"] == 2
    finally:
        daemon.close()


def test_health_answers_while_postgresql_is_unreachable(
    tmp_path: Path, own_server: PgTestServer
) -> None:
    sock, port = _socket(own_server)
    relay = Relay(f"{sock}/.s.PGSQL.{port}")
    dbname = urlsplit(own_server.new_database()).path
    daemon = _daemon(tmp_path, f"postgresql://postgres@127.0.0.1:{relay.port}{dbname}")
    try:
        with Client(daemon.endpoint, timeout=60) as client:
            _ingest(client, 1)
            assert client.health().ok and client.status().records["turns"] == 1
            relay.drop = True
            _check_outage(client, lambda m: "did not answer" in m or "timeout" in m)
            relay.drop = False
            assert _until(client, True).models["store"].state == "ready"
    finally:
        daemon.close()
        relay.close()
