"""Session locks that also hold across daemons sharing one store.

:class:`KeyedLocks` serializes the coroutines of one daemon. When several daemons serve one
PostgreSQL database, each read-modify-write of a session (ingest, compaction, forget,
``memory.update``) must exclude the other daemons too, or two compactions of one session
write two sets of summaries and a forget races an ingest that brings the data back.
:class:`SharedLocks` takes the local lock first (so one daemon's waiters queue in memory,
not on the database), then the store's lock of the same key
(:meth:`AsyncStore.session_lock`: a PostgreSQL advisory lock on a connection of its own,
waited for in a thread of its own).

On the embedded SQLite store only one daemon opens the data directory (its ``LOCK``), so
the local lock is the whole answer and the store is not asked: no thread, nothing slower
than before.

Lock order, to stay free of deadlocks between daemons: a session's compaction lock before
its ingest lock, sessions in sorted order, and the namespace lock (``memory.update``,
ingest's change marks, forget) after every session lock.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from sidecar.memory.core.keyed_locks import KeyedLocks

if TYPE_CHECKING:
    from sidecar.store.aio import AsyncStore


def is_shared(store: object) -> bool:
    """Whether other daemons may write the store (a PostgreSQL store; ``store`` is a
    backend, ``StoreBackend.backend`` names it)."""
    return getattr(store, "backend", "sqlite") != "sqlite"


class SharedLocks:
    """Per-key locks for this process and, on a shared store, every daemon on it.

    ``scope`` prefixes the store's key (``compact``, ``ingest``, ``ns``), so that the
    session id ``s`` names different locks for compaction and ingest."""

    def __init__(self, scope: str, store: Callable[[], AsyncStore]) -> None:
        self.scope = scope
        self._store = store
        self._local = KeyedLocks()

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        async with self._local.hold(key):
            store = self._store()
            if not is_shared(store.store):
                yield
                return
            async with store.session_lock(_store_key(f"{self.scope}:{key}")):
                yield

    def locked(self, key: str) -> bool:
        """Held (or awaited) in this process."""
        return self._local.locked(key)

    def __len__(self) -> int:
        return len(self._local)


def _store_key(key: str) -> str:
    """``key`` as the database can take it: PostgreSQL text holds no NUL, and a session id
    is validated only after its lock is held (escaped injectively: ``\\`` -> ``\\\\``,
    NUL -> ``\\0``)."""
    return key.replace("\\", "\\\\").replace("\x00", "\\0")
