"""``libravdb restore``: put a backup back into a data directory, the daemon stopped.

Order of work, so that a refusal or a failure changes nothing: the backup is verified in
full (manifest, sizes, checksums, integrity check) before the data directory is touched;
the directory's lock is taken (a running daemon holds it: refused, naming its pid); an
existing store is refused unless ``force``, and then moved aside whole, never deleted. The
database is copied under a temporary name, checked against the manifest and renamed into
place. No index is written: the store rebuilds its vector indexes when it next opens (and
what the daemon saved beside the store, BM25 terms and views, goes aside with the store).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from sidecar.ops.backup_format import (
    WATCH_STATE_NAME,
    BackupError,
    Manifest,
    fsync_path,
    sha256_of,
    verify_backup,
)
from sidecar.store import lexical_files
from sidecar.store.errors import StoreError, StoreLocked
from sidecar.store.files import DB_NAME, INDEX_DIR, PROFILE_FILE
from sidecar.store.lock import DirLock
from sidecar.store.schema import SCHEMA_VERSION

# Everything of a data directory that belongs to its store (LOCK aside, which stays).
STORE_ENTRIES = (
    DB_NAME,
    DB_NAME + "-wal",
    DB_NAME + "-shm",
    DB_NAME + "-journal",
    INDEX_DIR,
    PROFILE_FILE,
    WATCH_STATE_NAME,
    # what the daemon saved beside the store (BM25 terms, views) describes that store
    *dict.fromkeys(kind.folder for kind in lexical_files.KINDS),  # two kinds share one
)


@dataclass(frozen=True, slots=True)
class RestoreSummary:
    data_dir: Path
    manifest: Manifest
    moved_aside: Path | None
    seconds: float

    def line(self) -> str:
        m = self.manifest
        taken = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(m.created_ms / 1000))
        text = (
            f"restored {m.records} records in {m.collections} collections (backup taken "
            f"{taken}, model {m.model or 'unknown'}) into {self.data_dir} in "
            f"{self.seconds:.1f} s; the vector indexes are rebuilt when the daemon starts"
        )
        if self.moved_aside is not None:
            text += f"\nthe store that was there was moved to {self.moved_aside}"
        return text


def restore_backup(backup: Path, data_dir: Path, *, force: bool) -> RestoreSummary:
    t0 = time.monotonic()
    manifest = verify_backup(backup)
    if manifest.schema_version > SCHEMA_VERSION:
        raise BackupError(
            f"{backup} was written by a newer libravdb (store schema "
            f"{manifest.schema_version}, this version reads up to {SCHEMA_VERSION}); "
            "restore it with that version. Nothing was changed."
        )
    try:
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise BackupError(f"cannot create {data_dir}: {exc.strerror}; nothing was changed") from exc
    lock = DirLock(data_dir)
    try:
        lock.acquire()
    except StoreLocked as exc:
        who = f"process {exc.data['pid']}" if exc.data.get("pid") else "another process"
        raise BackupError(
            f"data directory {data_dir} is in use by {who}, a running daemon. "
            "`libravdb restore` works on a stopped daemon's directory: stop the daemon "
            "(`libravdb call shutdown`, or Ctrl-C where it runs), then run this again. "
            "Nothing was changed."
        ) from exc
    except StoreError as exc:
        raise BackupError(f"{exc.message}; nothing was changed") from exc
    try:
        present = [name for name in STORE_ENTRIES if os.path.lexists(data_dir / name)]
        if present and not force:
            raise BackupError(
                f"{data_dir} already holds a store ({', '.join(present)}); pass --force to "
                "replace it (it is moved aside, not deleted). Nothing was changed."
            )
        aside = _move_aside(data_dir, present) if present else None
        try:
            _put_back(backup, data_dir, manifest)
        except BaseException:
            _undo(data_dir, aside, present)
            raise
    finally:
        lock.release()
    return RestoreSummary(data_dir, manifest, aside, time.monotonic() - t0)


def _move_aside(data_dir: Path, present: list[str]) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = data_dir.with_name(f"{data_dir.name}.replaced-{stamp}")
    n = 1
    while os.path.lexists(aside):
        n += 1
        aside = data_dir.with_name(f"{data_dir.name}.replaced-{stamp}-{n}")
    try:
        aside.mkdir(mode=0o700)
    except OSError as exc:
        raise BackupError(
            f"cannot create {aside} to keep the current store: {exc.strerror}; nothing was changed"
        ) from exc
    moved: list[str] = []
    try:
        for name in present:
            os.rename(data_dir / name, aside / name)
            moved.append(name)
    except OSError as exc:
        for name in moved:
            with contextlib.suppress(OSError):
                os.rename(aside / name, data_dir / name)
        with contextlib.suppress(OSError):
            aside.rmdir()
        raise BackupError(
            f"cannot move the current store to {aside}: {exc.strerror}; nothing was changed"
        ) from exc
    fsync_path(data_dir)
    return aside


def _put_back(backup: Path, data_dir: Path, manifest: Manifest) -> None:
    for entry in manifest.files:
        final = data_dir / entry.name
        partial = data_dir / f".{entry.name}.restoring"
        with (backup / entry.name).open("rb") as src:
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
                dst.flush()
                os.fsync(dst.fileno())
        if sha256_of(partial) != entry.sha256:
            partial.unlink()
            raise BackupError(f"the copy of {entry.name} does not match the backup; retry")
        os.rename(partial, final)
    fsync_path(data_dir)


def _undo(data_dir: Path, aside: Path | None, present: list[str]) -> None:
    """A failed restore leaves the directory as it found it."""
    for name in STORE_ENTRIES:
        for path in (data_dir / f".{name}.restoring", data_dir / name):
            if path.is_file():  # every store file there now is the restore's: present moved
                with contextlib.suppress(OSError):
                    path.unlink()
    if aside is None:
        return
    for name in present:
        with contextlib.suppress(OSError):
            os.rename(aside / name, data_dir / name)
    with contextlib.suppress(OSError):
        aside.rmdir()
