"""Session locks of the SQLite store: one ``threading.Lock`` per key.

The data directory has one owner process (``DirLock``), so excluding the other threads of
that process is enough: there is no second daemon to exclude. The PostgreSQL store uses
advisory locks instead (``sidecar.store.pg.locks``)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from sidecar.store.errors import SessionLocked


class _Lease:
    __slots__ = ("_held", "_key", "_lock", "_owner")

    def __init__(self, owner: LocalLocks, key: str, lock: threading.Lock) -> None:
        self._owner, self._key, self._lock, self._held = owner, key, lock, True

    def release(self) -> None:
        with self._owner._guard:
            if not self._held:
                return
            self._held = False
            self._lock.release()
            self._owner._drop_if_idle(self._key)


class LocalLocks:
    """Named locks; an entry lives while someone holds or waits for it."""

    def __init__(self, where: str) -> None:
        self._where = where
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}  # key -> (lock, users)

    def _enter(self, key: str) -> threading.Lock:
        with self._guard:
            lock, users = self._locks.get(key, (None, 0))
            if lock is None:
                lock = threading.Lock()
            self._locks[key] = (lock, users + 1)
            return lock

    def _drop_if_idle(self, key: str) -> None:
        """One user less (caller holds ``_guard``); forget the key when none is left."""
        lock, users = self._locks[key]
        if users <= 1:
            del self._locks[key]
        else:
            self._locks[key] = (lock, users - 1)

    def try_acquire(self, key: str) -> _Lease | None:
        lock = self._enter(key)
        if lock.acquire(blocking=False):
            return _Lease(self, key, lock)
        with self._guard:
            self._drop_if_idle(key)
        return None

    def acquire(self, key: str, timeout: float | None) -> _Lease:
        lock = self._enter(key)
        if lock.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
            return _Lease(self, key, lock)
        with self._guard:
            self._drop_if_idle(key)
        raise SessionLocked(key, timeout, self._where)

    @contextlib.contextmanager
    def hold(self, key: str, timeout: float | None) -> Iterator[None]:
        lease = self.acquire(key, timeout)
        try:
            yield
        finally:
            lease.release()
