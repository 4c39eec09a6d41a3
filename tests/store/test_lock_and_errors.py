"""One daemon per directory; fingerprint refusal; read-only / full disk keep the store intact.

The directory lock, the full and read-only SQLite file are SQLite's; their PostgreSQL
counterparts (one database shared by several stores, a server that goes away, a read-only
database) are in ``test_pg_backend.py``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sidecar.store import (
    FingerprintMismatch,
    Put,
    StorageUnavailable,
    Store,
    StoreClosed,
    StoreLocked,
)
from sidecar.store.backend import open_store

from .conftest import Location

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.sqlite_only("the data directory's LOCK file (PostgreSQL: shared by design)")
def test_second_opener_in_process_is_refused(data_dir: Path) -> None:
    with Store.open(data_dir, embed_dims=4):
        with pytest.raises(StoreLocked) as exc:
            Store.open(data_dir, embed_dims=4)
        assert f"process {os.getpid()}" in str(exc.value)
        assert exc.value.data["pid"] == os.getpid()
    with Store.open(data_dir, embed_dims=4):  # released on close
        pass


@pytest.mark.sqlite_only("the data directory's LOCK file (PostgreSQL: shared by design)")
def test_lock_names_other_process_and_dies_with_it(data_dir: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import sys, structlog
                structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
                from sidecar.store import Store
                s = Store.open(sys.argv[1], embed_dims=4)
                print("ready", flush=True)
                sys.stdin.read()
                """
            ),
            str(data_dir),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        cwd=REPO,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == b"ready"
        with pytest.raises(StoreLocked, match=f"in use by process {holder.pid}"):
            Store.open(data_dir, embed_dims=4)
    finally:
        holder.kill()
        holder.wait()
    with Store.open(data_dir, embed_dims=4):  # kill -9 released it
        pass


def test_fingerprint_mismatch_is_refused_with_both(location: Location) -> None:
    with open_store(location, embed_dims=4, fingerprint="aaa111", model="mini") as s:
        s.put("user:u1", "a", vector=[1, 0, 0, 0])
    with pytest.raises(FingerprintMismatch) as exc:
        open_store(location, embed_dims=4, fingerprint="bbb222", model="other")
    msg = str(exc.value)
    assert "aaa111" in msg and "bbb222" in msg and "libravdb reembed" in msg
    assert "mini" in msg and "other" in msg
    assert exc.value.data["stored"] == "aaa111" and exc.value.data["current"] == "bbb222"
    with open_store(location, embed_dims=4, fingerprint=""):  # "" skips the check
        pass
    with open_store(location, embed_dims=4, fingerprint="aaa111") as s:
        assert s.count("user:u1") == 1


@pytest.mark.sqlite_only("SQLite's max_page_count stands in for a full disk")
def test_full_disk_is_an_error_and_store_stays_intact(data_dir: Path) -> None:
    with Store.open(data_dir, embed_dims=4) as store:
        store.put("user:u1", "keep", text="kept", vector=[1, 0, 0, 0])
        pages = store._wconn.execute("PRAGMA page_count").fetchone()[0]
        store._writer.submit(
            lambda tx: tx.conn.execute(f"PRAGMA max_page_count = {pages + 1}").fetchall(),
            raw=True,
        ).result()
        big = "x" * 200_000
        with pytest.raises(StorageUnavailable, match="full"):
            store.write([Put("user:u1", f"big{i}", big, {}, [0, 1, 0, 0]) for i in range(20)])
        # nothing of the failed batch is visible; the store still answers
        assert store.get("user:u1", "big0") is None
        assert [h.id for h in store.search("user:u1", [0, 1, 0, 0], 5)] == ["keep"]
        assert store.count("user:u1") == 1
        store._writer.submit(
            lambda tx: tx.conn.execute("PRAGMA max_page_count = 1073741823").fetchall(),
            raw=True,
        ).result()
        store.put("user:u1", "after", vector=[0, 1, 0, 0])  # writes work again
    with Store.open(data_dir, embed_dims=4) as store:
        assert [r.id for r in store.list_records("user:u1")] == ["after", "keep"]


@pytest.mark.sqlite_only("SQLite's query_only on the writer's connection")
def test_read_only_storage_is_an_error(data_dir: Path) -> None:
    with Store.open(data_dir, embed_dims=4) as store:
        store.put("user:u1", "keep", vector=[1, 0, 0, 0])
        store._writer.submit(
            lambda tx: tx.conn.execute("PRAGMA query_only = ON").fetchall(), raw=True
        ).result()
        with pytest.raises(StorageUnavailable, match=r"readonly|read-only"):
            store.put("user:u1", "nope", vector=[1, 0, 0, 0])
        with pytest.raises(StorageUnavailable):
            store.delete("user:u1", "keep")
        assert store.get("user:u1", "keep") is not None
        assert store.search("user:u1", [1, 0, 0, 0], 1)[0].id == "keep"
        store._writer.submit(
            lambda tx: tx.conn.execute("PRAGMA query_only = OFF").fetchall(), raw=True
        ).result()
        store.put("user:u1", "yes", vector=[1, 0, 0, 0])
        assert store.count("user:u1") == 2


@pytest.mark.sqlite_only("a data directory path that cannot be created")
def test_unwritable_directory_is_storage_unavailable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StorageUnavailable):
        Store.open(blocker / "data", embed_dims=4)


def test_closed_store_raises(location: Location) -> None:
    store = open_store(location, embed_dims=4)
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreClosed):
        store.put("user:u1", "a", vector=[1, 0, 0, 0])
    with pytest.raises(StoreClosed):
        store.get("user:u1", "a")
