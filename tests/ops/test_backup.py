"""`libravdb backup` / `libravdb restore` against a real daemon, real SQLite files and the
real embedding model: a backup taken while turns keep arriving is one consistent
snapshot, restores into a store the daemon opens and searches, and every refusal changes
nothing."""

from __future__ import annotations

import json
import os
import shutil
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from libravdb_client import Client
from libravdb_client.testing import DaemonProcess

from sidecar.ops.backup_copy import make_backup
from sidecar.ops.backup_format import MANIFEST_NAME
from sidecar.store import lexical_files
from sidecar.store.schema import SCHEMA_VERSION
from tests.test_console import run

pytestmark = pytest.mark.sqlite_only("SQLite's online backup of the data directory")

NS = "ana"
SID = "s1"
T0 = 1_700_000_000_000
CONFIG = "[compaction]\nauto = false\n[store]\nexact_threshold = 5\n"


def _turn(i: int) -> dict[str, Any]:
    return {
        "id": f"t{i}",
        "role": "user",
        "content": f"note {i}: the blue heron number {i} nests by the quarry pond",
        "ts": T0 + i * 1000,
    }


def _env(home: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LIBRAVDB_")}
    return {**clean, "HOME": str(home)}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "home").mkdir()
    (tmp_path / "config.toml").write_text(CONFIG)
    return _env(tmp_path / "home")


def _daemon(tmp_path: Path, data: Path) -> DaemonProcess:
    return DaemonProcess.start(
        "tcp",
        data_dir=data,
        home=tmp_path / "home",
        env={"LIBRAVDB_CONFIG": str(tmp_path / "config.toml")},
        ready_timeout=60,
    )


def _export(data: Path, out: Path, env: dict[str, str]) -> dict[tuple[str, str], Any]:
    done = run(["export", "--data-dir", str(data), "-o", str(out)], env, timeout=120)
    assert done.returncode == 0, done.stderr
    records: dict[tuple[str, str], Any] = {}
    for line in out.read_text().splitlines():
        obj = json.loads(line)
        if obj["kind"] == "record":
            records[(obj["collection"], obj["id"])] = obj
    return records


class Writer(threading.Thread):
    """Ingests one turn per call, counting turns issued and acknowledged."""

    def __init__(self, endpoint: str, first: int) -> None:
        super().__init__(daemon=True)
        self.endpoint = endpoint
        self.next = first
        self.issued = first
        self.acked = first
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with Client(self.endpoint, timeout=60) as client:
                while not self.stop_event.is_set():
                    self.issued = self.next + 1
                    client.ingest(SID, [_turn(self.next)], user_id=NS)
                    self.next += 1
                    self.acked = self.next
        except BaseException as exc:  # reported by the test
            self.error = exc

    def wait_acked(self, count: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.acked < count and time.monotonic() < deadline and self.error is None:
            time.sleep(0.01)
        assert self.acked >= count, self.error


def test_backup_during_writes_is_one_snapshot_and_restores_a_searchable_store(
    tmp_path: Path, env: dict[str, str]
) -> None:
    data, copy = tmp_path / "data", tmp_path / "backup"
    with _daemon(tmp_path, data) as daemon:
        with Client(daemon.endpoint, timeout=60) as client:
            client.ingest(SID, [_turn(i) for i in range(10)], user_id=NS)
        writer = Writer(daemon.endpoint, 10)
        writer.start()
        writer.wait_acked(13)
        acked_before = writer.acked
        marks: dict[str, int] = {}

        def progress(done: int, total: int) -> None:
            # The snapshot was fixed before the first page was copied: every turn issued
            # from here on is newer than the backup, and three of them must land while the
            # copy is still running.
            if not marks:
                marks["issued"] = writer.issued
                writer.wait_acked(writer.issued + 3)
                marks["landed_during"] = writer.acked

        summary = make_backup(data, copy, step_pages=1, progress=progress)
        writer.wait_acked(marks["landed_during"] + 2)
        writer.stop_event.set()
        writer.join(60)
        assert writer.error is None
    assert summary.records > 0 and marks["landed_during"] >= marks["issued"] + 3

    original = _export(data, tmp_path / "original.ndjson", env)
    restored_dir = tmp_path / "restored"
    done = run(["restore", str(copy), "--data-dir", str(restored_dir)], env)
    assert done.returncode == 0, done.stderr
    assert f"restored {summary.records} records" in done.stderr
    assert not (restored_dir / "index").exists()  # derived: rebuilt at the next open
    restored = _export(restored_dir, tmp_path / "restored.ndjson", env)

    # A prefix of the sequential writes: every turn acknowledged before the backup began,
    # none issued after its snapshot, and no gap.
    raw = sorted(int(i[1:]) for c, i in restored if c == f"session_raw:{SID}")
    assert raw == list(range(len(raw)))
    assert acked_before <= len(raw) <= marks["issued"]  # the one in flight may be in
    assert {i for c, i in restored if c == f"turns:{NS}"} == {f"{SID}:t{n}" for n in raw}
    # Everything restored is in the final store as it was; only the session's ingest
    # state (its position counter) moved on since, by the later writes.
    changed = []
    for key, rec in restored.items():
        assert key in original, key
        if original[key] != rec:
            changed.append(key)
            assert original[key]["version"] > rec["version"]
    assert all(c.startswith("session_state:") for c, _ in changed), changed
    assert len(original) > len(restored)
    assert len(restored) == summary.records

    with _daemon(tmp_path, restored_dir) as daemon:
        with Client(daemon.endpoint, timeout=60) as client:
            hits = client.search("blue heron number 7 nests", user_id=NS, k=3).hits
            assert any("heron number 7 " in h.text for h in hits), hits
        _wait_for_log(daemon, '"index.built"')
    # The graph was rebuilt from the restored database and saved at shutdown.
    assert list((restored_dir / "index").glob("*.hnsw"))


def _wait_for_log(daemon: DaemonProcess, needle: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while needle not in daemon.stderr_text():
        assert time.monotonic() < deadline, daemon.stderr_tail()
        time.sleep(0.05)


@pytest.fixture
def small_backup(tmp_path: Path, env: dict[str, str]) -> Iterator[tuple[Path, Path]]:
    """A store of five turns and a CLI backup of it taken while its daemon runs."""
    data, copy = tmp_path / "data", tmp_path / "backup"
    with _daemon(tmp_path, data) as daemon:
        with Client(daemon.endpoint, timeout=60) as client:
            client.ingest(SID, [_turn(i) for i in range(5)], user_id=NS)
        done = run(["backup", str(copy), "--data-dir", str(data)], env)
        assert done.returncode == 0, done.stderr
        assert done.stderr.startswith("backed up ") and f"to {copy} in " in done.stderr
        assert done.stderr.count("\n") == 1
    yield data, copy


def _tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def test_cli_backup_is_private_and_complete(
    small_backup: tuple[Path, Path], tmp_path: Path
) -> None:
    _, copy = small_backup
    assert stat.S_IMODE(copy.stat().st_mode) == 0o700
    names = sorted(p.name for p in copy.iterdir())
    assert names == [MANIFEST_NAME, "store.sqlite3"]
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in copy.iterdir())
    manifest = json.loads((copy / MANIFEST_NAME).read_text())
    assert manifest["format"] == "libravdb-backup" and manifest["model"]
    assert manifest["records"] > 5 and len(manifest["fingerprint"]) == 64
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".backup")]


def test_backup_refuses_an_existing_path_and_a_missing_store(
    small_backup: tuple[Path, Path], tmp_path: Path, env: dict[str, str]
) -> None:
    data, copy = small_backup
    before = _tree(copy)
    done = run(["backup", str(copy), "--data-dir", str(data)], env)
    assert done.returncode == 1 and "already exists" in done.stderr
    assert _tree(copy) == before
    done = run(["backup", str(tmp_path / "b2"), "--data-dir", str(tmp_path / "nope")], env)
    assert done.returncode == 1 and "no store in" in done.stderr
    assert not (tmp_path / "b2").exists() and not (tmp_path / "nope").exists()


def test_backup_creates_missing_parents_and_names_a_file_in_the_way(
    small_backup: tuple[Path, Path], tmp_path: Path, env: dict[str, str]
) -> None:
    """A fresh account has no ~/backups: the backup makes it (owner-only) and says so; a
    file where a directory should be is refused by name, and nothing is left behind."""
    data, copy = small_backup
    target = tmp_path / "home" / "backups" / "2026" / "memory-1"
    done = run(["backup", str(target), "--data-dir", str(data)], env)
    assert done.returncode == 0, done.stderr
    assert f"to {target} (created {tmp_path / 'home' / 'backups'}) in " in done.stderr
    assert _tree(target).keys() == _tree(copy).keys()
    for made in (target.parent, target.parent.parent):
        assert stat.S_IMODE(made.stat().st_mode) == 0o700
    (tmp_path / "afile").write_text("not a directory")
    done = run(["backup", str(tmp_path / "afile" / "sub" / "b3"), "--data-dir", str(data)], env)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"libravdb backup: {tmp_path / 'afile'} is not a directory; nothing was written"
    )
    assert not (tmp_path / "afile" / "sub").exists()
    # A backup that fails after making its parents takes them away again.
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "store.sqlite3").write_bytes(b"not a database" * 100)
    done = run(
        ["backup", str(tmp_path / "x" / "y" / "b4"), "--data-dir", str(tmp_path / "bad")], env
    )
    assert done.returncode == 1 and "nothing was written" in done.stderr, done.stderr
    assert not (tmp_path / "x").exists()


def test_restore_refuses_while_a_daemon_holds_the_directory(
    small_backup: tuple[Path, Path], tmp_path: Path, env: dict[str, str]
) -> None:
    data, copy = small_backup
    with _daemon(tmp_path, data) as daemon:
        before = (data / "store.sqlite3").read_bytes()
        done = run(["restore", str(copy), "--data-dir", str(data), "--force"], env)
        assert done.returncode == 1
        assert f"in use by process {daemon.pid}" in done.stderr
        assert "Nothing was changed" in done.stderr
        assert (data / "store.sqlite3").read_bytes() == before
    assert not list(tmp_path.glob("data.replaced-*"))


def test_restore_keeps_an_existing_store_unless_forced_and_then_moves_it_aside(
    small_backup: tuple[Path, Path], tmp_path: Path, env: dict[str, str]
) -> None:
    data, copy = small_backup
    # what a daemon saved beside the store describes that store, not the backup's: it
    # goes aside with it (a saved view of later records would otherwise serve them)
    for kind in lexical_files.KINDS:
        (data / kind.folder).mkdir(exist_ok=True)
        (data / kind.folder / f"saved{kind.suffix}").write_bytes(kind.magic + b"later")
    before = _tree(data)
    done = run(["restore", str(copy), "--data-dir", str(data)], env)
    assert done.returncode == 1 and "already holds a store" in done.stderr
    assert "--force" in done.stderr and _tree(data) == before
    done = run(["restore", str(copy), "--data-dir", str(data), "--force"], env)
    assert done.returncode == 0, done.stderr
    (aside,) = tmp_path.glob("data.replaced-*")
    assert f"moved to {aside}" in done.stderr
    assert stat.S_IMODE(aside.stat().st_mode) == 0o700
    kept = {k: v for k, v in before.items() if k != "LOCK"}
    assert _tree(aside) == kept
    assert (data / "store.sqlite3").read_bytes() == (copy / "store.sqlite3").read_bytes()
    assert stat.S_IMODE((data / "store.sqlite3").stat().st_mode) == 0o600
    assert not any((data / kind.folder).exists() for kind in lexical_files.KINDS)


def test_a_damaged_backup_is_refused_and_nothing_changes(
    small_backup: tuple[Path, Path], tmp_path: Path, env: dict[str, str]
) -> None:
    data, copy = small_backup
    before = _tree(data)
    target = tmp_path / "fresh"

    truncated = tmp_path / "truncated"
    shutil.copytree(copy, truncated)
    db = truncated / "store.sqlite3"
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])
    done = run(["restore", str(truncated), "--data-dir", str(target)], env)
    assert done.returncode == 1 and "truncated or altered" in done.stderr

    # Damage the manifest cannot see (its checksums rewritten to match): the integrity
    # check of the database still refuses it.
    rewritten = tmp_path / "rewritten"
    shutil.copytree(copy, rewritten)
    db = rewritten / "store.sqlite3"
    raw = bytearray(db.read_bytes())
    raw[4096 + 8 : 4096 + 200] = b"\xff" * 192  # the b-tree header of page 2 onwards
    db.write_bytes(bytes(raw))
    manifest = json.loads((rewritten / MANIFEST_NAME).read_text())
    from sidecar.ops.backup_format import sha256_of

    manifest["files"][0]["sha256"] = sha256_of(db)
    (rewritten / MANIFEST_NAME).write_text(json.dumps(manifest))
    done = run(["restore", str(rewritten), "--data-dir", str(data), "--force"], env)
    assert done.returncode == 1, done.stderr
    assert "integrity check failed" in done.stderr or "not a readable store" in done.stderr

    done = run(["restore", str(tmp_path / "home"), "--data-dir", str(target)], env)
    assert done.returncode == 1 and "not a libravdb backup" in done.stderr
    assert not target.exists()
    assert _tree(data) == before
    assert not list(tmp_path.glob("data.replaced-*"))


def test_a_large_backup_draws_its_progress_on_stderr(tmp_path: Path, env: dict[str, str]) -> None:
    """A store of more than one copy step (4096 pages, 16 MiB): the page count is drawn
    (one final line when stderr is not a terminal), then the summary."""
    import numpy as np

    from sidecar.store import Store
    from sidecar.store.types import Put

    data = tmp_path / "big"
    store = Store.open(data, embed_dims=8, fingerprint="test")
    try:
        store.ensure_collections(["user:big"])
        filler = "memory " * 600  # ~4 KiB of text per record
        vec = np.ones(8, dtype=np.float32)
        for start in range(0, 4800, 400):
            store.put_many(
                [
                    Put("user:big", f"r{i}", f"{i} {filler}", {}, vec)
                    for i in range(start, start + 400)
                ]
            )
    finally:
        store.close()
    done = run(["backup", str(tmp_path / "bk"), "--data-dir", str(data)], env, timeout=120)
    assert done.returncode == 0, done.stderr
    progress, summary = done.stderr.splitlines()
    assert progress.startswith("backing up (pages) [" + "#" * 30 + "] ")
    done_pages, total = progress.split("] ")[1].split(" ")[0].split("/")
    assert done_pages == total and int(total) > 4096
    assert summary.startswith("backed up 4800 records in 1 collections")


def test_a_backup_of_a_newer_schema_is_refused_before_anything_changes(
    small_backup: tuple[Path, Path], tmp_path: Path, env: dict[str, str]
) -> None:
    import sqlite3

    from sidecar.ops.backup_format import sha256_of

    _, copy = small_backup
    newer = tmp_path / "newer"
    shutil.copytree(copy, newer)
    conn = sqlite3.connect(newer / "store.sqlite3")
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    manifest = json.loads((newer / MANIFEST_NAME).read_text())
    done = run(["restore", str(newer), "--data-dir", str(tmp_path / "fresh")], env)
    assert done.returncode == 1 and "does not match its checksum" in done.stderr
    db = newer / "store.sqlite3"
    manifest["files"][0].update(sha256=sha256_of(db), bytes=db.stat().st_size)
    (newer / MANIFEST_NAME).write_text(json.dumps(manifest))
    done = run(["restore", str(newer), "--data-dir", str(tmp_path / "fresh")], env)
    assert done.returncode == 1
    assert f"schema_version 99 (manifest: {SCHEMA_VERSION})" in done.stderr
    manifest["schema_version"] = 99
    (newer / MANIFEST_NAME).write_text(json.dumps(manifest))
    done = run(["restore", str(newer), "--data-dir", str(tmp_path / "fresh")], env)
    assert done.returncode == 1 and "written by a newer libravdb" in done.stderr
    assert not (tmp_path / "fresh").exists()
