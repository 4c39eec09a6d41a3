"""A daemon on a PostgreSQL store, operated: clear one-line start-up failures (server
unreachable, the vector extension missing, a malformed URL), a URL's password in no log
line and no message, and ``libravdb doctor`` reporting the backend and its problems."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from libravdb_client import Client
from libravdb_client.testing import DaemonProcess

from tests.support import REPO, daemon_env

SECRET = "s3cret-Pw"


def _serve(tmp: Path, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *(sys.executable, "-m", "sidecar", "serve", "--tcp", "127.0.0.1:0"),
            *("--data-dir", str(tmp / "data"), "--store", url, "--log-format", "json"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=daemon_env(tmp / "home"),
        timeout=180,
    )


def _last_line(done: subprocess.CompletedProcess[str]) -> str:
    return done.stderr.strip().splitlines()[-1]


def _with_password(url: str, role: str = "postgres") -> str:
    """The test server trusts local connections: a password in the URL is sent, unused."""
    return url.replace("postgres:@", f"{role}:{SECRET}@", 1)


def test_startup_failures_are_one_clear_line(tmp_path: Path, pg_server: Any) -> None:
    unreachable = _serve(tmp_path, f"postgresql://bob:{SECRET}@127.0.0.1:1/memory")
    line = _last_line(unreachable)
    assert unreachable.returncode == 1
    assert line.startswith("libravdbd: cannot open the store database postgresql://bob:***@")
    assert "Connection refused" in line
    malformed = _serve(tmp_path, f"postgresql://bob:{SECRET}@db.example:port/memory")
    assert malformed.returncode == 1
    assert "is malformed" in _last_line(malformed)
    # a role that may not create the extension, on a database that does not have it
    with pg_server.admin() as admin:
        admin.execute("CREATE ROLE app_user LOGIN")
        admin.execute("CREATE DATABASE app_memory OWNER app_user TEMPLATE template0")
    no_vector = _serve(tmp_path, _with_password(pg_server.url("app_memory"), "app_user"))
    assert no_vector.returncode == 1
    assert "CREATE EXTENSION vector" in _last_line(no_vector)
    for done in (unreachable, malformed, no_vector):
        assert SECRET not in done.stderr + done.stdout


def test_the_password_of_the_url_is_in_no_log_line(tmp_path: Path, pg_server: Any) -> None:
    url = _with_password(pg_server.new_database()) + f"&password={SECRET}"
    daemon = DaemonProcess.start(
        "tcp", data_dir=tmp_path / "data", home=tmp_path / "home", args=["--store", url]
    )
    try:
        with Client(daemon.endpoint, timeout=120) as client:
            client.ingest("s", [{"role": "user", "content": "I keep bees."}], user_id="u")
            assert client.search("bees", user_id="u").hits
            status = client.status()
            assert status.models["store"].profile == "postgresql+pgvector"
        daemon.stop()
        logs = daemon.stderr_text()
    finally:
        daemon.close()
    assert SECRET not in logs
    ready = [json.loads(x) for x in logs.splitlines() if '"daemon_ready"' in x]
    assert ready and ready[0]["store"].startswith("postgresql://postgres:***@")


def _doctor(home: Path, *args: str) -> dict[str, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "sidecar", "doctor", "--json", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=daemon_env(home),
        timeout=300,
    )
    assert SECRET not in done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is (done.returncode == 0)
    return {c["name"]: c for c in report["checks"]}


def test_doctor_reports_the_backend_and_its_problems(tmp_path: Path, pg_server: Any) -> None:
    url = _with_password(pg_server.new_database())
    daemon = DaemonProcess.start(
        "tcp", data_dir=tmp_path / "data", home=tmp_path / "home", args=["--store", url]
    )
    try:
        with Client(daemon.endpoint, timeout=120) as client:
            client.ingest("s", [{"role": "user", "content": "I keep bees."}], user_id="u")
        found = _doctor(
            tmp_path / "home",
            *("--store", url, "--endpoint", daemon.endpoint),
            *("--data-dir", str(tmp_path / "data")),  # the daemon's, which doctor checks
        )
    finally:
        daemon.close()
    assert all(c["status"] == "ok" for c in found.values()), found
    assert found["backend"]["detail"].startswith("postgresql: postgresql://postgres:***@")
    assert "1 daemon(s) have it open" in found["store"]["detail"]
    assert "store and settings agree" in found["fingerprint"]["detail"]
    assert "lock" not in found and "indexes" not in found  # SQLite's file checks

    gone = _doctor(tmp_path / "home", "--store", f"postgresql://bob:{SECRET}@127.0.0.1:1/m")
    assert gone["store"]["status"] == "FAIL" and "cannot reach" in gone["store"]["detail"]
    with pg_server.admin() as admin:
        admin.execute("CREATE ROLE doctor_user LOGIN")
        admin.execute("CREATE DATABASE doctor_db OWNER doctor_user TEMPLATE template0")
    bare = _doctor(
        tmp_path / "home", "--store", _with_password(pg_server.url("doctor_db"), "doctor_user")
    )
    assert bare["store"]["status"] == "warn"
    assert "CREATE EXTENSION vector" in bare["store"]["fix"]


def _socket(pg_server: Any) -> tuple[str, str]:
    """The test server's socket directory and port (it listens on a Unix socket only)."""
    host = parse_qs(urlsplit(pg_server.url()).query)["host"][0]
    with pg_server.admin() as conn:
        row = conn.execute("SHOW port").fetchone()
    return host, str(row[0])


def test_a_failover_url_with_a_password_serves(tmp_path: Path, pg_server: Any) -> None:
    """``h1:port,h2:port`` with a password refused to start ("Port could not be cast"):
    libpq reads the list, the first host is down, the daemon serves through the second."""
    dbname = urlsplit(pg_server.new_database()).path.lstrip("/")
    sock, port = _socket(pg_server)
    hosts = f"{quote('/nonexistent-libravdb', safe='')}:{port},{quote(sock, safe='')}:{port}"
    url = f"postgresql://postgres:{quote('Qx7@Zr9/Wv2:Ty4', safe='')}@{hosts}/{dbname}"
    daemon = DaemonProcess.start(
        "tcp", data_dir=tmp_path / "data", home=tmp_path / "home", args=["--store", url]
    )
    try:
        with Client(daemon.endpoint, timeout=120) as client:
            assert client.health().ok
            client.ingest("s", [{"role": "user", "content": "I keep bees."}], user_id="u")
            assert client.search("bees", user_id="u").hits
        daemon.stop()
        logs = daemon.stderr_text()
    finally:
        daemon.close()
    assert not [t for t in ("Qx7", "Zr9", "Wv2", "Ty4") if t in logs]


def test_an_unescaped_at_in_the_password_is_refused_and_not_shown(tmp_path: Path) -> None:
    """libpq ends the password at the first '@' and took the rest for a host, which the
    start-up error quoted ("could not translate host name "Zr9@127.0.0.1""): refused now
    before connecting, naming the fix, with no piece of the password."""
    for password in ("Qx7@Zr9", "Qx7/Zr9", "Qx7@Zr9/Wv2:Ty4"):
        done = _serve(tmp_path, f"postgresql://bob:{password}@127.0.0.1:1,127.0.0.1:2/memory")
        assert done.returncode == 1
        line = _last_line(done)
        assert line.startswith("libravdbd: ") and "%40" in line
        assert not [t for t in ("Qx7", "Zr9", "Wv2", "Ty4") if t in done.stderr + done.stdout]
