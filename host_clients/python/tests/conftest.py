"""Fixtures: one real daemon per session on a Unix socket and one on loopback TCP.

Every daemon gets its own temporary ``--data-dir`` and ``$HOME``. Clients over stdio
spawn their own daemon (that is what is being tested there).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from libravdb_client import Client
from libravdb_client.testing import DaemonProcess

TRANSPORTS = ("unix", "tcp", "stdio")


@pytest.fixture(scope="session")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="session")
def unix_daemon(tmp_path_factory: pytest.TempPathFactory, home: Path) -> Iterator[DaemonProcess]:
    base = tmp_path_factory.mktemp("unixd")
    with DaemonProcess.start("unix", data_dir=base / "data", home=home) as daemon:
        yield daemon


@pytest.fixture(scope="session")
def tcp_daemon(tmp_path_factory: pytest.TempPathFactory, home: Path) -> Iterator[DaemonProcess]:
    base = tmp_path_factory.mktemp("tcpd")
    with DaemonProcess.start("tcp", data_dir=base / "data", home=home) as daemon:
        yield daemon


@pytest.fixture(scope="module")
def stdio_client(tmp_path_factory: pytest.TempPathFactory, home: Path) -> Iterator[Client]:
    """One spawned daemon per module, for tests that only need some stdio client."""
    base = tmp_path_factory.mktemp("stdiod")
    env = {"HOME": str(home)}
    with Client.spawn(data_dir=base / "data", env=env, stderr=base / "log") as client:
        yield client


@pytest.fixture
def spawn_kwargs(tmp_path: Path, home: Path) -> dict[str, Any]:
    """Arguments for Client.spawn / AsyncClient.spawn: private data dir, HOME, log file."""
    return {
        "data_dir": tmp_path / "data",
        "env": {"HOME": str(home)},
        "stderr": tmp_path / "daemon.log",
    }


@pytest.fixture
def free_port() -> int:
    """A loopback TCP port with nobody listening on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def assert_reaped() -> Callable[[int], None]:
    """Check that a child is gone and was waited for: no zombie left behind."""

    def check(pid: int) -> None:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        assert _state(pid) != "Z"

    return check


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[0]
