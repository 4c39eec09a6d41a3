"""The daemon never hangs on its own output.

Regression: started with stderr on a pipe or FIFO (`libravdbd serve 2>&1 | tee run.log`, or
a host that reads its stderr) whose reader then died, every request got "the daemon
closed the connection", SIGTERM and SIGINT were ignored and the data-directory lock stayed
held until kill -9. A reader that stays alive but stops reading filled the pipe and
blocked the daemon the same way.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import REPO, RawConnection, daemon_env, start_daemon

pytestmark = pytest.mark.sqlite_only(
    "a reader that stops reading the daemon's output, not the store"
)


def _spawn(tmp: Path, stderr: int, stdout: int) -> subprocess.Popen[bytes]:
    sock = tmp / "d.sock"
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sidecar",
            "serve",
            "--socket",
            str(sock),
            "--data-dir",
            str(tmp / "data"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        env=daemon_env(tmp / "home"),
        cwd=REPO,
    )


def _wait_for_socket(path: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while not path.exists():
        assert proc.poll() is None, "the daemon exited"
        assert time.monotonic() < deadline, "no socket"
        time.sleep(0.05)


def _exercise(endpoint: str, calls: int, prefix: str) -> None:
    with RawConnection(endpoint) as conn:
        for i in range(calls):
            reply = conn.call(
                "ingest",
                {
                    "sessionId": "s",
                    "messages": [{"id": f"{prefix}{i}", "role": "user", "content": f"note {i}"}],
                },
            )
            assert reply["result"]["ingested"] == 1, reply


def _assert_clean_stop_and_lock_released(
    tmp: Path, proc: subprocess.Popen[bytes], sig: signal.Signals
) -> None:
    proc.send_signal(sig)
    assert proc.wait(timeout=30) == 0
    again = start_daemon(tmp, "--tcp", "127.0.0.1:0")  # the lock was released
    try:
        with RawConnection(again.endpoint) as conn:
            assert conn.call("health")["result"]["ok"] is True
    finally:
        again.stop()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_fifo_reader_killed(tmp_path: Path, sig: signal.Signals) -> None:
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.DEVNULL)
    write_end = os.open(fifo, os.O_WRONLY)  # opens once the reader has it open
    try:
        proc = _spawn(tmp_path, stderr=write_end, stdout=write_end)
    finally:
        os.close(write_end)
    try:
        _wait_for_socket(tmp_path / "d.sock", proc)
        _exercise(f"unix:{tmp_path / 'd.sock'}", 5, "before")
        reader.kill()
        reader.wait(10)
        _exercise(f"unix:{tmp_path / 'd.sock'}", 50, "after")  # every log line now hits EPIPE
        _assert_clean_stop_and_lock_released(tmp_path, proc, sig)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_reader_that_stops_reading(tmp_path: Path) -> None:
    """stderr on a pipe nobody drains: the 64 KiB pipe fills after a few hundred log lines."""
    read_end, write_end = os.pipe()
    try:
        proc = _spawn(tmp_path, stderr=write_end, stdout=subprocess.DEVNULL)
    finally:
        os.close(write_end)
    try:
        _wait_for_socket(tmp_path / "d.sock", proc)
        _exercise(f"unix:{tmp_path / 'd.sock'}", 600, "m")
        _assert_clean_stop_and_lock_released(tmp_path, proc, signal.SIGTERM)
    finally:
        os.close(read_end)
        if proc.poll() is None:
            proc.kill()
