"""Per-key asyncio locks that exist only while they are held or awaited.

A dict of one lock per session id grows by one entry for every session the daemon ever
sees; a long-running daemon leaks them. Here the entry is created on the first ``hold``
and dropped when its last holder or waiter leaves, so the table holds only sessions with
work in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field


@dataclass(slots=True)
class _Entry:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0  # holders plus waiters


class KeyedLocks:
    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Hold ``key``'s lock for the body (waiting for the current holder first)."""
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0 and self._entries.get(key) is entry:
                del self._entries[key]

    def locked(self, key: str) -> bool:
        entry = self._entries.get(key)
        return entry is not None and entry.lock.locked()

    def __len__(self) -> int:
        """Keys with a holder or a waiter."""
        return len(self._entries)
