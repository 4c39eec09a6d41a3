"""One daemon per data directory: an exclusive ``flock`` on ``<data_dir>/LOCK``.

The holder writes its pid into the file so that a refused opener can name it. ``flock``
locks belong to the open file description, so the lock disappears with the process (also on
``kill -9``) and a second opener in the same process is refused too.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

from sidecar.store.errors import StorageUnavailable, StoreLocked

LOCK_NAME = "LOCK"


def read_holder_pid(data_dir: Path) -> int | None:
    try:
        raw = (data_dir / LOCK_NAME).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(raw) if raw.isdigit() else None


class DirLock:
    """Exclusive, non-blocking lock on a data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = data_dir / LOCK_NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StorageUnavailable(
                f"cannot open lock file {self.path}: {exc.strerror}", path=str(self.path)
            ) from exc
        with contextlib.suppress(OSError):  # an earlier version created it 0644
            os.fchmod(fd, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise StoreLocked(str(self.data_dir), read_holder_pid(self.data_dir)) from exc
            raise StorageUnavailable(
                f"cannot lock {self.path}: {exc.strerror}", path=str(self.path)
            ) from exc
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        except OSError:
            pass  # the lock holds even if the pid cannot be recorded (e.g. disk full)
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def __enter__(self) -> DirLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
