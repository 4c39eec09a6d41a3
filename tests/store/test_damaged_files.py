"""A damaged store is refused in one line; a damaged record is skipped, not fatal.

Regressions: a corrupt `store.sqlite3` (header, truncation) or an `index` that is a file
gave a 43-line traceback and then SIGABRT (exit 134); 50 flipped bytes in one record's
metadata made `list_collection` of its whole collection fail with -32603, quoting the
record's text in the reply and the log.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from sidecar.store import CorruptStore, Store
from tests.support import RawConnection, start_daemon

pytestmark = pytest.mark.sqlite_only("damaged SQLite pages and index files")

SECRET = "the safe code is 4417"


def _seed(data: Path, n: int = 400) -> None:
    rng = np.random.default_rng(1)
    with Store.open(data, embed_dims=384) as store:
        for i in range(n):
            vec = rng.standard_normal(384).astype(np.float32)
            text = SECRET if i == 7 else f"record number {i} about gardening"
            store.put("user:u", f"r{i}", text=text, metadata={"i": i}, vector=vec)


def _refused(tmp: Path) -> tuple[int, str]:
    daemon = start_daemon(tmp, "--tcp", "127.0.0.1:0", wait=False)
    out, _ = daemon.proc.communicate(timeout=60)
    assert out == b""
    return daemon.proc.returncode, daemon.stderr_text()


@pytest.mark.parametrize("damage", ["header", "truncated"])
def test_corrupt_database_is_one_line_and_exit_1(tmp_path: Path, damage: str) -> None:
    data = tmp_path / "data"
    _seed(data)
    db = data / "store.sqlite3"
    if damage == "header":
        with db.open("r+b") as fh:
            fh.write(b"X" * 16)
    else:
        with db.open("r+b") as fh:
            fh.truncate(5000)
    code, err = _refused(tmp_path)
    assert code == 1
    lines = [line for line in err.splitlines() if not line.startswith("{")]
    assert len(lines) == 1, err[-3000:]
    assert str(db) in lines[0] and "damaged" in lines[0] and "backup" in lines[0]
    assert "Traceback" not in err and "terminate called" not in err


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_damaged_pages_that_start_up_does_not_read_are_refused(tmp_path: Path, seed: int) -> None:
    """Found by make stress: records' pages are not read at start, so the store opened and
    only later reads failed. Every page is checked before the store is used."""
    data = tmp_path / "data"
    rng = np.random.default_rng(seed)
    with Store.open(data, embed_dims=16) as store:
        for i in range(60):
            vec = rng.standard_normal(16).astype(np.float32)
            store.put("user:u", f"r{i}", text=f"record {i} about lanterns", vector=vec)
    db = data / "store.sqlite3"
    raw = bytearray(db.read_bytes())
    for page in range(1, len(raw) // 4096, 2):  # 300 bytes inside every other page
        at = page * 4096 + 100
        raw[at : at + 300] = rng.integers(0, 256, 300, dtype=np.uint8).tobytes()
    db.write_bytes(bytes(raw))
    with pytest.raises(CorruptStore) as refused:
        Store.open(data, embed_dims=16).close()
    assert str(db) in refused.value.message and "backup" in refused.value.message


def test_index_path_that_is_a_file_is_moved_aside(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _seed(data, 20)
    index = data / "index"
    if index.is_dir():
        for f in index.iterdir():
            f.unlink()
        index.rmdir()
    index.write_text("not a directory")
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        with RawConnection(daemon.endpoint) as conn:
            listed = conn.call("list_collection", {"collection": "user:u"})["result"]["results"]
        assert len(listed) == 20
    finally:
        daemon.stop()
    assert index.is_dir()
    assert [p.name for p in data.glob("index.not-a-directory.*")]


def test_a_damaged_record_is_skipped_and_reported(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _seed(data)
    with sqlite3.connect(data / "store.sqlite3") as conn:
        bad = b'{"i": 7, "note": "' + bytes(range(0x80, 0xB2)) + b'"}'
        conn.execute("UPDATE records SET metadata = CAST(? AS TEXT) WHERE id = 'r7'", (bad,))
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        with RawConnection(daemon.endpoint) as conn:
            listed = conn.call("list_collection", {"collection": "user:u"})
            found = conn.call("search_text", {"collection": "user:u", "text": "safe code", "k": 5})
            assembled = conn.call(
                "search", {"query": "gardening record", "namespace": "u", "scopes": ["durable"]}
            )
            status = conn.call("status")["result"]
    finally:
        daemon.stop()
    results = listed["result"]["results"]
    assert len(results) == 399 and "r7" not in {r["id"] for r in results}
    assert "error" not in found and "r7" not in {r["id"] for r in found["result"]["results"]}
    assert "error" not in assembled
    log = daemon.stderr_text()
    assert SECRET not in log and SECRET not in str(listed)
    reports = [e for e in daemon.log_events() if e.get("event") == "store.bad_record"]
    assert reports and reports[0]["id"] == "r7" and reports[0]["collection"] == "user:u"
    assert status["records"]["badRecords"] == 1


def test_a_vanished_database_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _seed(data, 5)
    (data / "store.sqlite3").unlink()
    code, err = _refused(tmp_path)
    assert code == 1
    assert "store.sqlite3 is missing" in err and "Restore store.sqlite3 from a backup" in err
    assert not (data / "store.sqlite3").exists()  # no empty store was created in its place
