"""Access counts of the records ``assemble`` injects, coalesced.

Every injected stored record gets ``access_count += 1`` (the ranking's access-frequency
term reads it). Bumps are coalesced and written at most every :data:`BUMP_DELAY_S` (one
store transaction per round of repeats instead of one per call), and on :meth:`close`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence

import structlog

from sidecar.assembly.cache import CollectionView
from sidecar.assembly.scoring import access_count
from sidecar.assembly.selection import AssemblyPlan

log = structlog.get_logger("sidecar.assembly.service")

BUMP_DELAY_S = 1.0  # access-count bumps are written at most this often

Increment = Callable[[Mapping[str, Sequence[str]]], Awaitable[object]]


class AccessBumps:
    def __init__(self, increment: Increment, delay_s: float = BUMP_DELAY_S) -> None:
        self._increment = increment
        self._delay_s = delay_s
        self._pending: dict[str, dict[str, int]] = {}  # collection -> id -> pending bumps
        self._task: asyncio.Future[None] | None = None

    def bump(self, plan: AssemblyPlan, views: Mapping[str, CollectionView]) -> None:
        """Count ``plan``'s injected stored records (a session's tail is not stored
        memory) and schedule the write."""
        for item in plan.selected:
            if item.part == "tail" and item.collection.startswith("session:"):
                continue
            coll = views.get(item.collection)
            if coll is not None:
                ids = self._pending.setdefault(item.collection, {})
                ids[item.id] = ids.get(item.id, 0) + 1
                # The ranking's access-frequency term reads the cached copy, which no
                # reload refreshes for a bump: count it there too, now.
                j = coll.by_id.get(item.id)
                meta = coll.cands[j].metadata if j is not None else None
                if j is not None and isinstance(meta, dict):
                    meta["access_count"] = access_count(coll.cands[j]) + 1
        if self._pending and self._task is None:
            self._task = asyncio.ensure_future(self._flush_later())

    async def _flush_later(self) -> None:
        try:
            await asyncio.sleep(self._delay_s)
        finally:
            self._task = None
        await self.flush()

    async def flush(self) -> None:
        """Write the pending bumps now (a failure is logged, not raised: the count is
        bookkeeping)."""
        pending, self._pending = self._pending, {}
        rounds = max((n for ids in pending.values() for n in ids.values()), default=0)
        for r in range(1, rounds + 1):  # the store adds 1 per distinct id and call
            updates = {coll: [i for i, n in ids.items() if n >= r] for coll, ids in pending.items()}
            try:
                await self._increment({c: i for c, i in updates.items() if i})
            except Exception as exc:
                log.warning("retrieval.access_bump_failed", error=str(exc))
                return

    async def close(self) -> None:
        """Cancel the scheduled write and write what is pending."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
        await self.flush()
