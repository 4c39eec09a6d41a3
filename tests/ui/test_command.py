"""`libravdb ui` as a command: its first stdout line, loopback only, --open, no daemon."""

from __future__ import annotations

import http.client
import subprocess
import sys
import time
from pathlib import Path

import pytest
from libravdb_client.testing import DaemonProcess

from tests.ui.conftest import REPO, RunningUi, start_ui, stop_ui, ui_env
from tests.ui.seed import NS, OTHER_NS, SECRET

DEADLINE_S = 60.0


def run_ui(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sidecar", "ui", *args],
        capture_output=True,
        text=True,
        env=ui_env(tmp, tmp / "opened.txt"),
        cwd=REPO,
        timeout=60,
    )


@pytest.mark.parametrize("where", ["0.0.0.0:0", "192.168.1.20:8080", "example.com:80", "[::]:0"])
def test_a_non_loopback_address_is_refused(tmp_path: Path, where: str) -> None:
    done = run_ui(tmp_path, "--endpoint", "tcp:127.0.0.1:9", "--http", where)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("libravdb ui: --http serves loopback only"), done.stderr


def test_bad_addresses_are_named(tmp_path: Path) -> None:
    done = run_ui(tmp_path, "--http", "127.0.0.1")
    assert (done.returncode, done.stderr.strip()) == (
        2,
        "libravdb ui: --http wants HOST:PORT (for example 127.0.0.1:8765), not '127.0.0.1'",
    )


def test_no_daemon_no_ui(tmp_path: Path) -> None:
    done = run_ui(tmp_path, "--endpoint", f"unix:{tmp_path}/nobody.sock")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"libravdb ui: no daemon answers at unix:{tmp_path}/nobody.sock")


def test_the_url_is_the_first_line_and_open_opens_it(daemon: DaemonProcess, tmp_path: Path) -> None:
    ui: RunningUi = start_ui(tmp_path, daemon.endpoint, "--open", "--http", "localhost:0")
    try:
        assert ui.url.startswith("http://localhost:") and "/login?token=" in ui.url
        deadline = time.monotonic() + DEADLINE_S
        while not ui.opened.exists() or not ui.opened.read_text().strip():
            assert time.monotonic() < deadline, "the browser was never asked to open the URL"
            time.sleep(0.05)
        assert ui.opened.read_text().split() == [ui.url]
        serving = next(e for e in ui.events() if e["event"] == "ui_serving")
        assert serving["address"] == ui.base + "/" and serving["namespaces"] == ["default"]
    finally:
        assert stop_ui(ui) == 0
    assert ui.proc.stdout is not None and ui.proc.stdout.read() == ""  # one line, nothing else


def test_stopped_as_soon_as_the_url_is_read_it_exits_cleanly(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    """The URL is printed once the server handles SIGTERM: a caller that stops the UI the
    moment it reads the line gets exit 0, not death by the default handler (-15: the URL
    used to come before the server's handlers, which a loaded machine showed)."""
    for n in range(3):
        ui: RunningUi = start_ui(tmp_path / str(n), daemon.endpoint)
        assert stop_ui(ui) == 0


def test_a_port_in_use_is_named(daemon: DaemonProcess, ui: RunningUi, tmp_path: Path) -> None:
    done = run_ui(tmp_path, "--endpoint", daemon.endpoint, "--http", f"127.0.0.1:{ui.port}")
    assert done.returncode == 2
    assert done.stderr.startswith(f"libravdb ui: cannot listen on 127.0.0.1:{ui.port}")


def _signed_in(ui: RunningUi) -> http.client.HTTPConnection:
    conn = http.client.HTTPConnection("127.0.0.1", ui.port, timeout=60)
    conn.request("GET", f"/login?token={ui.token}", headers={"Host": f"127.0.0.1:{ui.port}"})
    reply = conn.getresponse()
    reply.read()
    assert reply.status == 303
    return conn


def _get(ui: RunningUi, conn: http.client.HTTPConnection, path: str) -> tuple[int, str]:
    """A GET on ``conn``, again on a new connection once when the server had closed the
    idle one (uvicorn keeps one 5 s: a daemon's start under load takes longer), as a
    browser does."""
    headers = {"Host": f"127.0.0.1:{ui.port}", "Cookie": f"libravdb_ui_{ui.port}={ui.token}"}
    for again in (False, True):
        conn.request("GET", path, headers=headers)
        try:
            reply = conn.getresponse()
        except http.client.RemoteDisconnected:
            conn.close()  # the next request connects anew
            if again:
                raise
            continue
        return reply.status, reply.read().decode()
    raise AssertionError("unreachable")


def test_namespaces_it_was_started_with(daemon: DaemonProcess, tmp_path: Path) -> None:
    some = start_ui(tmp_path / "some", daemon.endpoint, "--namespace", NS, "--namespace", OTHER_NS)
    every = start_ui(tmp_path / "every", daemon.endpoint, "--all-namespaces")
    try:
        conn = _signed_in(some)
        status, page = _get(some, conn, f"/?ns={OTHER_NS}&scope=history")
        assert status == 200 and SECRET in page
        assert '<select id="ns" name="ns"' in page  # a choice between the two
        status, page = _get(some, conn, "/?ns=carol")
        assert status == 403 and "serves the namespace(s) alice, bob" in page
        conn = _signed_in(every)
        status, page = _get(every, conn, f"/?ns={OTHER_NS}&scope=history")
        assert status == 200 and SECRET in page
        assert '<input id="ns" name="ns" value="bob"' in page  # any namespace can be named
    finally:
        assert stop_ui(some) == 0 and stop_ui(every) == 0


def test_a_daemon_that_stops_and_comes_back(tmp_path: Path) -> None:
    socket_path = tmp_path / "d.sock"
    data = tmp_path / "data"
    first = DaemonProcess.start(f"unix:{socket_path}", data_dir=data, home=tmp_path)
    ui = start_ui(tmp_path / "ui", first.endpoint)
    try:
        conn = _signed_in(ui)
        assert _get(ui, conn, "/?fresh=1")[0] == 200
        first.close()
        status, page = _get(ui, conn, "/?fresh=1")
        assert status == 503 and "the libravdb daemon" in page and "libravdbd serve" in page
        second = DaemonProcess.start(f"unix:{socket_path}", data_dir=data, home=tmp_path)
        try:
            assert _get(ui, conn, "/?fresh=1")[0] == 200  # reconnected by itself
        finally:
            second.close()
    finally:
        first.close()
        assert stop_ui(ui) == 0
