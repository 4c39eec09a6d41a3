"""Recent answers of the daemon's whole-namespace reads.

``memory.list``, ``sessions.list`` and ``memory.stats`` cost the daemon tens of
milliseconds on a store of 100,000 memories (index reads since schema 5, docs/store.md
"Listing by time"; they used to read every record, 0.8 to 4 s a call). A person browsing
goes back and forth between the same pages, so the UI keeps each answer for a short while
(``TTL_S``) and serves it again, saying how old it is; a page's Refresh link reads it anew,
and any change made through the UI (a correction, a forget) drops every kept answer at
once. Concurrent requests for the same answer share one daemon call. Searches, single
records, expansions and ``assemble`` are cheap and never kept.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

TTL_S = 30.0
MAX_ENTRIES = 256


@dataclass(frozen=True, slots=True)
class Kept:
    value: Any
    at: float  # time.time() when the daemon answered
    expires: float  # on the monotonic clock


class ReadCache:
    def __init__(
        self,
        ttl_s: float = TTL_S,
        size: int = MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s = ttl_s
        self.size = size
        self._clock = clock
        self._kept: OrderedDict[Hashable, Kept] = OrderedDict()
        self._loading: dict[Hashable, asyncio.Future[Kept]] = {}
        self._generation = 0  # moves on clear(): a load begun before it is not kept

    async def get(
        self, key: Hashable, load: Callable[[], Awaitable[T]], *, fresh: bool = False
    ) -> tuple[T, float]:
        """``load()``'s answer and when it was given (epoch seconds): a kept one unless it
        is older than the TTL or ``fresh`` asks for a new one."""
        kept = self._kept.get(key)
        if kept is not None and not fresh and kept.expires > self._clock():
            self._kept.move_to_end(key)
            return kept.value, kept.at
        pending = self._loading.get(key)
        if pending is not None:
            shared = await asyncio.shield(pending)
            return shared.value, shared.at
        future: asyncio.Future[Kept] = asyncio.get_running_loop().create_future()
        self._loading[key] = future
        generation = self._generation
        try:
            value = await load()
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody shared it
            raise
        finally:
            self._loading.pop(key, None)
        kept = Kept(value, time.time(), self._clock() + self.ttl_s)
        future.set_result(kept)
        if generation == self._generation:
            self._kept[key] = kept
            self._kept.move_to_end(key)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        return value, kept.at

    def peek(self, key: Hashable) -> Any | None:
        """The kept answer for ``key`` if there is a fresh one; never asks the daemon."""
        kept = self._kept.get(key)
        if kept is None or kept.expires <= self._clock():
            return None
        return kept.value

    def clear(self) -> None:
        """Forget every kept answer (after a write through the UI)."""
        self._kept.clear()
        self._generation += 1
