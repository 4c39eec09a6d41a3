"""The files of a store's data directory: their names, their owner-only permissions, and
the wall clock the store stamps records with."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

DB_NAME = "store.sqlite3"
INDEX_DIR = "index"
PROFILE_FILE = "embedding.json"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def make_private(path: Path, others: Sequence[Path], *, directory: bool = False) -> None:
    """Owner-only modes (0600 files, 0700 directories) on the store's own files.

    Memories are personal data: files written by an earlier version or under a lax umask
    were readable by every local user.
    """
    for target, mode in [(path, 0o700 if directory else 0o600), *((p, 0o600) for p in others)]:
        try:
            if target.exists() and (target.stat().st_mode & 0o777) != mode:
                os.chmod(target, mode)
        except OSError as exc:
            log.warning("store.chmod_failed", path=str(target), error=exc.strerror)


def warn_if_shared(data_dir: Path) -> None:
    """A data directory others can enter exposes every memory's metadata (names, sizes);
    it is the user's directory, so it is reported, not changed."""
    with contextlib.suppress(OSError):
        mode = data_dir.stat().st_mode & 0o777
        if mode & 0o077:
            log.warning(
                "data_dir_not_private",
                data_dir=str(data_dir),
                mode=f"{mode:04o}",
                fix=f"chmod 700 {data_dir}",
            )
