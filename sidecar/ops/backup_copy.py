"""``libravdb backup``: a consistent copy of a store, taken while the daemon runs.

The database is copied with SQLite's online backup API from a connection that holds one
read transaction for the whole copy. In WAL mode that transaction is a snapshot: the
daemon keeps writing (its writes go to the WAL, which the snapshot does not see), and the
copy is that snapshot page for page, however many steps it takes. Without the held
transaction each step would start a new one, and a write between steps would restart
the copy from the first page (for a busy large store, forever).

No directory lock is taken (the daemon holds it). The HNSW files in ``index/`` are not
copied: they are derived from the database and rebuilt when the restored store opens.
``embedding.json`` is not copied either: the daemon rewrites it at every open.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sidecar import __version__
from sidecar.ops.backup_format import (
    FORMAT,
    FORMAT_VERSION,
    WATCH_STATE_NAME,
    BackupError,
    BackupFile,
    Manifest,
    check_database,
    database_facts,
    describe_file,
    fsync_path,
    remove_tree,
    write_manifest,
)
from sidecar.store.files import DB_NAME, now_ms

# (pages copied, pages in total): called after every step of the copy.
PageProgress = Callable[[int, int], None]
# 4096 pages of 4 KiB = 16 MiB per step: steps short enough for a smooth progress bar.
DEFAULT_STEP_PAGES = 4096


@dataclass(frozen=True, slots=True)
class BackupSummary:
    path: Path
    records: int
    collections: int
    bytes: int
    seconds: float
    fingerprint: str
    # Directories above ``path`` that did not exist and were made for it, outermost first.
    created: tuple[Path, ...] = ()

    def line(self) -> str:
        made = f" (created {self.created[0]})" if self.created else ""
        return (
            f"backed up {self.records} records in {self.collections} collections "
            f"({self.bytes} bytes) to {self.path}{made} in {self.seconds:.1f} s"
        )


def make_backup(
    data_dir: Path,
    dest: Path,
    *,
    step_pages: int = DEFAULT_STEP_PAGES,
    progress: PageProgress | None = None,
) -> BackupSummary:
    """Write a backup of the store in ``data_dir`` to the new directory ``dest``.

    The backup is assembled in a temporary directory beside ``dest`` and renamed to it only
    once it is complete, flushed to disk and verified; on any failure ``dest`` does not
    exist and the temporary directory is removed."""
    t0 = time.monotonic()
    source_db = data_dir / DB_NAME
    if not source_db.is_file():
        raise BackupError(
            f"no store in {data_dir} (no {DB_NAME} there): check --data-dir or "
            "LIBRAVDB_DATA_DIR; nothing was written"
        )
    if os.path.lexists(dest):
        raise BackupError(f"{dest} already exists; name a new path (nothing was written)")
    parent = dest.parent
    created = make_parents(parent)
    tmp = parent / f".{dest.name}.partial-{os.getpid()}"
    try:
        try:
            tmp.mkdir(mode=0o700)
        except OSError as exc:
            raise BackupError(f"cannot create {tmp}: {exc.strerror}; nothing was written") from exc
        try:
            manifest = _fill(data_dir, tmp, step_pages, progress)
            write_manifest(tmp, manifest)
            fsync_path(tmp)
            os.rename(tmp, dest)
            fsync_path(parent)
        except BaseException:
            remove_tree(tmp)
            raise
    except BaseException:
        for made in reversed(created):  # a failed backup leaves no trace, parents included
            with contextlib.suppress(OSError):
                made.rmdir()
        raise
    total = sum(f.bytes for f in manifest.files)
    return BackupSummary(
        dest,
        manifest.records,
        manifest.collections,
        total,
        time.monotonic() - t0,
        manifest.fingerprint,
        tuple(created),
    )


def make_parents(parent: Path) -> list[Path]:
    """Create the missing directories of ``parent`` (owner-only), outermost first, and
    return them: ``libravdb backup ~/backups/memory-...`` on an account without
    ``~/backups`` makes it. A part of the path that exists and is not a directory is
    refused with its name."""
    missing: list[Path] = []
    at = parent
    while not at.is_dir():
        if os.path.lexists(at):
            raise BackupError(f"{at} is not a directory; nothing was written")
        missing.append(at)
        at = at.parent
    missing.reverse()
    created: list[Path] = []
    for directory in missing:
        try:
            directory.mkdir(mode=0o700)
        except OSError as exc:
            for made in reversed(created):
                with contextlib.suppress(OSError):
                    made.rmdir()
            raise BackupError(
                f"cannot create {directory}: {exc.strerror}; nothing was written"
            ) from exc
        created.append(directory)
    return created


def _fill(data_dir: Path, tmp: Path, step_pages: int, progress: PageProgress | None) -> Manifest:
    files: list[BackupFile] = []
    # The watcher state is copied before the database snapshot, so it is never newer than
    # the records: at worst the restored daemon re-hashes a file and finds it unchanged,
    # or re-ingests a document that changed after this copy (idempotent); it never skips
    # a change the snapshot lacks.
    state = data_dir / WATCH_STATE_NAME
    if state.is_file():
        copy = tmp / WATCH_STATE_NAME
        copy.write_bytes(state.read_bytes())
        os.chmod(copy, 0o600)
        fsync_path(copy)
        files.append(describe_file(copy))
    target = tmp / DB_NAME
    facts = _copy_database(data_dir / DB_NAME, target, step_pages, progress)
    files.insert(0, describe_file(target))
    checked = check_database(target)
    if checked != facts:
        raise BackupError(f"the copy differs from its source snapshot ({checked} != {facts})")
    return Manifest(
        format=FORMAT,
        format_version=FORMAT_VERSION,
        created_ms=now_ms(),
        libravdb_version=__version__,
        source_data_dir=str(data_dir),
        files=files,
        **facts,
    )


def _copy_database(
    source: Path, target: Path, step_pages: int, progress: PageProgress | None
) -> dict[str, Any]:
    """Copy ``source`` to the new file ``target`` from one snapshot; the snapshot's facts."""
    try:
        src = sqlite3.connect(source, isolation_level=None, timeout=30.0)
    except sqlite3.Error as exc:
        raise BackupError(f"cannot open {source}: {exc}; nothing was written") from exc
    try:
        src.execute("PRAGMA query_only = 1")
        src.execute("BEGIN")
        # The first read fixes the snapshot; the facts and every page come from it.
        facts = database_facts(src)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        dst = sqlite3.connect(target, isolation_level=None)
        try:

            def step(_status: int, remaining: int, total: int) -> None:
                if progress is not None:
                    progress(total - remaining, total)

            src.backup(dst, pages=max(1, step_pages), progress=step)
            # A standalone file: the copy carries the source's WAL mode in its header,
            # which would need -wal/-shm beside it; the daemon turns WAL on again.
            dst.execute("PRAGMA journal_mode = DELETE")
        finally:
            dst.close()
        src.execute("COMMIT")
    except sqlite3.Error as exc:
        raise BackupError(f"copying {source} failed: {exc}; nothing was written") from exc
    finally:
        src.close()
    fsync_path(target)
    return facts
