"""The stdio transport: stdout carries only protocol lines, logs go to stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO, daemon_env

pytestmark = pytest.mark.sqlite_only("the stdio transport, not the store")


def run_stdio(
    tmp_path: Path, payload: bytes, *extra: str
) -> tuple[list[dict[str, object]], str, int]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sidecar",
            "serve",
            "--stdio",
            "--data-dir",
            str(tmp_path / "d"),
            *extra,
        ],
        input=payload,
        capture_output=True,
        env=daemon_env(tmp_path / "home", {"LIBRAVDB_DEBUG_METHODS": "1"}),
        cwd=REPO,
        timeout=60,
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return lines, proc.stderr.decode(), proc.returncode


def test_stdio_round_trip_and_exit_on_eof(tmp_path: Path) -> None:
    payload = (
        b"".join(
            json.dumps(m).encode() + b"\n"
            for m in [
                {"jsonrpc": "2.0", "id": 1, "method": "initialize"},
                {"jsonrpc": "2.0", "method": "health"},
                {"jsonrpc": "2.0", "id": 2, "method": "health"},
                {"jsonrpc": "2.0", "id": 3, "method": "nope"},
            ]
        )
        + b"not json\n"
    )
    replies, stderr, code = run_stdio(tmp_path, payload)
    assert code == 0  # stdin closed: the daemon drains and exits cleanly
    assert [r["id"] for r in replies] == [1, 2, 3, None]
    assert replies[0]["result"]["capabilities"]["transports"] == ["stdio"]
    assert replies[1]["result"]["ok"] is True
    assert replies[2]["error"]["code"] == -32601
    assert replies[3]["error"]["code"] == -32700
    for line in stderr.splitlines():
        json.loads(line)  # logs are JSON, and only on stderr


def test_stdio_shutdown_method(tmp_path: Path) -> None:
    payload = (
        b'{"jsonrpc":"2.0","id":1,"method":"shutdown"}\n'
        b'{"jsonrpc":"2.0","id":2,"method":"health"}\n'
    )
    replies, _, code = run_stdio(tmp_path, payload)
    assert code == 0
    assert replies[0] == {"jsonrpc": "2.0", "id": 1, "result": {"ok": True}}
    # The request after shutdown is not served: the daemon stopped reading.
    assert [r["id"] for r in replies] == [1]


def test_stdio_oversized_frame(tmp_path: Path) -> None:
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "health", "params": {"x": "y" * 5000}})
    payload = big.encode() + b"\n" + b'{"jsonrpc":"2.0","id":2,"method":"health"}\n'
    replies, _, code = run_stdio(tmp_path, payload, "--max-frame-bytes", "2048")
    assert code == 0
    assert replies[0]["error"]["code"] == -32001
    assert replies[1]["id"] == 2 and replies[1]["result"]["ok"] is True


def test_version_commands(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "sidecar", "version"], capture_output=True, text=True, cwd=REPO
    )
    assert out.returncode == 0
    assert out.stdout.startswith("libravdbd ")
    script = Path(sys.executable).parent / "libravdbd"
    same = subprocess.run([str(script), "version"], capture_output=True, text=True)
    assert same.stdout == out.stdout


def test_bad_flag_exits_nonzero(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "sidecar", "serve", "--log-level", "chatty", "--stdio"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=daemon_env(tmp_path),
    )
    assert out.returncode == 1
    assert "log level" in out.stderr
    assert out.stdout == ""
