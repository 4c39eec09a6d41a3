"""Logs a person can read: ``--log-format text`` (the default when stderr is a terminal)
renders the same fields as aligned text; JSON stays the default for a pipe, which is what a
host or a log collector reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sidecar.config import ConfigError, load_settings
from tests.support import REPO

pytestmark = pytest.mark.sqlite_only("log formatting, not the store")

LOG_ONE = (
    "import structlog\n"
    "from sidecar.logging_setup import configure_logging\n"
    "sink = configure_logging('info', fmt={fmt!r})\n"
    "structlog.get_logger('t').info('store.opened', records=3)\n"
    "sink.flush()\n"
)


def _run(fmt: str, stderr: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", LOG_ONE.format(fmt=fmt)],
        cwd=REPO,
        stderr=stderr,
        stdout=subprocess.DEVNULL,
        timeout=60,
        check=True,
    )


def test_json_lines_by_default_on_a_pipe() -> None:
    for fmt in ("json", "auto"):
        line = _run(fmt).stderr.decode().strip()
        record = json.loads(line)
        assert record["event"] == "store.opened" and record["records"] == 3


def test_text_lines_carry_the_same_fields() -> None:
    line = _run("text").stderr.decode().strip()
    assert not line.startswith("{")
    assert "store.opened" in line and "records=3" in line and "info" in line


def test_auto_is_text_at_a_terminal(tmp_path: Path) -> None:
    main, secondary = os.openpty()
    try:
        _run("auto", stderr=secondary)
        os.close(secondary)
        out = b""
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the terminal closed: everything was read
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(main)
    text = out.decode().strip()
    assert "store.opened" in text and not text.startswith("{")


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ConfigError, match="log format"):
        load_settings(flags={"log_format": "yaml"}, env={})
    assert load_settings(flags={}, env={"LIBRAVDB_LOG_FORMAT": "text"}).log_format == "text"


def test_the_daemon_takes_the_flag(tmp_path: Path) -> None:
    from tests.support import RawConnection, start_daemon

    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0", extra_args=("--log-format", "text"))
    try:
        with RawConnection(daemon.endpoint) as conn:
            assert conn.call("health", {})["result"]["ok"] in (True, False)
    finally:
        assert daemon.stop() == 0
    lines = [line for line in daemon.stderr_text().splitlines() if line.strip()]
    assert lines and not any(line.startswith("{") for line in lines)
    assert any("daemon_stopped" in line for line in lines)
