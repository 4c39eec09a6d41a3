"""`libravdb export` never destroys a backup, and exports one user whole.

Regressions: `export -o backup.ndjson` while the daemon ran truncated the existing backup to
0 bytes before refusing; `--namespace dana` exported 0 records without a word and
`--namespace user:dana` missed `turns:dana`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import RawConnection, start_daemon
from tests.test_tools import libravdb

pytestmark = pytest.mark.sqlite_only("export beside a SQLite data directory and its lock")


def _records(dump: Path) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in dump.read_text().splitlines()]
    return [line for line in lines if line["kind"] == "record"]


def _collections(dump: Path) -> set[str]:
    lines = [json.loads(line) for line in dump.read_text().splitlines()]
    return {str(line["name"]) for line in lines if line["kind"] == "collection"}


def test_export_while_the_daemon_runs_keeps_the_existing_backup(tmp_path: Path) -> None:
    data = tmp_path / "data"
    backup = tmp_path / "backup.ndjson"
    backup.write_text('{"kind": "header"}\nprecious\n')
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        done = libravdb(tmp_path, "export", "--data-dir", str(data), "-o", str(backup))
    finally:
        daemon.stop()
    assert done.returncode == 1
    assert backup.read_text() == '{"kind": "header"}\nprecious\n'
    assert str(daemon.proc.pid) in done.stderr
    assert "stop the daemon" in done.stderr and "Nothing was written" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if "backup" in p.name) == ["backup.ndjson"]


def _two_users(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        with RawConnection(daemon.endpoint) as conn:
            for user, session, text in (
                ("dana", "d1", "I prefer tea in the morning, never coffee."),
                ("dana", "d2", "My sister lives in Porto since last spring."),
                ("eli", "e1", "I am training for a marathon in October."),
            ):
                reply = conn.call(
                    "ingest",
                    {
                        "sessionId": session,
                        "userId": user,
                        "messages": [
                            {"role": "user", "content": text},
                            {"role": "assistant", "content": "Noted, thank you."},
                        ],
                    },
                )
                assert reply["result"]["ingested"] == 2
    finally:
        assert daemon.stop() == 0
    return data


def test_export_user_takes_everything_of_one_user(tmp_path: Path) -> None:
    data = _two_users(tmp_path)
    for flag, value in (("--user", "dana"), ("--namespace", "dana"), ("--namespace", "user:dana")):
        dump = tmp_path / f"dana{flag}{value}.ndjson"
        done = libravdb(tmp_path, "export", "--data-dir", str(data), flag, value, "-o", str(dump))
        assert done.returncode == 0, done.stderr
        names = _collections(dump)
        assert "turns:dana" in names
        assert {"session_raw:d1", "session_raw:d2"} <= names
        assert not any("eli" in n or n.endswith(":e1") for n in names)
        texts = {str(r["text"]) for r in _records(dump)}
        assert "My sister lives in Porto since last spring." in texts
        assert not any("marathon" in t for t in texts)
        assert "namespace dana:" in done.stderr


def test_export_of_an_unknown_user_refuses_and_lists_the_known_ones(tmp_path: Path) -> None:
    data = _two_users(tmp_path)
    dump = tmp_path / "nobody.ndjson"
    done = libravdb(tmp_path, "export", "--data-dir", str(data), "--user", "dna", "-o", str(dump))
    assert done.returncode == 1
    assert "namespace 'dna' has no records" in done.stderr
    assert "dana, eli" in done.stderr
    assert not dump.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".nobody")] == []


def test_export_of_an_empty_store_warns(tmp_path: Path) -> None:
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    daemon.stop()
    dump = tmp_path / "empty.ndjson"
    done = libravdb(tmp_path, "export", "--data-dir", str(tmp_path / "data"), "-o", str(dump))
    assert done.returncode == 0, done.stderr
    assert "warning: the export holds no records" in done.stderr
    assert dump.exists()
