"""`libravdb mcp` never takes the data directory away from the other clients.

A daemon it starts (nothing answered at the default socket) serves that socket, detached,
so `libravdb call`, the OpenClaw plugin and a second MCP server share it, and a second
`libravdbd serve` names the running daemon instead of a stranger's lock. When the daemon
stops mid-session, nothing is started in its place: the tool call fails and says how to
start it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from libravdb_client import Client as DaemonClient
from libravdb_client import LibravdbError
from libravdb_client.testing import DaemonProcess
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from sidecar.store.errors import StoreLocked
from sidecar.store.lock import DirLock
from tests.mcp_face.conftest import REPO, mcp_argv, structured, text_of

pytestmark = pytest.mark.sqlite_only("the MCP face's daemon discovery, not the store")


@pytest.fixture
def short_home() -> Iterator[Path]:
    """A HOME of its own (no daemon serves its default socket), short enough for a Unix
    socket path under it."""
    path = Path(tempfile.mkdtemp(prefix="lvm", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _socket(home: Path) -> Path:
    return home / ".clawdb" / "run" / "libravdb.sock"


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sidecar", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )


@asynccontextmanager
async def _mcp(env: dict[str, str], log: Path, *args: str) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable, args=mcp_argv(*args), env=env, cwd=str(REPO)
    )
    with log.open("a") as errlog:
        async with Client(stdio_client(params, errlog=errlog), cache=None) as client:
            yield client


def _lock_is_free(data: Path) -> bool:
    lock = DirLock(data)
    try:
        lock.acquire()
    except StoreLocked:
        return False
    lock.release()
    return True


def _stop_shared(home: Path, data: Path) -> None:
    """Stop the daemon the MCP server left serving (it is shared: it outlives the server)
    and wait until it has let go of its data directory."""
    try:
        with DaemonClient(f"unix:{_socket(home)}", timeout=30) as client:
            client.shutdown()
    except LibravdbError:
        pass
    deadline = time.monotonic() + 60
    while not (_lock_is_free(data) or time.monotonic() > deadline):
        time.sleep(0.2)


async def test_the_daemon_it_starts_serves_every_client(
    env: dict[str, str], short_home: Path, tmp_path: Path
) -> None:
    data = short_home / "data"
    sock = _socket(short_home)
    mine = {**env, "HOME": str(short_home)}
    args = ("--data-dir", str(data), "--namespace", "shared", "--session", "sh-1")
    try:
        async with _mcp(mine, tmp_path / "mcp.log", *args) as client:
            structured(await client.call_tool("remember", {"text": "Every client shares it."}))
            # the default endpoint answers: `libravdb call` (and the plugin) find the daemon
            health = _run(["call", "health"], mine)
            assert health.returncode == 0, health.stderr
            with DaemonClient(f"unix:{sock}", timeout=60) as other:
                listed = other.sessions_list(namespace="shared").sessions
                assert [s.session_id for s in listed] == ["sh-1"]  # the same memory
            # `make run` meanwhile: it names the daemon that serves, not a lock holder
            second = _run(["serve", "--data-dir", str(data), "--log-format", "json"], mine)
            assert second.returncode == 1
            assert f"already serving on unix:{sock}" in second.stderr, second.stderr
            assert "in use by" not in second.stderr
        # the daemon outlives the MCP server: the other clients keep their memory
        with DaemonClient(f"unix:{sock}", timeout=60) as other:
            assert other.health().ok
    finally:
        _stop_shared(short_home, data)
    assert _lock_is_free(data)


async def test_a_daemon_stopped_mid_session_is_not_replaced(
    env: dict[str, str], short_home: Path, tmp_path: Path
) -> None:
    data = short_home / ".clawdb" / "data"  # the default one: what a spawned daemon would take
    sock = f"unix:{_socket(short_home)}"
    mine = {**env, "HOME": str(short_home)}
    daemon = DaemonProcess.start(sock, data_dir=data, home=short_home)
    async with _mcp(mine, tmp_path / "mcp.log", "--namespace", "mid", "--session", "m-1") as client:
        try:
            structured(await client.call_tool("remember", {"text": "Before the stop."}))
        finally:
            daemon.stop()
        down = await client.call_tool("list_sessions", {})
        assert down.is_error
        message = text_of(down)
        assert f"list sessions failed: the libravdb daemon is not running at {sock}" in message
        assert "libravdbd serve" in message
        # nothing took the daemon's place: its data directory is free for the user
        assert _lock_is_free(data)
        assert not _daemons_of(short_home)
        with DaemonProcess.start(sock, data_dir=data, home=short_home):
            listed = structured(await client.call_tool("list_sessions", {}))
    assert [(s["session_id"], s["turn_count"]) for s in listed["sessions"]] == [("m-1", 1)]


async def test_two_servers_starting_at_once_share_one_daemon(
    env: dict[str, str], short_home: Path, tmp_path: Path
) -> None:
    data = short_home / "data"
    mine = {**env, "HOME": str(short_home)}
    args = ("--data-dir", str(data), "--namespace", "race")
    try:
        async with (
            _mcp(mine, tmp_path / "a.log", *args, "--session", "a") as first,
            _mcp(mine, tmp_path / "b.log", *args, "--session", "b") as second,
        ):
            structured(await first.call_tool("remember", {"text": "From the first host."}))
            structured(await second.call_tool("remember", {"text": "From the second host."}))
            listed = structured(await first.call_tool("list_sessions", {}))
        assert sorted(s["session_id"] for s in listed["sessions"]) == ["a", "b"]
        assert len(_daemons_of(short_home)) == 1
    finally:
        _stop_shared(short_home, data)


def test_a_daemon_it_cannot_start_is_a_clear_exit_1(
    daemon: DaemonProcess, env: dict[str, str], short_home: Path
) -> None:
    with DaemonClient(daemon.endpoint, timeout=60) as shared:
        busy = shared.status().data_dir  # locked by the running daemon (on another endpoint)
    done = _run(["mcp", "--data-dir", busy], {**env, "HOME": str(short_home)})
    assert done.returncode == 1
    assert done.stdout == ""
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("libravdb mcp: the daemon it started exited"), done.stderr
    assert f"in use by process {daemon.pid}" in last
    assert not _socket(short_home).exists()


def test_a_private_daemon_needs_a_data_directory_of_its_own(env: dict[str, str]) -> None:
    done = _run(["mcp", "--spawn"], env)
    assert done.returncode == 1
    assert done.stderr.strip().startswith("libravdb mcp: --spawn needs --data-dir"), done.stderr


def _daemons_of(home: Path) -> list[int]:
    """Daemon processes (any transport) running with this HOME."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().split(b"\0")
                environ = (proc / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"serve" in cmdline and f"HOME={home}".encode() in environ:
                found.append(int(proc.name))
    return found
