"""Memories are readable by their owner only.

Regression: `store.sqlite3`, `-wal`, `-shm` and `LOCK` were created 0644 and `index/` 0755,
so in a pre-existing 0755 data directory every memory was readable by all local users.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from sidecar.store import Store
from tests.support import RawConnection, start_daemon
from tests.test_tools import libravdb

pytestmark = pytest.mark.sqlite_only("file modes of the SQLite data directory")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_daemon_files_are_private_and_a_shared_data_dir_is_reported(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        with RawConnection(daemon.endpoint) as conn:
            reply = conn.call(
                "ingest",
                {"sessionId": "s", "messages": [{"role": "user", "content": "my bank is Nordea"}]},
            )
            assert reply["result"]["ingested"] == 1
            conn.call("flush")
            for name in ("store.sqlite3", "store.sqlite3-wal", "store.sqlite3-shm", "LOCK"):
                assert _mode(data / name) == 0o600, name
            assert _mode(data / "index") == 0o700
    finally:
        daemon.stop()
    warnings = [e for e in daemon.log_events() if e.get("event") == "data_dir_not_private"]
    assert warnings and warnings[0]["fix"] == f"chmod 700 {data}"
    assert _mode(data) == 0o755  # the user's directory is reported, not changed


def test_files_of_an_earlier_version_are_tightened(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = Store.open(data, embed_dims=8, background=False)
    store.close()
    for path in [data / "store.sqlite3", data / "LOCK"]:
        os.chmod(path, 0o644)
    os.chmod(data / "index", 0o755)
    with Store.open(data, embed_dims=8, background=False):
        assert _mode(data / "store.sqlite3") == 0o600
        assert _mode(data / "LOCK") == 0o600
        assert _mode(data / "index") == 0o700


def test_export_file_is_private(tmp_path: Path) -> None:
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    daemon.stop()
    dump = tmp_path / "dump.ndjson"
    done = libravdb(tmp_path, "export", "--data-dir", str(tmp_path / "data"), "-o", str(dump))
    assert done.returncode == 0, done.stderr
    assert _mode(dump) == 0o600
