"""No silent wrong results at start-up: an embedding model that cannot load stops the
daemon with one line naming the cause, unless a fallback is configured, and then health
says the daemon is degraded and why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import RawConnection, daemon_env, start_daemon

pytestmark = pytest.mark.sqlite_only("model start-up failures (PostgreSQL's: tests/multi_daemon)")


def _serve(tmp: Path, env_extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**daemon_env(tmp / "home"), **env_extra}
    return subprocess.run(
        [sys.executable, "-m", "sidecar", "serve", "--tcp", "127.0.0.1:0", "--data-dir",
         str(tmp / "data"), "--log-format", "json"],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip


def _last_line(stderr: str) -> str:
    return [line for line in stderr.splitlines() if line.strip()][-1]


def test_a_profile_without_its_files_stops_the_start(tmp_path: Path) -> None:
    # Regression: nomic-embed-text-v1.5 without its files silently ran MiniLM, health ok.
    done = _serve(tmp_path, {"LIBRAVDB_EMBEDDING_PROFILE": "nomic-embed-text-v1.5"})
    assert done.returncode == 1
    line = _last_line(done.stderr)
    assert line.startswith("libravdbd: ") and "nomic-embed-text-v1.5" in line
    assert done.stdout == ""  # no endpoint line: nothing is served


def test_wrong_dimensions_name_the_setting(tmp_path: Path) -> None:
    # Regression: the line said "embedding dimension unknown (no embedder)", the real
    # reason only in an earlier JSON log line.
    done = _serve(tmp_path, {"LIBRAVDB_EMBEDDING_DIMENSIONS": "999"})
    assert done.returncode == 1
    line = _last_line(done.stderr)
    assert line.startswith("libravdbd: ") and "LIBRAVDB_EMBEDDING_DIMENSIONS" in line


def test_an_explicit_fallback_runs_degraded_and_says_why(tmp_path: Path) -> None:
    daemon = start_daemon(
        tmp_path,
        "--tcp",
        "127.0.0.1:0",
        env_extra={
            "LIBRAVDB_EMBEDDING_PROFILE": "nomic-embed-text-v1.5",
            "LIBRAVDB_FALLBACK_PROFILE": "all-minilm-l6-v2",
        },
    )
    try:
        with RawConnection(daemon.endpoint) as conn:
            health = conn.call("health", {})["result"]
            assert health["ok"] is True
            assert health["message"].startswith("degraded: ")
            assert "nomic-embed-text-v1.5 unavailable" in health["message"]
            embedder = conn.call("status", {})["result"]["models"]["embedder"]
            assert embedder["state"] == "degraded" and embedder["profile"] == "all-minilm-l6-v2"
    finally:
        assert daemon.stop() == 0
