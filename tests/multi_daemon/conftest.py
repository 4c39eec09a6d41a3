"""Several real daemons on one PostgreSQL database (PostgreSQL only: these tests are about
sharing one) (the test server of tests/pg_server.py):
each a ``libravdbd serve --store URL`` process with its own socket and data directory and
the real embedding model, driven with the Python client. Compaction uses the extractive
summarizer (deterministic, fast) and never starts on its own, so that the tests decide
when two daemons race."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from libravdb_client.testing import DaemonProcess

CONFIG = '[compaction]\nauto = false\n[summarizer]\nbackend = "extractive"\n'

StartDaemon = Callable[..., DaemonProcess]


@pytest.fixture(autouse=True)
def _postgres_selected(request: pytest.FixtureRequest) -> None:
    if str(request.config.getoption("--backend")) == "sqlite":
        pytest.skip("PostgreSQL is not selected (--backend sqlite)")


@pytest.fixture
def database(pg_server: Any) -> str:
    """A fresh, empty database of the test server; its URL."""
    url: str = pg_server.new_database()
    return url


@pytest.fixture
def start_daemon(tmp_path: Path, database: str) -> Iterator[StartDaemon]:
    """``start_daemon(name, url=database, config=CONFIG)``: a daemon on its own socket and
    data directory (``tmp_path/name``); all are stopped at the end."""
    running: list[DaemonProcess] = []
    (tmp_path / "home").mkdir()

    def start(name: str, url: str = database, config: str = CONFIG) -> DaemonProcess:
        where = tmp_path / name
        where.mkdir()
        (where / "config.toml").write_text(config)
        daemon = DaemonProcess.start(
            "unix",
            data_dir=where / "data",
            home=tmp_path / "home",
            args=["--store", url, "--config", str(where / "config.toml")],
            stderr=where / "daemon.log",
            ready_timeout=90,
        )
        running.append(daemon)
        return daemon

    yield start
    for daemon in running:
        daemon.close()


@pytest.fixture
def pair(start_daemon: StartDaemon) -> tuple[DaemonProcess, DaemonProcess]:
    """Two daemons, A and B, serving one database."""
    return start_daemon("a"), start_daemon("b")
