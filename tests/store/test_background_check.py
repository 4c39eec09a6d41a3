"""The page check of a large database runs beside the start, and nothing is written before
it passed (docs/store.md, "Durability promise"; ``sidecar/store/page_check.py``).

The threshold is lowered to 0 bytes, so that these small files take the background path.
Real SQLite files throughout; a check is slowed, where a test needs it running, by a hook
in SQLite's own progress handler.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
import traceback
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest

from sidecar.config import StoreSettings
from sidecar.priority import BACKGROUND_NICE
from sidecar.store import CorruptStore, Store, StoreClosed
from sidecar.store import page_check as page_check_mod
from sidecar.store.types import Put
from tests.support import RawConnection, start_daemon
from tests.test_tools import libravdb

pytestmark = pytest.mark.sqlite_only("SQLite's page check")

DIMS = 16
BACKGROUND = StoreSettings(page_check_background_bytes=0)
N = 40


def _text(i: int) -> str:
    # about 3 kB: one record to a 4 kB page, so one damaged page costs one record
    return f"<<record {i:03d}>> " + "about lanterns and tides " * 120


def _vec(i: int) -> Any:
    return np.random.default_rng(i).standard_normal(DIMS).astype(np.float32)


def _seed(data: Path, **kw: Any) -> None:
    with Store.open(data, embed_dims=DIMS, **kw) as store:
        store.put_many([Put("user:u", f"r{i}", _text(i), {"i": i}, _vec(i)) for i in range(N)])


def _open(data: Path, **kw: Any) -> Store:
    return Store.open(data, embed_dims=DIMS, settings=BACKGROUND, **kw)


def _damage_page_of(db: Path, i: int) -> None:
    """Break the b-tree header of the page that holds record ``i``."""
    raw = db.read_bytes()
    page = raw.index(f"<<record {i:03d}>>".encode()) // int.from_bytes(raw[16:18], "big")
    assert page > 0
    _break_page(db, page + 1)


def _break_page(db: Path, number: int) -> None:
    """Break the b-tree header of page ``number`` (SQLite counts pages from 1)."""
    raw = bytearray(db.read_bytes())
    size = int.from_bytes(raw[16:18], "big")
    raw[(number - 1) * size : (number - 1) * size + 8] = b"\xff" * 8
    db.write_bytes(bytes(raw))


def _leave_in_log(db: Path) -> None:
    """A committed change left in the write-ahead log (as by a daemon killed before its
    checkpoint): a read-only connection, closed last, keeps SQLite from checkpointing it."""
    rw = sqlite3.connect(db, isolation_level=None)
    rw.execute("PRAGMA wal_autocheckpoint = 0")
    rw.execute("INSERT INTO meta (key, value) VALUES ('note', 'in the log')")
    ro = sqlite3.connect(f"file:{quote(str(db))}?mode=ro", uri=True)
    ro.execute("SELECT count(*) FROM meta").fetchone()
    rw.close()
    ro.close()
    assert db.with_name(db.name + "-wal").stat().st_size > 0


def _digests(data: Path) -> dict[str, str]:
    """The database file and its log, byte for byte (a missing log as an empty one)."""
    out = {}
    for name in ("store.sqlite3", "store.sqlite3-wal"):
        path = data / name
        out[name] = hashlib.sha256(path.read_bytes() if path.exists() else b"").hexdigest()
    return out


def test_a_write_waits_until_the_background_check_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    _seed(data)
    release = threading.Event()
    nice: list[int] = []

    def hold() -> None:
        nice.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        release.wait(60)

    monkeypatch.setattr(page_check_mod, "_PROGRESS_STEPS", 10)
    monkeypatch.setattr(page_check_mod, "progress_hook", hold)
    store = _open(data)
    try:
        assert store.page_check_report() == {
            "state": "running",
            "mode": "background",
            "seconds": None,
        }
        fut = store.write_future([Put("user:u", "new", "a new record", {}, _vec(99))])
        time.sleep(0.3)
        assert not fut.done()  # held: the check has not passed
        rec = store.get("user:u", "r3")  # reads are served meanwhile
        assert rec is not None and rec.text == _text(3)
        release.set()
        assert fut.result(timeout=30)[0].changed
        report = store.page_check_report()
        assert report is not None and report["state"] == "ok"  # acknowledged after it passed
        assert store.stats()["page_check"]["state"] == "ok"
        # the check gave way to the daemon's other threads; they kept their priority
        assert nice and set(nice) == {BACKGROUND_NICE}
        assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == 0
    finally:
        store.close()
    monkeypatch.setattr(page_check_mod, "progress_hook", None)
    with _open(data) as again:
        rec = again.get("user:u", "new")
        assert rec is not None and rec.text == "a new record"


def test_a_small_file_is_checked_before_the_open_returns(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _seed(data)
    with Store.open(data, embed_dims=DIMS) as store:  # the default threshold: 256 MiB
        report = store.page_check_report()
        assert report is not None and (report["state"], report["mode"]) == ("ok", "sync")


def test_an_open_that_writes_checks_first(tmp_path: Path) -> None:
    """Only an open that writes nothing takes the background path: a restart of an
    up-to-date store writes nothing; a changed profile is written, after a check."""
    data = tmp_path / "data"
    _seed(data, fingerprint="fp-1", model="m", profile={"dims": DIMS})
    with _open(data, fingerprint="fp-1", model="m", profile={"dims": DIMS}) as store:
        assert store.page_check_report()["mode"] == "background"  # type: ignore[index]
    with _open(data, fingerprint="fp-1", model="m", profile={"dims": DIMS, "x": 1}) as store:
        assert store.page_check_report()["mode"] == "sync"  # type: ignore[index]
    _damage_page_of(data / "store.sqlite3", 20)
    before = _digests(data)
    with pytest.raises(CorruptStore):  # refused at open, as before: the open would write
        _open(data, fingerprint="fp-1", model="m", profile={"dims": DIMS, "x": 2})
    assert _digests(data) == before


def test_a_file_not_in_wal_mode_is_checked_before_the_open_writes_its_header(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    _seed(data)
    with sqlite3.connect(data / "store.sqlite3", isolation_level=None) as raw:
        raw.execute("PRAGMA journal_mode = DELETE")
    raw.close()
    with _open(data) as store:  # setting WAL mode writes the header: checked first
        assert store.page_check_report()["mode"] == "sync"  # type: ignore[index]


def test_damage_found_in_the_background_fails_writes_and_writes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _seed(data)
    db = data / "store.sqlite3"
    _damage_page_of(db, 20)
    _leave_in_log(db)
    before = _digests(data)
    failures: list[Exception] = []
    store = _open(data)
    store.on_failure(failures.append)
    try:
        assert store.page_check_report()["mode"] == "background"  # type: ignore[index]
        rec = store.get("user:u", "r3")  # an undamaged record reads
        assert rec is not None and rec.text == _text(3)
        with pytest.raises(CorruptStore) as refused:
            store.put("user:u", "new", text="a new record", vector=_vec(99))
        message = refused.value.message
        assert str(db) in message and "damaged" in message and "backup" in message
        with pytest.raises(CorruptStore):  # and every later write
            store.delete("user:u", "r3")
        with pytest.raises(CorruptStore):
            store.checkpoint()
        depths = []
        for i in range(30):  # one error object for all: its traceback does not pile up
            with pytest.raises(CorruptStore) as again:
                store.put("user:u", f"n{i}", text="another", vector=_vec(i))
            with pytest.raises(CorruptStore) as flushed:
                store.checkpoint()
            depths.append(
                (len(traceback.extract_tb(again.tb)), len(traceback.extract_tb(flushed.tb)))
            )
        assert len(set(depths)) == 1, depths
        with pytest.raises(CorruptStore) as read:  # the damaged record's read
            store.get("user:u", "r20")
        assert str(db) in read.value.message
        assert store.page_check_report()["state"] == "failed"  # type: ignore[index]
        assert len(failures) == 1 and isinstance(failures[0], CorruptStore)
    finally:
        store.close()
    assert _digests(data) == before  # nothing was written: not even the log checkpointed


def test_close_interrupts_a_running_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    _seed(data)
    # 50 ms every 10 SQLite steps: the whole check would take minutes
    monkeypatch.setattr(page_check_mod, "_PROGRESS_STEPS", 10)
    monkeypatch.setattr(page_check_mod, "progress_hook", lambda: time.sleep(0.05))
    store = _open(data)
    fut = store.write_future([Put("user:u", "new", "a new record", {}, _vec(99))])
    time.sleep(0.3)
    assert store.page_check_report()["state"] == "running"  # type: ignore[index]
    started = time.monotonic()
    store.close()
    assert time.monotonic() - started < 2.0
    assert store.page_check_report()["state"] == "cancelled"  # type: ignore[index]
    with pytest.raises(StoreClosed):
        fut.result(timeout=5)
    monkeypatch.setattr(page_check_mod, "progress_hook", None)
    with _open(data) as again:  # checked again from the start; the held write was not made
        assert again.get("user:u", "new") is None
        assert again.count("user:u") == N


CONFIG = """
[store]
page_check_background_bytes = 0
"""


def test_the_daemon_exits_1_with_one_line_when_the_background_check_fails(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    _seed(data)
    first = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")  # records the model: a write
    try:
        with RawConnection(first.endpoint) as conn:
            status = conn.call("status")["result"]
        assert status["ok"]
        check = status["models"]["store"]["pageCheck"]
        assert check["state"] == "ok" and check["mode"] == "sync"
    finally:
        assert first.stop() == 0
    db = data / "store.sqlite3"
    _damage_page_of(db, 20)
    config = tmp_path / "libravdb.toml"
    config.write_text(CONFIG)
    daemon = start_daemon(
        tmp_path, "--tcp", "127.0.0.1:0", extra_args=("--config", str(config)), wait=False
    )
    out, _ = daemon.proc.communicate(timeout=120)
    assert daemon.proc.returncode == 1
    err = daemon.stderr_text()
    lines = [line for line in err.splitlines() if not line.startswith("{")]
    assert len(lines) == 1, err[-3000:]
    assert str(db) in lines[0] and "damaged" in lines[0] and "backup" in lines[0]
    assert "Traceback" not in err
    checked = [e for e in daemon.log_events() if e.get("event") == "store.pages_checked"]
    assert [(e["mode"], e["state"]) for e in checked] == [("background", "failed")]
    # it had opened and announced its endpoint; the damaged record was never read
    assert out.decode().strip()


def test_an_offline_export_checks_every_page_before_it_starts(tmp_path: Path) -> None:
    """The background check is the daemon's: an export has no endpoint to announce
    sooner, so even with the threshold at 0 a damaged store is refused up front, with
    no file written, rather than exported as far as its pages read."""
    data = tmp_path / "data"
    _seed(data)
    first = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")  # records the model
    assert first.stop() == 0
    db = data / "store.sqlite3"
    with sqlite3.connect(db) as conn:  # an index an export does not read
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_schema WHERE name = 'records_cid_session_time'"
        ).fetchone()
    conn.close()
    _break_page(db, root)
    config = tmp_path / "libravdb.toml"
    config.write_text(CONFIG)
    out = tmp_path / "dump.ndjson"
    args = ["export", "--config", str(config), "--data-dir", str(data), "-o", str(out)]
    done = libravdb(tmp_path, *args)
    assert done.returncode == 1, done.stderr
    assert "damaged" in done.stderr and str(data / "store.sqlite3") in done.stderr
    assert not out.exists() and not list(tmp_path.glob("dump.ndjson*"))
