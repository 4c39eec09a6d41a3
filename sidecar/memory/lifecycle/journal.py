"""The host lifecycle journal.

Every ``session_lifecycle_hint`` / ``lifecycle.hint`` appends one record to the vectorless
collection ``_internal:lifecycle_journal``; the id keeps the reference format
``<hook|unknown>:<sessionId|none>:<unixNano>`` (nanoseconds made strictly increasing within
the process, so two hints in the same clock tick never collide). The append and the
pruning to ``journal.max_entries`` (0 = unbounded) are ONE store transaction; the oldest
entries go first (``ts`` then store sequence then id).

Listing is newest first (``ts`` desc, then store sequence desc), optionally filtered by
``sessionId`` and/or ``hook``, then cut to ``limit`` (<= 0 = all). The reference sorted by
id (hook name first), so its ``limit`` did not return the most recent entries.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sidecar.memory.core.layout import LIFECYCLE_JOURNAL
from sidecar.store.types import Delete, Put, Record

if TYPE_CHECKING:
    from sidecar.store.service import StoreService

JOURNAL_COLLECTION = LIFECYCLE_JOURNAL
SOURCE = "openclaw-hook"

_clock_lock = threading.Lock()
_last_ns = 0


def _unique_ns() -> int:
    global _last_ns
    with _clock_lock:
        now = max(time.time_ns(), _last_ns + 1)
        _last_ns = now
        return now


def journal_id(hook: str, session_id: str, unix_ns: int) -> str:
    return f"{hook or 'unknown'}:{session_id or 'none'}:{unix_ns}"


def _num(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value)


def _age_key(r: Record) -> tuple[float, int, str]:
    return (_num(r.metadata.get("ts")), r.seq, r.id)


@dataclass(frozen=True, slots=True)
class JournalAppend:
    id: str
    ts: int
    pruned: int
    metadata: dict[str, Any]


class LifecycleJournal:
    """Append / prune / list the journal. One per daemon (built in ``sidecar.services``)."""

    def __init__(self, svc: StoreService, max_entries: int) -> None:
        self.svc = svc
        self.max_entries = max(0, int(max_entries))
        self._lock = asyncio.Lock()

    async def append(self, hook: str, session_id: str, fields: Mapping[str, Any]) -> JournalAppend:
        """Store ``fields`` (the hint's params) plus the reference bookkeeping keys."""
        ns = _unique_ns()
        ts = ns // 1_000_000
        meta: dict[str, Any] = dict(fields)
        meta.update(
            type="session_lifecycle_hint",
            internal=True,
            ts=ts,
            source=SOURCE,
            ingest_kind="lifecycle_journal",
        )
        rid = journal_id(hook, session_id, ns)
        store = self.svc.store
        async with self._lock:
            doomed: list[str] = []
            if self.max_entries > 0 and store.store.collection(JOURNAL_COLLECTION) is not None:
                existing = await store.list_records(JOURNAL_COLLECTION)
                excess = len(existing) + 1 - self.max_entries
                if excess > 0:
                    existing.sort(key=_age_key)
                    doomed = [r.id for r in existing[:excess]]
            ops: list[Put | Delete] = [Put(JOURNAL_COLLECTION, rid, "", meta)]
            ops += [Delete(JOURNAL_COLLECTION, d) for d in doomed]
            await store.write(ops)
        return JournalAppend(rid, ts, len(doomed), meta)

    async def entries(
        self, *, session_id: str = "", hook: str = "", limit: int = 0
    ) -> tuple[list[Record], int]:
        """``(records newest first, total matching before the limit)``."""
        store = self.svc.store
        if store.store.collection(JOURNAL_COLLECTION) is None:
            return [], 0
        where: dict[str, Any] = {}
        if session_id:
            where["sessionId"] = session_id
        if hook:
            where["hook"] = hook
        recs = await store.list_records(JOURNAL_COLLECTION, where=where or None)
        recs.sort(key=_age_key, reverse=True)
        total = len(recs)
        if limit > 0:
            recs = recs[:limit]
        return recs, total
